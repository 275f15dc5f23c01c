package workflow

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"

	"dubstudio/tts"
)

// prepareWorker works prepare_speaker jobs: a character's speaker conditioning,
// computed once per reference recording and model version, which the syntheses of
// its lines wait for (conditioning).
type prepareWorker struct {
	river.WorkerDefaults[PrepareSpeakerArgs]
	w *Worker
}

// Work prepares the conditioning. A preparation that fails for good (a reference
// the engine refuses, or its last attempt) is recorded, so that the syntheses
// waiting for it fail with its error (conditioning) rather than wait and queue it
// again for ever.
func (p *prepareWorker) Work(ctx context.Context, job *river.Job[PrepareSpeakerArgs]) error {
	err := p.prepare(ctx, job)
	if err != nil && p.w.interrupted(ctx) {
		// Cut short by the worker's stop, not failed: the waiting syntheses must not
		// fail with it.
		return p.w.interrupt(ctx, err, func(context.Context) error { return nil }, "reference", job.Args.RefSHA256)
	}
	var cancel *river.JobCancelError
	var snooze *river.JobSnoozeError
	if err == nil || errors.As(err, &snooze) || !errors.As(err, &cancel) && !lastAttempt(job.JobRow) {
		return err
	}
	cause := err
	if cancel != nil && errors.Unwrap(cancel) != nil {
		cause = errors.Unwrap(cancel)
	}
	msg := cause.Error()
	if te := (*tts.Error)(nil); errors.As(cause, &te) && te.Message != "" {
		msg = te.Message
	}
	rctx, cancelRecord := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancelRecord()
	if ferr := p.w.store.SpeakerConditioningFailed(rctx, job.Args.RefSHA256, job.Args.ModelVersion, msg); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

func (p *prepareWorker) prepare(ctx context.Context, job *river.Job[PrepareSpeakerArgs]) error {
	w := p.w
	if _, ok, err := w.store.SpeakerConditioning(ctx, job.Args.RefSHA256, job.Args.ModelVersion); err != nil || ok {
		return err
	}
	ref, err := w.blobs.Path(job.Args.RefSHA256)
	if err != nil {
		return river.JobCancel(err)
	}
	permit, err := w.permits.Acquire(ctx, PermitRequest{AudioSeconds: 15})
	if err != nil {
		return err
	}
	res, err := permit.Engine().PrepareSpeaker(ctx, tts.PrepareRequest{ReferenceAudioPath: ref, ReferenceSHA256: job.Args.RefSHA256,
		CacheDir: filepath.Join(w.cfg.DataDir, "conditioning")})
	permit.Done(Outcome{OOM: errors.Is(err, tts.ErrOutOfMemory), Failed: err != nil})
	if err != nil {
		if errors.Is(err, tts.ErrInvalidInput) {
			return river.JobCancel(err)
		}
		return err
	}
	return w.store.SaveSpeakerConditioning(ctx, job.Args.RefSHA256, job.Args.ModelVersion, res.CachePath, w.cfg.Name)
}

// conditioning reports whether the speaker conditioning of a reference exists for the
// engine's model, queueing its preparation (once) when it does not. Where a
// preparation failed for good at or after since (when the render's job was queued,
// so that it was waiting for it), it returns the preparation's error as failed
// instead: a render queued after the failure queues the preparation again.
func (w *Worker) conditioning(ctx context.Context, refSHA string, since time.Time) (ready bool, path, failed string, err error) {
	info, err := w.permits.Model(ctx)
	if err != nil {
		return false, "", "", err
	}
	key := refSHA + "/" + info.Version
	if path, ok := w.conditioned.Load(key); ok {
		return true, path.(string), "", nil
	}
	path, ok, err := w.store.SpeakerConditioning(ctx, refSHA, info.Version)
	if err != nil {
		return false, "", "", err
	}
	if ok {
		// Conditioning is made once per reference and model and never removed: no
		// need to ask the database again for every line.
		w.conditioned.Store(key, path)
		return true, path, "", nil
	}
	msg, failedThen, err := w.store.SpeakerConditioningFailure(ctx, refSHA, info.Version, since)
	if err != nil || failedThen {
		return false, "", msg, err
	}
	_, err = w.pipeline.inserter.Insert(ctx, PrepareSpeakerArgs{RefSHA256: refSHA, ModelVersion: info.Version}, nil)
	return false, "", "", err
}
