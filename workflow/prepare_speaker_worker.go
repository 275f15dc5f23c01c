package workflow

import (
	"context"
	"errors"
	"path/filepath"

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

func (p *prepareWorker) Work(ctx context.Context, job *river.Job[PrepareSpeakerArgs]) error {
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
// engine's model, queueing its preparation (once) when it does not.
func (w *Worker) conditioning(ctx context.Context, refSHA string) (bool, string, error) {
	info, err := w.permits.Model(ctx)
	if err != nil {
		return false, "", err
	}
	key := refSHA + "/" + info.Version
	if path, ok := w.conditioned.Load(key); ok {
		return true, path.(string), nil
	}
	path, ok, err := w.store.SpeakerConditioning(ctx, refSHA, info.Version)
	if ok {
		// Conditioning is made once per reference and model and never removed: no
		// need to ask the database again for every line.
		w.conditioned.Store(key, path)
	}
	if err != nil || ok {
		return ok, path, err
	}
	_, err = w.pipeline.inserter.Insert(ctx, PrepareSpeakerArgs{RefSHA256: refSHA, ModelVersion: info.Version}, nil)
	return false, "", err
}
