package workflow_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/blobhash"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// TestAudioDiskFull renders onto a 2 MiB file system that fills up after a few lines.
// The lines that find no space fail at once with the disk-full message, nothing
// half-written is left behind, and once there is space again a retry of the failed
// lines renders them, each done exactly once.
func TestAudioDiskFull(t *testing.T) {
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("cannot fill a disk in this test: mounting a small tmpfs needs root")
	}
	t.Parallel()
	ctx := context.Background()
	b := setupFault(t, 30)
	b.DataDir = filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(b.DataDir, 0o755))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", b.DataDir).CombinedOutput(); err != nil {
		t.Skipf("cannot fill a disk in this test: mounting a 2 MiB tmpfs failed: %v: %s", err, out)
	}
	// Registered after t.TempDir's own cleanup, so it runs before the removal.
	t.Cleanup(func() { _ = exec.Command("umount", "-l", b.DataDir).Run() })

	// espeak-ng, since every line must make different audio: the blob store keeps
	// one copy of identical takes.
	b.startWorkerWith(t, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 2), nil)
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, 2*time.Minute)
	require.Positive(t, counts[studio.StateFailed], "the disk filled up: %v", counts)
	require.Positive(t, counts[studio.StateDone]+counts[studio.StateNeedsReview], "lines rendered before it did: %v", counts)
	for _, l := range b.Lines(t) {
		if l.State == studio.StateFailed {
			require.Contains(t, l.LastError, `"audio.no_space"`, "line %d: %s", l.Idx, l.LastTraceback)
			require.Equal(t, 1, l.Attempts, "a full disk is not retried blindly")
		}
	}
	b.requireNoPartialFiles(t)

	// Space comes back: the failed lines render from the failed list.
	out, err := exec.Command("mount", "-o", "remount,size=64m", b.DataDir).CombinedOutput()
	require.NoError(t, err, string(out))
	n, err := b.Pipeline.RetryFailed(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, counts[studio.StateFailed], n)
	b.WaitSettled(t, 2*time.Minute)
	b.requireDoneOnce(t, 30)
	b.requireNoPartialFiles(t)
}

// requireNoPartialFiles checks the data directory: no temporary files are left, and
// every stored blob is complete: its content hashes to its name and it is recorded
// with its size.
func (b *testBundle) requireNoPartialFiles(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	blobs := filepath.Join(b.DataDir, "blobs")
	n := 0
	err := filepath.WalkDir(b.DataDir, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(b.DataDir, path)
		dir, _ := filepath.Rel(blobs, filepath.Dir(path))
		require.True(t, filepath.Dir(filepath.Dir(path)) == blobs && len(dir) == 2, "a file outside the blob store: %s", rel)
		sum, err := blobhash.File(path)
		require.NoError(t, err)
		require.Equal(t, filepath.Base(path), sum, "blob %s is what its name says", rel)
		st, err := os.Stat(path)
		require.NoError(t, err)
		blob, err := b.Store.Blob(ctx, sum)
		require.NoError(t, err, "blob %s is recorded", rel)
		require.Equal(t, st.Size(), blob.SizeBytes)
		n++
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, n)
}
