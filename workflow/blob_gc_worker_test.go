package workflow_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// TestBlobCollectorRunsPeriodically starts a worker whose collector runs every
// second: River's leader inserts collect_blobs, which removes the old blob nothing
// refers to (row and file), keeps the project's source and a young blob, and leaves
// its figures for the admin page.
func TestBlobCollectorRunsPeriodically(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	bs := studio.BlobStore{Dir: filepath.Join(b.DataDir, "blobs")}
	put := func(content string, age time.Duration) *studio.Blob {
		p := filepath.Join(t.TempDir(), "blob")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		blob, err := b.Store.PutBlob(ctx, bs, p, studio.Blob{Format: "wav", DurationMs: 1000, SampleRate: 48000, Channels: 1})
		require.NoError(t, err)
		_, err = b.Store.Pool().Exec(ctx, `UPDATE blobs SET created_at = now() - $2::interval WHERE sha256 = $1`,
			blob.SHA256, age.String())
		require.NoError(t, err)
		path, err := bs.Path(blob.SHA256)
		require.NoError(t, err)
		then := time.Now().Add(-age)
		require.NoError(t, os.Chtimes(path, then, then))
		return blob
	}
	orphan := put("replaced long ago", 72*time.Hour)
	source := put("the project's source", 72*time.Hour)
	_, err := b.Store.Pool().Exec(ctx, `INSERT INTO project_sources (project_id, audio_sha256, duration_ms, channels)
		VALUES ($1, $2, 1000, 1)`, b.Project.ID, source.SHA256)
	require.NoError(t, err)
	young := put("uploaded a moment ago", time.Minute)

	b.startWorkerWith(t, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1), func(c *workflow.WorkerConfig) {
		c.BlobGCInterval = time.Second
		c.BlobGCGrace = time.Hour
	})
	var run *studio.BlobGCRun
	require.Eventually(t, func() bool {
		run, err = b.Store.LastBlobGCRun(ctx)
		require.NoError(t, err)
		return run != nil
	}, 60*time.Second, 100*time.Millisecond, "no collect_blobs run")
	require.Empty(t, run.Error)
	require.Equal(t, 1, run.RemovedBlobs)
	require.Equal(t, orphan.SizeBytes, run.RemovedBytes)
	require.GreaterOrEqual(t, run.KeptBlobs, 2)
	require.Equal(t, time.Second, run.NextAt().Sub(run.StartedAt))

	_, err = b.Store.Blob(ctx, orphan.SHA256)
	require.ErrorIs(t, err, studio.ErrNotFound)
	p, _ := bs.Path(orphan.SHA256)
	require.NoFileExists(t, p)
	for _, kept := range []*studio.Blob{source, young} {
		_, err = b.Store.Blob(ctx, kept.SHA256)
		require.NoError(t, err)
		p, _ := bs.Path(kept.SHA256)
		require.FileExists(t, p)
	}
}
