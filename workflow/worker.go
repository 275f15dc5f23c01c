package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"dubstudio/audio"
	"dubstudio/internal/perm"
	"dubstudio/media"
	"dubstudio/studio"
)

// DefaultFetchCooldown is WorkerConfig.FetchCooldown's default.
const DefaultFetchCooldown = 10 * time.Millisecond

// WorkerConfig tunes a worker process.
type WorkerConfig struct {
	// Name identifies the worker in the registry and as River's client ID.
	Name    string
	DataDir string
	// OOMRetries is how many times a line is retried after running out of GPU memory.
	OOMRetries int
	// MaxAttempts bounds retries of transient failures.
	MaxAttempts int
	// JobTimeout bounds one job; RescueAfter is when River gives a job whose worker
	// vanished (killed, host lost) to another worker. RescueAfter must exceed JobTimeout.
	JobTimeout  time.Duration
	RescueAfter time.Duration
	// FetchPollInterval is how often River polls for jobs besides its notifications.
	FetchPollInterval time.Duration
	// FetchCooldown is the least time between two fetches of a queue (default 10 ms).
	// It bounds a queue's throughput to about its workers per cooldown, and delays a
	// job inserted right after a fetch by up to that long.
	FetchCooldown time.Duration
	// ConcurrentFits is how many fits run at once, a synthesis fitting its own take
	// or a fit job (default: DefaultConcurrentFits).
	ConcurrentFits int
	// SynthesisTimeoutBase + SynthesisTimeoutPerSecond × the line's seconds of audio
	// is how long one synthesis may take before the engine is taken for hung: the
	// attempt fails, the permit is reported hung (its owner kills the host) and the
	// line is retried. Defaults 60 s and 6 s.
	SynthesisTimeoutBase, SynthesisTimeoutPerSecond time.Duration
	// RetryBase and RetryMax bound the exponential backoff between attempts of a
	// failed job (defaults 2 s and 2 min).
	RetryBase, RetryMax time.Duration
	// Heartbeat is how often the worker refreshes its registry entry; a worker silent
	// for DeadAfter is taken for dead and its running jobs are handed to others.
	Heartbeat time.Duration
	DeadAfter time.Duration
	// Proxy says how make_proxy jobs transcode a source video, and ProxyTimeout bounds
	// one (default DefaultProxyTimeout).
	Proxy        media.ProxyOpts
	ProxyTimeout time.Duration
	// Media bounds what the worker's media library writes: MinFreeBytes (MIN_FREE_MB)
	// is the free space a proxy must leave (zero fields: media's defaults).
	Media media.Limits
	// BlobGCInterval is how often the blob collector runs (a periodic job River's
	// leader inserts), BlobGCGrace how old a blob must be before it may go (defaults
	// DefaultBlobGCInterval and DefaultBlobGCGrace).
	BlobGCInterval, BlobGCGrace time.Duration
	// BedMixLUFS is the loudness an export's mix over the bed is brought to (0:
	// audio.DefaultMixLUFS, -23).
	BedMixLUFS int
	// BedDuck is how the bed is ducked under the dialogue in that mix (zero fields:
	// audio's defaults).
	BedDuck audio.DuckParams
}

// DefaultConcurrentFits is WorkerConfig.ConcurrentFits' default: four times the
// CPUs. A fit of a fast engine's take computes for about a millisecond and waits
// longer than that on the database and the take's fsync; at twice the CPUs the fits,
// not the CPUs, bounded a 2-CPU worker's lines per second. Fits that stretch with
// Rubber Band compute for longer, and then share the CPUs between more of them at no
// loss.
func DefaultConcurrentFits() int { return 4 * runtime.NumCPU() }

