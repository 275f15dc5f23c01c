package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// Calibrate takes a GPU from the pool for a calibration with profile p: its hosts
// drain (lines go to other GPUs or wait) and stop, the calibration starts its own,
// and the pool comes back afterwards.
//
// A batching profile (p.Batching) is calibrated on one batching host started with
// p's maximum sequences (Concurrency), beams and KV cache; its load test runs on that
// host (see gpu/calibrate), not through the executor.
func (s *GPUs) Calibrate(ctx context.Context, id int64, uuid string, p gpu.Profile, progress func(key string, args ...any)) (*gpu.CalibrationResult, error) {
	if p.Batching && !s.cfg.Batching {
		return nil, i18n.Errorf(gpu.ErrInvalid, "gpu.profile.batch_unsupported", s.cfg.Engine)
	}
	s.mu.Lock()
	e := s.gpus[uuid]
	if e == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("GPU %s: %w", uuid, gpu.ErrInvalid)
	}
	if e.calibrating != 0 {
		s.mu.Unlock()
		return nil, fmt.Errorf("GPU %s is being calibrated: %w", uuid, gpu.ErrInvalid)
	}
	e.calibrating, e.launchProfile = id, &p
	e.pool.Resize(0)
	dev := e.dev
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		e.calibrating, e.launchProfile = 0, nil
		if s.started && !e.restarting {
			e.pool.Resize(e.profile.Hosts())
		}
	}()
	if progress == nil {
		progress = func(string, ...any) {}
	}
	progress("gpu.calibration.progress.waiting")
	if err := waitEmpty(ctx, e.pool); err != nil {
		return nil, err
	}
	var mem calibrate.DeviceMemory = monitorMemory{m: s.cfg.Monitor, uuid: uuid}
	if s.cfg.Memory != nil {
		mem = s.cfg.Memory(uuid)
	}
	adm := NewCalibrationHosts(s.cfg, dev)
	var admission calibrate.Admission = adm
	if p.Batching {
		admission = nil // one host, which bounds its own sequences
	}
	res, err := calibrate.Run(ctx, calibrate.Config{
		GPU: dev, Profile: p, Device: mem, Logger: s.log, Progress: progress, Admission: admission,
		Launch: func(ctx context.Context, i int) (ttshost.EngineHost, error) {
			h, err := gpu.LaunchPinned(ctx, s.cfg.Launcher, gpu.LaunchOpts{GPU: uuid, GPUIndex: dev.Index,
				ID: fmt.Sprintf("%s/cal%d", uuid, i), Weights: p.WeightsRole(i)}, s.cfg.Pool.StartTimeout)
			if err != nil {
				return nil, err
			}
			ch, ok := h.(ttshost.EngineHost)
			if !ok {
				_ = h.Kill()
				return nil, fmt.Errorf("host %T cannot be calibrated: %w", h, gpu.ErrInvalid)
			}
			return ch, nil
		},
	})
	adm.Stop()
	baseline := int64(-1)
	if res != nil && res.BaselineUsedBytes > 0 {
		baseline = res.BaselineUsedBytes
	}
	s.settleForeign(ctx, uuid, mem, baseline)
	return res, err
}

// settleForeign waits (at most 10 s) until the card's memory is back to baseline
// after a calibration's hosts stopped, then has the executor forget the foreign
// memory it saw meanwhile: those hosts were not the pool's, and the settings the
// calibration recommends must be checked against what others really hold.
func (s *GPUs) settleForeign(ctx context.Context, uuid string, mem calibrate.DeviceMemory, baseline int64) {
	deadline := time.Now().Add(10 * time.Second)
	for baseline >= 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		if used, ok := mem.Used(); !ok || used <= baseline+gpu.GiB/2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.exec.ForgetForeign(uuid)
	for _, smp := range s.cfg.Monitor.SampleNow(context.WithoutCancel(ctx)) {
		s.exec.Observe(smp)
	}
}

