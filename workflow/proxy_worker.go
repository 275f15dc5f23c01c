package workflow

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"dubstudio/audio"
	"dubstudio/i18n"
	"dubstudio/media"
	"dubstudio/studio"
)

// QueueProxy is the queue of make_proxy jobs: one at a time per worker, since a
// transcoding uses every core it is given.
const QueueProxy = "proxy"

// DefaultProxyTimeout is WorkerConfig.ProxyTimeout's default (PROXY_TIMEOUT_SECONDS).
const DefaultProxyTimeout = 2 * time.Hour

// ProxyArgs make the browser-ready proxy of a project's source video. A job whose
// VideoSHA256 is no longer the project's video (replaced or removed) ends without
// effect.
type ProxyArgs struct {
	ProjectID   int64  `json:"project_id" river:"unique"`
	VideoSHA256 string `json:"video_sha256" river:"unique"`
}

// Kind implements river.JobArgs.
func (ProxyArgs) Kind() string { return "make_proxy" }

// InsertOpts puts proxies on their own queue, one job per video while it waits or
// runs.
func (ProxyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueProxy, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// QueueProxy records a project's source video (kept as a blob by
// media.KeepSourceVideo) and, in the same transaction, queues the job that makes its
// proxy.
func (p *Pipeline) QueueProxy(ctx context.Context, v studio.ProjectVideo) (*studio.ProjectVideo, error) {
	return p.store.SetProjectVideo(ctx, v, func(ctx context.Context, tx *sql.Tx, v *studio.ProjectVideo) error {
		_, err := p.inserter.InsertTx(ctx, tx, ProxyArgs{ProjectID: v.ProjectID, VideoSHA256: v.VideoSHA256}, nil)
		return err
	})
}

// proxyWorker works make_proxy jobs: ffmpeg transcodes the video (media.MakeProxy)
// while its progress goes into the video's row, which the page polls.
type proxyWorker struct {
	river.WorkerDefaults[ProxyArgs]
	w *Worker
}

func (p *proxyWorker) Timeout(*river.Job[ProxyArgs]) time.Duration { return p.w.cfg.ProxyTimeout }

// Work makes the proxy and records the outcome; an error no step recorded, or a
// panic, fails the proxy's attempt as failProxy does (settleWith).
func (p *proxyWorker) Work(ctx context.Context, job *river.Job[ProxyArgs]) error {
	return settleWith(func() error { return p.work(ctx, job) },
		func(err error) error { return p.w.failProxy(ctx, job.JobRow, job.Args, err) })
}

func (p *proxyWorker) work(ctx context.Context, job *river.Job[ProxyArgs]) error {
	w, a := p.w, job.Args
	ok, err := w.store.StartProxy(ctx, a.ProjectID, a.VideoSHA256, job.Attempt)
	if err != nil || !ok {
		return err // !ok: another video is the project's now
	}
	blob, err := w.media.MakeProxy(ctx, a.VideoSHA256, w.cfg.Proxy, func(pct int) {
		_ = w.store.ProxyProgress(ctx, a.ProjectID, a.VideoSHA256, pct) // the next report says it again
	})
	if err != nil {
		return w.failProxy(ctx, job.JobRow, a, err)
	}
	if err := w.store.FinishProxy(ctx, a.ProjectID, a.VideoSHA256, blob.SHA256); err != nil {
		// The proxy is made: its last attempt must not fail the video for a write
		// that failed. An earlier one is queued with the error (settleWith).
		return w.unwritten(ctx, lastAttempt(job.JobRow), fmt.Errorf("error recording the proxy: %w", err), "project", a.ProjectID)
	}
	return nil
}

// failProxy records a failed attempt at the proxy of a's video and returns what River
// should do with its job. Not a video fails at once: another attempt would find the
// same file.
func (w *Worker) failProxy(ctx context.Context, job *rivertype.JobRow, a ProxyArgs, err error) error {
	if w.interrupted(ctx) {
		return w.interrupt(ctx, err, func(ctx context.Context) error {
			return w.store.FailProxy(ctx, a.ProjectID, a.VideoSHA256, "", false)
		}, "project", a.ProjectID)
	}
	final := lastAttempt(job) || errors.Is(err, media.ErrNotVideo)
	return w.record(ctx, err, final, func(ctx context.Context) error {
		return w.store.FailProxy(ctx, a.ProjectID, a.VideoSHA256, proxyError(err), final)
	}, "project", a.ProjectID)
}

// proxyError is what the page says about a failed attempt: the key of a message it
// translates, or (for what only an operator can fix) the error's text.
func proxyError(err error) string {
	var ue *i18n.Error
	switch {
	case errors.Is(err, audio.ErrNoSpace):
		return "video.no_space"
	case errors.As(err, &ue):
		return ue.Key
	}
	return err.Error()
}