func (c *WorkerConfig) defaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.JobTimeout == 0 {
		c.JobTimeout = 10 * time.Minute
	}
	if c.RescueAfter == 0 {
		c.RescueAfter = c.JobTimeout + 5*time.Minute
	}
	if c.FetchPollInterval == 0 {
		c.FetchPollInterval = time.Second
	}
	if c.FetchCooldown == 0 {
		c.FetchCooldown = DefaultFetchCooldown
	}
	c.FetchCooldown = min(c.FetchCooldown, c.FetchPollInterval)
	if c.ConcurrentFits == 0 {
		c.ConcurrentFits = DefaultConcurrentFits()
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 5 * time.Second
	}
	if c.SynthesisTimeoutBase == 0 {
		c.SynthesisTimeoutBase = time.Minute
	}
	if c.SynthesisTimeoutPerSecond == 0 {
		c.SynthesisTimeoutPerSecond = 6 * time.Second
	}
	if c.RetryBase == 0 {
		c.RetryBase = 2 * time.Second
	}
	if c.RetryMax == 0 {
		c.RetryMax = 2 * time.Minute
	}
	if c.DeadAfter == 0 {
		c.DeadAfter = 6 * c.Heartbeat
	}
	if c.ProxyTimeout == 0 {
		c.ProxyTimeout = DefaultProxyTimeout
	}
	if c.BlobGCInterval == 0 {
		c.BlobGCInterval = DefaultBlobGCInterval
	}
	if c.BlobGCGrace == 0 {
		c.BlobGCGrace = DefaultBlobGCGrace
	}
}

// Worker works render jobs with its permits. Each River worker is in a file of its
// own: synthesize_worker.go, fit_worker.go, prepare_speaker_worker.go and
// export_worker.go; failures.go records failed attempts for all of them.
type Worker struct {
	cfg      WorkerConfig
	pipeline *Pipeline
	store    *studio.Store
	permits  Permits
	blobs    studio.BlobStore
	media    *media.Library
	logger   *slog.Logger
	// client fetches and works the jobs (River's pgx driver, which LISTENs for new
	// ones). It inserts none: jobs are inserted by the pipeline's one insert client,
	// on the transaction type the store hands out.
	client *river.Client[pgx.Tx]
	stopHB context.CancelFunc
	hbDone chan struct{}
	// conditioned caches the speaker conditionings found ("ref/model version" ->
	// cache path).
	conditioned sync.Map
	// fits holds a token for each fit running in this process (ConcurrentFits at
	// most), whether a synthesis fits its own take or a fit job does.
	fits chan struct{}
	// fitClaims counts the syntheses that fit their own take, fitting or waiting for
	// a fit (fitHere).
	fitClaims atomic.Int32
	// stopping is set once Stop begins: a job whose context River cancels from then
	// on was interrupted, and has not failed (interrupted).
	stopping atomic.Bool
}

// NewWorker builds a worker over the store's pool.
func NewWorker(p *Pipeline, permits Permits, cfg WorkerConfig, logger *slog.Logger) (*Worker, error) {
	cfg.defaults()
	// A ducking sidechaincompress would refuse fails every export over a bed: say so
	// at the start instead.
	if err := cfg.BedDuck.WithDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("error in the bed's ducking: %w", err)
	}
	store := p.store
	w := &Worker{cfg: cfg, pipeline: p, store: store, permits: permits, logger: logger,
		blobs: studio.BlobStore{Dir: filepath.Join(cfg.DataDir, "blobs")},
		fits:  make(chan struct{}, cfg.ConcurrentFits)}
	w.media = media.NewLibrary(store, w.blobs)
	w.media.Limits = cfg.Media
	workers := river.NewWorkers()
	river.AddWorker(workers, &synthesizeWorker{w: w})
	river.AddWorker(workers, &fitWorker{w: w})
	river.AddWorker(workers, &prepareWorker{w: w})
	river.AddWorker(workers, &exportWorker{w: w})
	river.AddWorker(workers, &proxyWorker{w: w})
	river.AddWorker(workers, &blobGCWorker{w: w})
	client, err := river.NewClient(riverpgxv5.New(store.Pool()), &river.Config{
		ID: cfg.Name,
		Queues: map[string]river.QueueConfig{
			// One more than the permits, so that a line is always ready when a permit
			// frees, and one more for each concurrent fit: a synthesis that fits its
			// own take holds its River worker, not its permit, meanwhile.
			QueueSynthesis:   {MaxWorkers: permits.Capacity() + 1 + cfg.ConcurrentFits},
			QueueFit:         {MaxWorkers: cfg.ConcurrentFits},
			QueuePrepare:     {MaxWorkers: 1},
			QueueExport:      {MaxWorkers: 1},
			QueueProxy:       {MaxWorkers: 1},
			QueueMaintenance: {MaxWorkers: 1},
		},
		PeriodicJobs:         []*river.PeriodicJob{blobGCPeriodic(cfg.BlobGCInterval)},
		Workers:              workers,
		JobTimeout:           cfg.JobTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		MaxAttempts:          cfg.MaxAttempts,
		RetryPolicy:          backoff{Base: cfg.RetryBase, Max: cfg.RetryMax},
		FetchPollInterval:    cfg.FetchPollInterval,
		FetchCooldown:        cfg.FetchCooldown,
		Logger:               logger,
	})
	if err != nil {
		return nil, fmt.Errorf("error creating River client: %w", err)
	}
	w.client = client
	return w, nil
}

