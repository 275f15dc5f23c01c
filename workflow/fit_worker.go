package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"dubstudio/audio"
	"dubstudio/studio"
)

// fitWorker works fit jobs: a take that a synthesis handed on because its worker's
// fits were backed up (fitHere), fitted by any worker from the blob store.
type fitWorker struct {
	river.WorkerDefaults[FitArgs]
	w *Worker
}

// Work fits the take; an error no step recorded is recorded on the line (settle).
func (f *fitWorker) Work(ctx context.Context, job *river.Job[FitArgs]) error {
	return f.w.settle(ctx, job.JobRow, job.Args.LineID, job.Args.RenderSeq, func() error { return f.work(ctx, job) })
}

func (f *fitWorker) work(ctx context.Context, job *river.Job[FitArgs]) error {
	if err := f.w.acquireFit(ctx); err != nil {
		return err
	}
	defer f.w.releaseFit()
	a := job.Args
	in, err := f.w.store.FitInput(ctx, a.LineID)
	if errors.Is(err, studio.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if in.RenderSeq != a.RenderSeq || in.State == studio.StateCancelled {
		return nil
	}
	if in.State.Rendered() {
		// The take is recorded (a retry after the overrun check failed, or a twin).
		return f.w.checkOverrun(ctx, job.JobRow, a.ProjectID, a.LineID)
	}
	return f.w.fitTake(ctx, job.JobRow, a, in, nil)
}

// fitTake fits a synthesized take to its line's slot as in says and records it, for
// the job (a fit job, or the synthesis that fits its own take) whose attempt it is.
// raw is the engine's output when the caller has it in memory; otherwise it is read
// from the blob store.
func (w *Worker) fitTake(ctx context.Context, job *rivertype.JobRow, a FitArgs, in *studio.FitInput, raw []byte) error {
	rawPath, err := w.blobs.Path(a.RawSHA256)
	if err != nil {
		// A malformed job: the line fails with the error rather than stay fitting.
		return w.fail(ctx, job, a.LineID, a.RenderSeq, userKey("render.internal", err.Error()))
	}
	// The take goes straight into the blob store, written once in its directory
	// (through a temporary file there and a rename): a shared scratch directory cost
	// a second rename across directories, and its lock was contended by every fit
	// and synthesis at once.
	params := audio.FitParams{InputPath: rawPath, Input: raw, OutputFor: w.blobs.Dest, StretchMin: in.StretchMin, StretchMax: in.StretchMax,
		LoudnessLUFS: in.LoudnessLUFS, MaxSpeedStep: in.MaxSpeedStep, PrevRatio: in.PrevRatio, GapMs: in.GapAfterMs,
		GapBorrowMs: in.GapBorrowMs}
	if in.GapBorrowMs == 0 {
		params.GapBorrowMs = -1 // audio treats 0 as "default"; the project asked for none
	}
	if in.MaxSpeedStep == 0 {
		params.MaxSpeedStep = -1
	}
	if in.DurationLock && in.SlotMs > 0 {
		params.SlotMs = in.SlotMs
	} else {
		// Not locked: keep the natural length (trim and loudness only).
		params.SlotMs = int(a.AudioSeconds*1000 + 0.5)
		params.StretchMin, params.StretchMax = 1, 1
		params.GapBorrowMs = -1
	}
	start := time.Now()
	res, err := audio.Fit(ctx, params)
	if err != nil {
		if errors.Is(err, audio.ErrNoSpace) {
			return w.fail(ctx, job, a.LineID, a.RenderSeq, userKey("audio.no_space"))
		}
		return w.fail(ctx, job, a.LineID, a.RenderSeq, err)
	}
	fitMs := int(time.Since(start).Milliseconds())
	// Fit hashed the take as it wrote it; its row is recorded with the take.
	blob := studio.Blob{SHA256: res.SHA256, SizeBytes: res.Bytes, Format: audio.FormatWAV,
		DurationMs: int(res.Samples * 1000 / int64(res.SampleRate)), SampleRate: res.SampleRate, Channels: 1}
	raw256 := a.RawSHA256
	take := &studio.Take{LineID: a.LineID, ProjectID: a.ProjectID, Revision: a.Revision, RenderSeq: a.RenderSeq,
		Engine: a.Engine, ModelVersion: a.ModelVersion, GPU: a.Device, Worker: a.Worker, Seed: a.Seed,
		SpokenText: a.SpokenText, PeakVRAMBytes: a.PeakBytes, SynthMs: a.SynthMs, FitMs: fitMs,
		AudioMs: int(a.AudioSeconds * 1000), DurationMs: blob.DurationMs, StretchRatio: res.Ratio, NeededRatio: res.NeededRatio,
		BorrowedMs: res.BorrowedMs, CutMs: res.CutMs, Deterministic: a.Deterministic, LoudnessLUFS: res.LoudnessLUFS, NeedsReview: res.NeedsReview,
		AudioSHA256: blob.SHA256, RawSHA256: &raw256, Usage: a.Usage}
	if a.RefitOf != 0 {
		take.RefitOf = &a.RefitOf
	}
	if a.AudioSeconds > 0 {
		take.RTF = float64(a.SynthMs) / 1000 / a.AudioSeconds
	}
	if res.NeedsReview {
		take.Hint = &studio.TakeHint{Key: res.Hint.Key, Args: res.Hint.Args}
	}
	recorded, err := w.store.FinishRender(ctx, take, blob)
	if err != nil || !recorded || take.BorrowedMs == 0 {
		return err
	}
	// The fit read the gap before it recorded the take; a change of the slots that
	// committed meanwhile skipped this line, which was being rendered.
	return w.checkOverrun(ctx, job, a.ProjectID, a.LineID)
}

// checkOverrun checks whether the take of a render that has finished runs into the
// next line (Store.CheckOverrun), which fits it again. The render has succeeded, so
// a failure of the check fails nothing: River retries the job, whose retry finds
// the render finished and checks again (loadRender, fitWorker.work); a last attempt
// is snoozed (unwritten).
func (w *Worker) checkOverrun(ctx context.Context, job *rivertype.JobRow, projectID, lineID int64) error {
	if err := w.store.CheckOverrun(ctx, projectID, lineID); err != nil {
		err = fmt.Errorf("error checking the overrun of line %d's take: %w", lineID, err)
		return w.unwritten(ctx, lastAttempt(job), recordedError{err}, "line", lineID)
	}
	return nil
}

// fitHere claims a place for a synthesis to fit its own take: one of as many
// places as twice the concurrent fits, for the syntheses fitting and as many waiting
// for a fit. It returns false where every place is taken: the worker's fits are
// backed up (its CPUs cannot keep up with its engines), and a fit job lets another
// worker take the take on. A claim ends with w.fitClaims.Add(-1).
func (w *Worker) fitHere() bool {
	if int(w.fitClaims.Add(1)) > 2*cap(w.fits) {
		w.fitClaims.Add(-1)
		return false
	}
	return true
}

// acquireFit waits until fewer than ConcurrentFits fits run.
func (w *Worker) acquireFit(ctx context.Context) error {
	select {
	case w.fits <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Worker) releaseFit() { <-w.fits }
