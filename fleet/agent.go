package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"dubstudio/gpu"
	"dubstudio/studio"
)

// AgentConfig configures NewAgent.
type AgentConfig struct {
	// Worker is the worker's registry name; Host its machine.
	Worker, Host string
	// PublishEvery is how often the live state is published; default 2 s.
	PublishEvery time.Duration
	// SettingsEvery is how often profiles, assignments and calibration requests are
	// read; default 3 s.
	SettingsEvery time.Duration
	// Recent is how much sample history a published state carries; default 2 min.
	Recent time.Duration
	// KeepHistory is how long per-minute history is kept; default 30 days.
	KeepHistory time.Duration
	Logger      *slog.Logger
}

// Agent connects a worker's GPUs to the database: it registers the GPUs,
// publishes their live state, stores per-minute history, applies profile and
// calibration changes as admins make them, and runs the calibrations requested for
// its GPUs.
type Agent struct {
	cfg   AgentConfig
	store *studio.Store
	gpus  *GPUs
	log   *slog.Logger

	mu      sync.Mutex
	saved   map[string]time.Time // history stored up to, per GPU
	running map[int64]bool
	wg      sync.WaitGroup
}

// NewAgent returns an agent; Run it.
func NewAgent(store *studio.Store, gpus *GPUs, cfg AgentConfig) *Agent {
	if cfg.PublishEvery <= 0 {
		cfg.PublishEvery = 2 * time.Second
	}
	if cfg.SettingsEvery <= 0 {
		cfg.SettingsEvery = 3 * time.Second
	}
	if cfg.Recent <= 0 {
		cfg.Recent = 2 * time.Minute
	}
	if cfg.KeepHistory <= 0 {
		cfg.KeepHistory = 30 * 24 * time.Hour
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, store: store, gpus: gpus, log: cfg.Logger, saved: map[string]time.Time{},
		running: map[int64]bool{}}
}

// ApplySettings reads the GPUs' profiles and calibrations and puts them in force.
func (a *Agent) ApplySettings(ctx context.Context) error {
	devs := a.gpus.Devices()
	uuids := make([]string, len(devs))
	for i, d := range devs {
		uuids[i] = d.UUID
	}
	settings, err := a.store.GPUSettings(ctx, uuids)
	if err != nil {
		return err
	}
	for _, u := range uuids {
		st := Setting{Profile: gpu.DefaultProfile()}
		if cur, ok := settings[u]; ok {
			st.Profile, st.ProfileID = ProfileOf(*cur.Profile), cur.Profile.ID
			if cur.CalibrationID != nil {
				if r, err := DecodeCalibration(cur.Calibration); err != nil {
					a.log.WarnContext(ctx, "unreadable calibration", "gpu", u, "calibration", *cur.CalibrationID, "err", err)
				} else if r != nil {
					st.Calibration, st.CalibrationID = r.Calibration, *cur.CalibrationID
				}
			}
		}
		_ = a.gpus.Apply(u, st) // a refusal is published with the GPU
	}
	return nil
}

// Run works until ctx ends, then waits for the calibrations it started.
func (a *Agent) Run(ctx context.Context) {
	defer a.wg.Wait()
	publish := time.NewTicker(a.cfg.PublishEvery)
	defer publish.Stop()
	settings := time.NewTicker(a.cfg.SettingsEvery)
	defer settings.Stop()
	history := time.NewTicker(time.Minute)
	defer history.Stop()
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	a.register(ctx)
	a.Publish(ctx)
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-publish.C:
			if n++; n%15 == 0 {
				a.register(ctx) // again now and then: a re-registration empties the list
			}
			a.Publish(ctx)
		case <-settings.C:
			if err := a.ApplySettings(ctx); err != nil && ctx.Err() == nil {
				a.log.WarnContext(ctx, "reading GPU settings", "err", err)
			}
			a.claim(ctx)
		case <-history.C:
			a.SaveHistory(ctx, time.Now())
		case <-prune.C:
			if _, err := a.store.PruneGPUHistory(ctx, time.Now().Add(-a.cfg.KeepHistory)); err != nil && ctx.Err() == nil {
				a.log.WarnContext(ctx, "pruning GPU history", "err", err)
			}
		}
	}
}

// registeredGPU is a GPU in the worker registry.
type registeredGPU struct {
	Index      int    `json:"index"`
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	TotalBytes int64  `json:"total_bytes"`
	Simulated  bool   `json:"simulated,omitempty"`
}

func (a *Agent) register(ctx context.Context) {
	var gs []registeredGPU
	for _, d := range a.gpus.Devices() {
		gs = append(gs, registeredGPU{Index: d.Index, UUID: d.UUID, Name: d.Name, TotalBytes: d.TotalBytes,
			Simulated: a.gpus.cfg.Simulated})
	}
	data, _ := json.Marshal(gs)
	if err := a.store.SetWorkerGPUs(ctx, a.cfg.Worker, data); err != nil && ctx.Err() == nil {
		a.log.WarnContext(ctx, "registering GPUs", "err", err)
	}
}

