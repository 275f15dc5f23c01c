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

// countingEngine counts how often the real engine computes speaker conditioning.
type countingEngine struct {
	tts.Engine
	prepared atomic.Int64
}

func (c *countingEngine) PrepareSpeaker(ctx context.Context, req tts.PrepareRequest) (tts.PrepareResult, error) {
	c.prepared.Add(1)
	return c.Engine.PrepareSpeaker(ctx, req)
}

func TestSpeakerConditioningOncePerCharacter(t *testing.T) {
	t.Parallel()
	b := setup(t, 12)
	ctx := context.Background()
	blobs := studio.BlobStore{Dir: b.DataDir + "/blobs"}
	chars, err := b.Store.Characters(ctx, b.Project.ID)
	require.NoError(t, err)
	for i, c := range chars {
		ref := fmt.Sprintf("%s/ref-%d.wav", t.TempDir(), i)
		out, err := exec.Command("espeak-ng", "-w", ref, fmt.Sprintf("This is the reference voice of %s.", c.Name)).CombinedOutput()
		require.NoError(t, err, string(out))
		blob, err := b.Store.PutBlob(ctx, blobs, ref, studio.Blob{Format: "wav", DurationMs: 2000, SampleRate: 22050, Channels: 1})
		require.NoError(t, err)
		require.NoError(t, b.Store.SetCharacterReference(ctx, b.Project.ID, c.ID, blob.SHA256, "ref.wav"))
	}
	eng := &countingEngine{Engine: tts.NewEspeak(tts.EspeakConfig{})}
	b.startWorker(t, workerOpts{engine: eng, permits: 3})
	_, err = b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, 2*time.Minute)
	require.Equal(t, 12, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	require.EqualValues(t, 2, eng.prepared.Load(), "once per character, not per line")

	// Regenerating every line computes nothing again.
	ids := []int64{}
	for _, l := range b.Lines(t) {
		ids = append(ids, l.ID)
	}
	_, err = b.Pipeline.RenderLines(ctx, b.Project.ID, ids)
	require.NoError(t, err)
	b.WaitSettled(t, 2*time.Minute)
	require.EqualValues(t, 2, eng.prepared.Load())
}
