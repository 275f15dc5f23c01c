package workflow_test

import (
	"context"
	"fmt"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/tts"
)

// refusingEngine refuses every reference voice, as a model does a recording it
// cannot clone (silent, too short, corrupt).
type refusingEngine struct {
	tts.Engine
	prepared atomic.Int64
}

func (r *refusingEngine) PrepareSpeaker(context.Context, tts.PrepareRequest) (tts.PrepareResult, error) {
	r.prepared.Add(1)
	return tts.PrepareResult{}, &tts.Error{Code: tts.CodeInvalidInput, Message: "the reference is silent"}
}

// setReferences gives every character of the bundle's project a reference voice.
func (b *testBundle) setReferences(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	blobs := studio.BlobStore{Dir: b.DataDir + "/blobs"}
	chars, err := b.Store.Characters(ctx, b.Project.ID)
	require.NoError(t, err)
	for i, c := range chars {
		ref := fmt.Sprintf("%s/ref-%d.wav", t.TempDir(), i)
		out, err := exec.Command("espeak-ng", "-w", ref, "This is the reference voice of "+c.Name+".").CombinedOutput()
		require.NoError(t, err, string(out))
		blob, err := b.Store.PutBlob(ctx, blobs, ref, studio.Blob{Format: "wav", DurationMs: 2000, SampleRate: 22050, Channels: 1})
		require.NoError(t, err)
		require.NoError(t, b.Store.SetCharacterReference(ctx, b.Project.ID, c.ID, blob.SHA256, "ref.wav"))
	}
}

// TestRefusedReferenceFailsItsLines: a character's reference voice that the engine
// refuses fails the lines waiting for its conditioning, with a message that names
// the character. Before the fix they waited in queued for good, each snoozing and
// queueing the preparation again, which failed again, twice a second.
func TestRefusedReferenceFailsItsLines(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	ctx := context.Background()
	b.setReferences(t)
	eng := &refusingEngine{Engine: tts.NewEspeak(tts.EspeakConfig{})}
	b.startWorker(t, workerOpts{engine: eng, permits: 2})
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, 30*time.Second)
	require.Equal(t, 4, counts[studio.StateFailed], "%v", counts)
	for _, l := range b.Lines(t) {
		require.Contains(t, l.LastError, "render.speaker_failed")
		require.Contains(t, l.LastError, "the reference is silent")
	}
	require.LessOrEqual(t, eng.prepared.Load(), int64(2), "once per character")

	// Asked again (the engine fixed, say), the preparation is tried again.
	n, err := b.Pipeline.RetryFailed(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	counts = b.WaitSettled(t, 30*time.Second)
	require.Equal(t, 4, counts[studio.StateFailed], "%v", counts)
	require.GreaterOrEqual(t, eng.prepared.Load(), int64(3), "a new render tries the preparation again")
	require.LessOrEqual(t, eng.prepared.Load(), int64(4))
}
