package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	"dubstudio/audio"
	"dubstudio/config"
	"dubstudio/internal/perm"
	"dubstudio/media"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// newLocalPermits builds the worker's CPU or HTTP engine permits from the configuration; the
// GPU engines (indextts, bench, simulator, and auto on a GPU) are newGPUWorker's.
func newLocalPermits(cfg *config.Config) (workflow.Permits, error) {
	n := cfg.WorkerConcurrency
	switch cfg.Engine {
	case "auto", "espeak":
		if n == 0 {
			n = runtime.NumCPU()
		}
		return workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{Concurrency: n}), n), nil
	case "http":
		if n == 0 {
			n = 8
		}
		v, err := tts.NewVLLM(tts.VLLMConfig{URL: cfg.EngineURL, Concurrency: n})
		if err != nil {
			return nil, err
		}
		return workflow.NewLocalPermits(v, n), nil
	}
	return nil, fmt.Errorf("unknown engine %q", cfg.Engine)
}

// startWorker starts a worker on the pipeline and returns the function that stops it.
func startWorker(ctx context.Context, cfg *config.Config, store *studio.Store, p *workflow.Pipeline, logger *slog.Logger) (*workflow.Worker, func(), error) {
	gw, err := newGPUWorker(ctx, cfg, store, logger)
	if err != nil {
		return nil, nil, err
	}
	var permits workflow.Permits
	if gw != nil {
		permits = gw.gpus
	} else if permits, err = newLocalPermits(cfg); err != nil {
		return nil, nil, err
	}
	stopGPU := func(ctx context.Context) {
		if gw != nil {
			gw.stop(ctx)
		}
	}
	w, err := workflow.NewWorker(p, permits, workflow.WorkerConfig{Name: cfg.WorkerName, DataDir: cfg.DataDir,
		OOMRetries: cfg.OOMRetries, ProxyTimeout: cfg.ProxyTimeout, BedMixLUFS: cfg.BedMixLUFS,
		BedDuck: audio.DuckParams{ThresholdDB: cfg.BedDuckThresholdDB, Ratio: cfg.BedDuckRatio,
			AttackMs: cfg.BedDuckAttackMs, ReleaseMs: cfg.BedDuckReleaseMs},
		BlobGCInterval: cfg.BlobGCInterval, BlobGCGrace: cfg.BlobGCGrace,
		Proxy: media.ProxyOpts{Height: cfg.ProxyHeight, CRF: cfg.ProxyCRF, Threads: cfg.ProxyThreads},
		Media: media.Limits{ReferenceMinMs: cfg.ReferenceMinMs, ReferenceMaxMs: cfg.ReferenceMaxMs,
			SourceMaxMs: cfg.SourceMaxMs, MinFreeBytes: cfg.MinFreeBytes}}, logger)
	if err != nil {
		stopGPU(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	if err := w.Start(ctx); err != nil {
		stopGPU(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	if gw != nil {
		gw.run(ctx) // registered: it can publish the GPUs now
	}
	logger.InfoContext(ctx, "worker started", "name", cfg.WorkerName, "engines", permits.Engines(), "concurrency", permits.Capacity())
	stop := func() {
		// Running jobs get 30 s to finish; the rest are cancelled and go back to the
		// queue without spending their attempt, for another worker. (ctx, the
		// signal's, ended already: Start gave River a context it does not cancel.)
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			logger.Error("stopping the worker", "err", err)
		}
		stopGPU(stopCtx) // after the jobs: their lines finish on the hosts
	}
	return w, stop, nil
}

// workerCmd runs `dubstudio worker`: a worker host alone, until SIGINT or SIGTERM.
func workerCmd(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	store, err := open(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer store.Pool().Close()
	if err := os.MkdirAll(cfg.DataDir, perm.Dir); err != nil {
		return err
	}
	p, err := workflow.NewPipeline(store, logger)
	if err != nil {
		return err
	}
	p.FirstLines = cfg.RenderFirstLines
	_, stop, err := startWorker(ctx, cfg, store, p, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}