// CalibrationHosts runs a calibration's load test as the worker renders: GPUs
// of their own (an executor and a pool of hosts on the GPU being calibrated, whose
// worker pool, if any, is empty meanwhile), admitted by the calibration just
// measured, with as many hosts as the step asks for. Its monitor must be running
// (Monitor.Run) while it is used; Stop it at the end.
type CalibrationHosts struct {
	cfg  GPUsConfig
	dev  gpu.Device
	gpus *GPUs
	seq  atomic.Int64
}

var _ calibrate.Admission = (*CalibrationHosts)(nil)

// NewCalibrationHosts returns the admission of a calibration of dev with profile p;
// cfg is the worker's GPUs' configuration (its monitor is shared, not closed).
func NewCalibrationHosts(cfg GPUsConfig, dev gpu.Device) *CalibrationHosts {
	return &CalibrationHosts{cfg: cfg, dev: dev}
}

// Prepare readies the seats of profile p admitted by cal.
func (c *CalibrationHosts) Prepare(ctx context.Context, p gpu.Profile, cal gpu.Calibration) error {
	n := p.Concurrency
	if c.gpus == nil {
		cfg := c.cfg
		cfg.GPUs, cfg.SharedMonitor = []gpu.Device{c.dev}, true
		sl, err := NewGPUs(cfg)
		if err != nil {
			return err
		}
		c.gpus = sl
		if err := sl.Apply(c.dev.UUID, Setting{Profile: p, Calibration: cal}); err != nil {
			return err
		}
		sl.Start(ctx)
	} else if err := c.gpus.Apply(c.dev.UUID, Setting{Profile: p, Calibration: cal}); err != nil {
		return err
	}
	return c.gpus.WaitServing(ctx, c.dev.UUID, n)
}

// Synthesize runs one line through a permit.
func (c *CalibrationHosts) Synthesize(ctx context.Context, req tts.Request, audioSeconds float64) (tts.Result, error) {
	sl, err := c.gpus.Acquire(ctx, workflow.PermitRequest{LineID: c.seq.Add(1), AudioSeconds: audioSeconds,
		TextRunes: len([]rune(req.Text))})
	if err != nil {
		return tts.Result{}, err
	}
	res, err := sl.Engine().Synthesize(ctx, req)
	sl.Done(workflow.Outcome{PeakBytes: res.PeakReservedBytes, OOM: errors.Is(err, tts.ErrOutOfMemory), Failed: err != nil})
	return res, err
}

// Stop drains and stops the calibration's hosts.
func (c *CalibrationHosts) Stop() {
	if c.gpus == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.gpus.Stop(ctx); err != nil {
		c.gpus.log.Warn("stopping the calibration's hosts", "err", err)
	}
}

// monitorMemory reads a GPU's used memory from NVML, freshly.
type monitorMemory struct {
	m    *gpu.Monitor
	uuid string
}

func (d monitorMemory) Used() (int64, bool) {
	for _, smp := range d.m.SampleNow(context.Background()) {
		if smp.UUID == d.uuid && smp.Has(gpu.MetricMemory) {
			return smp.UsedBytes, true
		}
	}
	return 0, false
}

// The calibration results a worker stores (gpu_calibrations.result) and its
// progress while it runs (gpu_calibrations.progress) are JSON; this file is their
// one encoder and their one decoder.

// DecodeCalibration reads a stored calibration result; nil (and no error) when
// there is none.
func DecodeCalibration(raw json.RawMessage) (*gpu.CalibrationResult, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var r gpu.CalibrationResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decoding a calibration result: %w", err)
	}
	return &r, nil
}

func encodeCalibration(res *gpu.CalibrationResult) (json.RawMessage, error) {
	if res == nil {
		return nil, nil
	}
	data, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encoding a calibration result: %w", err)
	}
	return data, nil
}