// Client is the worker's River client (for tests and the River UI).
func (w *Worker) Client() *river.Client[pgx.Tx] { return w.client }

// Start registers the worker and starts working jobs. The jobs still marked as this
// worker's (its name's) are handed back first: they belong to a process that ran
// under the same name and ended without finishing them (killed, its container
// restarted: the default name, hostname-pid, is the same each time there), whose
// heartbeat the registration would otherwise refresh, hiding that it is gone.
//
// ctx bounds the start only: River treats the end of its Start context as a hard
// stop that cancels every running job at once, so the client starts on a context
// that the caller's (the signal's) does not cancel, and Stop stops it.
func (w *Worker) Start(ctx context.Context) error {
	if err := w.ensureDirs(); err != nil {
		return err
	}
	n, err := w.store.RescueWorkerJobs(ctx, w.cfg.Name)
	if err != nil {
		return fmt.Errorf("error handing back the jobs of an earlier %s: %w", w.cfg.Name, err)
	}
	if n > 0 {
		w.logger.InfoContext(ctx, "handed back the jobs of an earlier process of this worker", "name", w.cfg.Name, "jobs", n)
	}
	if err := w.register(ctx); err != nil {
		return err
	}
	hbCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.stopHB, w.hbDone = cancel, make(chan struct{})
	go w.heartbeat(hbCtx)
	return w.client.Start(context.WithoutCancel(ctx))
}

// Stop stops fetching, lets running jobs finish until ctx ends, then cancels them
// (River puts them back without spending their attempt, and another worker runs
// them: interrupted) and leaves the registry. A worker whose jobs outlive even that
// stays registered, its heartbeat stopped, so that RescueDeadWorkers hands them
// back once it is seen dead (or its name's next Start does).
func (w *Worker) Stop(ctx context.Context) error {
	w.stopping.Store(true)
	err := w.client.Stop(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		hard, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = w.client.StopAndCancel(hard)
	}
	if w.stopHB != nil {
		w.stopHB()
		<-w.hbDone
	}
	if err != nil {
		return err
	}
	return w.store.UnregisterWorker(context.WithoutCancel(ctx), w.cfg.Name)
}

func (w *Worker) ensureDirs() error {
	return os.MkdirAll(filepath.Join(w.cfg.DataDir, "tmp"), perm.Dir)
}

func (w *Worker) register(ctx context.Context) error {
	host, _ := os.Hostname()
	return w.store.RegisterWorker(ctx, studio.WorkerInfo{Name: w.cfg.Name, Host: host, PID: os.Getpid(),
		Engines: w.permits.Engines(), Concurrency: w.permits.Capacity(), GPUs: json.RawMessage("[]")})
}

func (w *Worker) heartbeat(ctx context.Context) {
	defer close(w.hbDone)
	t := time.NewTicker(w.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := w.store.WorkerHeartbeat(ctx, w.cfg.Name); err != nil && ctx.Err() == nil {
				w.logger.WarnContext(ctx, "worker heartbeat failed", "err", err)
				// The row may be gone (a cleanup, a restored database): register again.
				_ = w.register(ctx)
			}
			if n, err := w.store.RescueDeadWorkers(ctx, w.cfg.DeadAfter); err != nil && ctx.Err() == nil {
				w.logger.WarnContext(ctx, "rescuing dead workers' jobs failed", "err", err)
			} else if n > 0 {
				w.logger.InfoContext(ctx, "handed back jobs of a dead worker", "jobs", n)
			}
		}
	}
}
