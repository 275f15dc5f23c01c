package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"dubstudio/gpu"
	"dubstudio/gpu/ttshost"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// Acquire waits until the line may run on a GPU. A line longer than every GPU's
// profile allows, or whose predicted peak no GPU can ever give, is refused: the
// permit's engine fails it with a message the editor shows (split the line, or ask
// for a profile that allows it), never sending it to crash a host.
func (s *GPUs) Acquire(ctx context.Context, req workflow.PermitRequest) (workflow.Permit, error) {
	secs := req.AudioSeconds
	if req.LineID == 0 && req.TextRunes == 0 {
		// A speaker preparation: a short utterance whatever the worker asks.
		secs = min(secs, s.shortestMaxGen())
	}
	id := fmt.Sprintf("line %d", req.LineID)
	if req.LineID == 0 {
		id = "speaker preparation"
	}
	var lease *gpu.Lease
	var err error
	for {
		lease, err = s.exec.Acquire(ctx, gpu.Request{ID: id, LineID: req.LineID, AudioSeconds: secs, First: req.First})
		var nf *gpu.NeverFitsError
		if !errors.As(err, &nf) || nf.TooLong || !s.fitsCalibrated(secs) {
			break
		}
		// The executor holds the hosts bigger than calibrated for now (a host's model
		// is learnt from NVML once it is idle): the line fits the profile, so wait
		// rather than refuse it for good.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a GPU for %s: %w", id, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err != nil {
		var nf *gpu.NeverFitsError
		if errors.As(err, &nf) {
			if nf.TooLong {
				return refusal{engine: s.cfg.Engine, err: workflow.UserError("render.too_long", nf.LimitSeconds)}, nil
			}
			return refusal{engine: s.cfg.Engine, err: workflow.UserError(nf.MessageKey(), nf.MessageArgs()...)}, nil
		}
		return nil, err
	}
	h, ok := lease.Handle.(ttshost.EngineHost)
	if !ok {
		_ = lease.Done(gpu.Outcome{NotRun: true})
		return nil, fmt.Errorf("GPU permit: host %s is a %T: %w", lease.HostID, lease.Handle, gpu.ErrInvalid)
	}
	s.mu.Lock()
	p := s.gpus[lease.GPU].profile
	s.mu.Unlock()
	sl := &gpuPermit{s: s, lease: lease, host: h, profile: p}
	sl.engine = &hostEngine{Engine: h.Engine(), permit: sl}
	return sl, nil
}

// fitsCalibrated reports whether a line of secs fits some GPU by its profile and
// calibration alone: its peak beside the models of all the profile's hosts.
func (s *GPUs) fitsCalibrated(secs float64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.gpus {
		p := e.profile
		models := gpu.ModelsBytes(p, e.cal, p.Concurrency)
		if p.Batching {
			models = gpu.BatchResident(p, e.cal, e.dev.TotalBytes, 0)
		}
		room := p.Budget(e.dev.TotalBytes, 0) - models
		if secs <= p.MaxGenSeconds && e.cal.PeakBytes(secs) <= room {
			return true
		}
	}
	return false
}

func (s *GPUs) shortestMaxGen() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	least := math.Inf(1)
	for _, e := range s.gpus {
		least = min(least, e.profile.MaxGenSeconds)
	}
	return least
}

// Capacity is how many lines River hands this worker at once (see NewGPUs).
func (s *GPUs) Capacity() int { return s.capacity }

// Engines names the hosts' engine.
func (s *GPUs) Engines() []string { return []string{s.cfg.Engine} }

// Model describes the hosts' model, waiting for the first host to be ready.
func (s *GPUs) Model(ctx context.Context) (tts.HostInfo, error) {
	select {
	case <-s.infoReady:
		return s.info, nil
	case <-ctx.Done():
		return tts.HostInfo{}, fmt.Errorf("waiting for a model host to describe its model: %w", ctx.Err())
	}
}

