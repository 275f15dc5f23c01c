package workflow

import (
	"context"
	"sync"
	"testing"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"dubstudio/internal/simdev"
	"dubstudio/studio"
	"dubstudio/tts"
)

// scriptedEngine fails its syntheses with errs, one each, then speaks.
type scriptedEngine struct {
	tts.Engine
	mu   sync.Mutex
	errs []error
}

func (e *scriptedEngine) Synthesize(ctx context.Context, req tts.Request) (tts.Result, error) {
	e.mu.Lock()
	var err error
	if len(e.errs) > 0 {
		err, e.errs = e.errs[0], e.errs[1:]
	}
	e.mu.Unlock()
	if err != nil {
		return tts.Result{}, err
	}
	return e.Engine.Synthesize(ctx, req)
}

// TestOutOfMemoryAfterAnotherFailureIsRetried: OOM_RETRIES counts the attempts that
// ran out of memory, not all of them. A first OOM on attempt 2, after an engine
// error on attempt 1, was taken for the last OOM allowed and failed the line for
// good; it is retried, and the second OOM in the job fails the line.
func TestOutOfMemoryAfterAnotherFailureIsRetried(t *testing.T) {
	t.Parallel()
	b := setupRivertest(t, 1, 1)
	b.w.cfg.OOMRetries = 1
	sim, err := tts.NewSimulator(tts.SimulatorConfig{Device: simdev.New(24 << 30), FollowTarget: true, Tone: true})
	require.NoError(t, err)
	oom := func() error { return &tts.Error{Code: tts.CodeOutOfMemory, Message: "CUDA out of memory"} }
	b.w.permits = NewLocalPermits(&scriptedEngine{Engine: sim, errs: []error{
		&tts.Error{Code: tts.CodeInternal, Message: "the host restarted"}, oom(), oom()}}, 1)
	l := b.lines[0]
	ctx := context.Background()
	res, err := b.synth.Work(ctx, t, b.tx, SynthesizeArgs{LineID: l.ID, RenderSeq: l.RenderSeq, ProjectID: b.project.ID},
		&river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{}})
	require.Error(t, err)
	require.Equal(t, river.EventKindJobFailed, res.EventKind, "attempt 1: the engine's error is retried")
	line := func() *studio.Line {
		got, err := b.store.Line(ctx, b.project.ID, l.ID)
		require.NoError(t, err)
		return got
	}

	res, err = b.synth.WorkJob(ctx, t, b.tx, res.Job)
	require.Error(t, err)
	require.Equal(t, river.EventKindJobFailed, res.EventKind, "attempt 2: the first OOM is retried")
	got := line()
	require.Equal(t, studio.StateQueued, got.State, got.LastError)
	require.Contains(t, got.LastError, "out_of_memory")

	res, _ = b.synth.WorkJob(ctx, t, b.tx, res.Job)
	require.Equal(t, river.EventKindJobCancelled, res.EventKind, "attempt 3: the second OOM exceeds OOM_RETRIES (1)")
	got = line()
	require.Equal(t, studio.StateFailed, got.State)
	require.Equal(t, 3, got.Attempts)
	require.Contains(t, got.LastError, "out_of_memory")
}