// progress is a running calibration's progress as stored: a catalog message.
type progress struct {
	Key  string `json:"key"`
	Args []any  `json:"args,omitempty"`
}

func encodeProgress(key string, args []any) string {
	data, _ := json.Marshal(progress{Key: key, Args: args}) // strings and numbers only
	return string(data)
}

// CalibrationRecord is a stored calibration as the admin page shows it: its row
// and what its JSON columns say.
type CalibrationRecord struct {
	studio.GPUCalibration
	// ProfileName is the calibrated profile's name ("": the default profile).
	ProfileName string
	// Progress is what a waiting or running calibration is doing (nil: unknown).
	Progress *gpu.Warning
	// Result is what a finished calibration measured (nil: none).
	Result *gpu.CalibrationResult
}

// RecordOf decodes a stored calibration's profile, progress and result; a column
// that cannot be read is left out.
func RecordOf(c studio.GPUCalibration) CalibrationRecord {
	rec := CalibrationRecord{GPUCalibration: c}
	if p, err := c.ProfileValue(); err == nil {
		rec.ProfileName = p.Name
	}
	if c.Progress != "" && c.Active() {
		var pr progress
		if json.Unmarshal([]byte(c.Progress), &pr) == nil && i18n.Has(pr.Key) {
			rec.Progress = &gpu.Warning{Key: pr.Key, Args: pr.Args}
		}
	}
	rec.Result, _ = DecodeCalibration(c.Result)
	return rec
}

// Calibrations lists the newest calibrations first, at most limit.
func Calibrations(ctx context.Context, store *studio.Store, limit int) ([]CalibrationRecord, error) {
	cs, err := store.GPUCalibrations(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]CalibrationRecord, len(cs))
	for i, c := range cs {
		out[i] = RecordOf(c)
	}
	return out, nil
}

// RequestCalibration asks the worker that owns the live GPU with uuid to calibrate
// it with the stored profile profileID (0: the default profile). A GPU no live worker
// has is ErrUnknownGPU; one being calibrated studio.ErrConflict.
func RequestCalibration(ctx context.Context, store *studio.Store, userID int64, uuid string, profileID int64) (*studio.GPUCalibration, error) {
	board, err := ReadBoard(ctx, store)
	if err != nil {
		return nil, err
	}
	card, ok := board.Card(uuid)
	if !ok {
		return nil, fmt.Errorf("GPU %s: %w", uuid, ErrUnknownGPU)
	}
	sp := studio.GPUProfile{GPUProfileSettings: settingsOf(gpu.DefaultProfile())}
	if profileID != 0 {
		p, err := store.GPUProfileByID(ctx, profileID)
		if err != nil {
			return nil, err
		}
		sp = *p
	}
	return store.RequestGPUCalibration(ctx, userID, uuid, card.GPU.Name, sp)
}

// SaveCalibration stores a calibration made outside a worker (`dubstudio
// calibrate`) of dev with profile p, stored (nil: p is not stored); runErr is how
// the run failed, if it did.
func SaveCalibration(ctx context.Context, store *studio.Store, worker string, dev gpu.Device, p gpu.Profile,
	stored *studio.GPUProfile, res *gpu.CalibrationResult, runErr error) (*studio.GPUCalibration, error) {
	data, err := encodeCalibration(res)
	if err != nil {
		return nil, err
	}
	sp := studio.GPUProfile{GPUProfileSettings: settingsOf(p)}
	if stored != nil {
		sp = *stored
	}
	pj, err := json.Marshal(sp)
	if err != nil {
		return nil, fmt.Errorf("encoding the calibrated profile: %w", err)
	}
	c := &studio.GPUCalibration{GPUUUID: dev.UUID, GPUName: dev.Name, Worker: worker, Profile: pj, Result: data}
	if stored != nil {
		c.ProfileID = &stored.ID
	}
	if runErr != nil {
		c.Error = runErr.Error()
	}
	if err := store.SaveGPUCalibration(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}