// Publish stores the live state now.
func (a *Agent) Publish(ctx context.Context) {
	st := a.gpus.Live(a.cfg.Recent)
	st.Worker, st.Host = a.cfg.Worker, a.cfg.Host
	data, err := encodeState(st)
	if err != nil {
		a.log.ErrorContext(ctx, "publishing the GPU state", "err", err)
		return
	}
	if err := a.store.PublishGPULive(ctx, a.cfg.Worker, a.cfg.Host, data); err != nil && ctx.Err() == nil &&
		!errors.Is(err, studio.ErrNotFound) { // not registered yet: the next round
		a.log.WarnContext(ctx, "publishing the GPU state", "err", err)
	}
}

// SaveHistory stores the per-minute averages and maxima of the minutes that ended
// before now and are not stored yet.
func (a *Agent) SaveHistory(ctx context.Context, now time.Time) {
	cutoff := now.Truncate(time.Minute)
	m := a.gpus.Monitor()
	var rows []studio.GPUMinute
	a.mu.Lock()
	for _, d := range a.gpus.Devices() {
		var done []gpu.Sample
		for _, smp := range m.History(d.UUID, a.saved[d.UUID]) {
			if smp.Time.Before(cutoff) {
				done = append(done, smp)
			}
		}
		for _, g := range gpu.Downsample(done, time.Minute) {
			rows = append(rows, studio.GPUMinute{Host: a.cfg.Host, GPUUUID: g.UUID, Minute: g.Start, GPUIndex: g.Index,
				Samples: g.Samples, Lost: g.Lost, AvgUsedBytes: g.AvgUsedBytes, MaxUsedBytes: g.MaxUsedBytes,
				TotalBytes: g.TotalBytes, AvgUtil: g.AvgGPUPercent, MaxUtil: g.MaxGPUPercent, AvgTempC: g.AvgTemperatureC,
				MaxTempC: g.MaxTemperatureC, AvgPowerW: g.AvgPowerWatts, MaxPowerW: g.MaxPowerWatts})
		}
	}
	a.mu.Unlock()
	if err := a.store.SaveGPUHistory(ctx, rows); err != nil {
		if ctx.Err() == nil {
			a.log.WarnContext(ctx, "storing GPU history", "err", err)
		}
		return
	}
	a.mu.Lock()
	for _, d := range a.gpus.Devices() {
		a.saved[d.UUID] = cutoff
	}
	a.mu.Unlock()
}

// claim takes the calibrations requested for this worker's GPUs and runs each.
func (a *Agent) claim(ctx context.Context) {
	var uuids []string
	for _, d := range a.gpus.Devices() {
		uuids = append(uuids, d.UUID)
	}
	cs, err := a.store.ClaimGPUCalibrations(ctx, a.cfg.Worker, uuids)
	if err != nil {
		if ctx.Err() == nil {
			a.log.WarnContext(ctx, "claiming calibrations", "err", err)
		}
		return
	}
	for _, c := range cs {
		a.mu.Lock()
		if a.running[c.ID] {
			a.mu.Unlock()
			continue
		}
		a.running[c.ID] = true
		a.mu.Unlock()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.calibrate(ctx, c)
			a.mu.Lock()
			delete(a.running, c.ID)
			a.mu.Unlock()
		}()
	}
}

func (a *Agent) calibrate(ctx context.Context, c studio.GPUCalibration) {
	log := a.log.With("calibration", c.ID, "gpu", c.GPUUUID)
	finish := func(res *gpu.CalibrationResult, err error) {
		data, eerr := encodeCalibration(res)
		if eerr != nil {
			err = errors.Join(err, eerr)
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if ferr := a.store.FinishGPUCalibration(context.WithoutCancel(ctx), c.ID, data, msg); ferr != nil {
			log.ErrorContext(ctx, "storing the calibration", "err", ferr)
		}
	}
	sp, err := c.ProfileValue()
	if err != nil {
		finish(nil, fmt.Errorf("the calibration's profile: %w", err))
		return
	}
	p := ProfileOf(sp)
	if err := p.Validate(); err != nil {
		finish(nil, err)
		return
	}
	log.InfoContext(ctx, "calibrating", "profile", p.Name)
	res, err := a.gpus.Calibrate(ctx, c.ID, c.GPUUUID, p, func(key string, args ...any) {
		if err := a.store.SetGPUCalibrationProgress(ctx, c.ID, encodeProgress(key, args)); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "calibration progress", "err", err)
		}
	})
	if err != nil {
		log.WarnContext(ctx, "calibration failed", "err", err)
	} else {
		log.InfoContext(ctx, "calibrated", "recommended", res.Recommended, "why", res.Verdict.Why)
	}
	finish(res, err)
}