// gpuPermit is an admitted line: a lease on one host of one GPU.
type gpuPermit struct {
	s       *GPUs
	lease   *gpu.Lease
	host    ttshost.EngineHost
	profile gpu.Profile
	engine  *hostEngine
	once    sync.Once
	// measured is the line's peak as reported to the executor, set by Done.
	measured atomic.Int64
}

var _ workflow.MeteredPermit = (*gpuPermit)(nil)

func (g *gpuPermit) Engine() tts.Engine { return g.engine }
func (g *gpuPermit) Device() string     { return g.lease.GPU }

// Usage is what the executor admitted the line for and, after Done, the peak it
// learnt from: the same quantity, beyond the host's resident memory.
func (g *gpuPermit) Usage() workflow.PermitUsage {
	return workflow.PermitUsage{PredictedBytes: g.lease.PredictedBytes, MeasuredBytes: g.measured.Load(),
		GPUIndex: g.lease.GPUIndex}
}

// Done reports the outcome to the executor: the measured peak (which corrects the
// prediction), an out-of-memory error (which raises the GPU's safety factor), a host
// that died or hung (which is killed and restarted by its pool).
func (g *gpuPermit) Done(o workflow.Outcome) {
	g.once.Do(func() {
		e := g.engine
		e.mu.Lock()
		res, err, ran := e.res, e.err, e.ran
		e.mu.Unlock()
		out := gpu.Outcome{NotRun: !ran && !o.Hung}
		switch {
		case o.Hung:
			// The request may still run on the host: kill it, its pool starts another.
			_ = g.host.Kill()
			out.HostDied = true
		case errors.Is(err, tts.ErrOutOfMemory) || o.OOM:
			out.OOM = true
		case errors.Is(err, tts.ErrUnavailable) && hostExited(g.host, g.lease):
			out.HostDied = true
		}
		switch resident := g.host.ResidentBytes(); {
		case res.Sequence != nil:
			// A batching host: the KV is in its resident memory; what the line added
			// on top, and what the executor predicts for it, is its activations.
			out.PeakBytes = res.Sequence.ActivationBytes
			if resident > 0 {
				out.CachedAfter = max(res.PeakReservedBytes-resident, 0)
			}
		case resident > 0 && res.PeakAllocatedBytes > 0:
			out.PeakBytes = max(res.PeakAllocatedBytes-resident, 0)
			out.CachedAfter = max(res.PeakReservedBytes-resident, 0)
		}
		g.measured.Store(out.PeakBytes)
		if rerr := g.lease.Done(out); rerr != nil {
			g.s.log.Warn("synthesis to run again", "gpu", g.lease.GPU, "host", g.lease.HostID, "reason", rerr)
		}
	})
}

// hostExited reports whether the host died (or its lease was taken away), giving
// the process a moment to be reaped after its connection dropped.
func hostExited(h ttshost.EngineHost, l *gpu.Lease) bool {
	select {
	case <-h.Exited():
		return true
	case <-l.Lost():
		return true
	case <-time.After(3 * time.Second):
		return false
	}
}

// refusal is the permit of a line that can never run: its engine fails the line with
// the reason (a permanent failure the editor shows).
type refusal struct {
	engine string
	err    error
}

func (r refusal) Engine() tts.Engine    { return refusingEngine(r) }
func (r refusal) Device() string        { return "" }
func (r refusal) Done(workflow.Outcome) {}

type refusingEngine refusal

func (r refusingEngine) Name() string { return r.engine }
func (r refusingEngine) Info(context.Context) (tts.HostInfo, error) {
	return tts.HostInfo{}, r.err
}
func (r refusingEngine) PrepareSpeaker(context.Context, tts.PrepareRequest) (tts.PrepareResult, error) {
	return tts.PrepareResult{}, r.err
}
func (r refusingEngine) Synthesize(context.Context, tts.Request) (tts.Result, error) {
	return tts.Result{}, r.err
}
func (r refusingEngine) Close() error { return nil }
