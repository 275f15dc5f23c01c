package workflow

import (
	"context"

	"dubstudio/tts"
)

// PermitRequest describes a synthesis about to run, for admission.
type PermitRequest struct {
	LineID int64
	// AudioSeconds is how much audio the line will produce: its slot when
	// duration-locked, otherwise a prediction from its text.
	AudioSeconds float64
	TextRunes    int
	// First: an editor's retake (PriorityFirst), admitted ahead of the lines waiting.
	First bool
}

// Outcome reports how a synthesis went, so that admission can learn from it.
type Outcome struct {
	PeakBytes int64
	OOM       bool
	Failed    bool
	// Hung: the engine did not answer within the synthesis deadline. A permit over a
	// model-host process should kill the host (the pool restarts it): a request it
	// abandoned may still be running there.
	Hung bool
}

// Permit is the right to run one synthesis on one engine (one model-host process,
// one GPU share, or one of a CPU engine's places). ("Slot" is a line's time window,
// start_ms..end_ms, and nothing else.)
type Permit interface {
	Engine() tts.Engine
	// Device names where the synthesis runs: a GPU's UUID, or "" on the CPU.
	Device() string
	// Done gives the permit back.
	Done(Outcome)
}

// MeteredPermit is a Permit admitted by a prediction of the line's memory (a GPU
// executor's lease): Usage says what it predicted, and after Done what the line
// measured against it, for the take to record.
type MeteredPermit interface {
	Permit
	Usage() PermitUsage
}

// PermitUsage is a metered permit's account of its line.
type PermitUsage struct {
	// PredictedBytes is what the line was admitted for (beyond its host's resident
	// memory, safety factor included); MeasuredBytes the same quantity as measured,
	// known after Done (0 before, or where the host reported none).
	PredictedBytes, MeasuredBytes int64
	// GPUIndex is the index of the GPU the permit ran on.
	GPUIndex int
}

// Permits admits syntheses: on a GPU host the VRAM-budgeted executor (fleet.GPUs),
// on a CPU host a fixed number of permits. Acquire blocks until the request may run
// or ctx ends.
type Permits interface {
	Acquire(ctx context.Context, req PermitRequest) (Permit, error)
	// Capacity is how many syntheses can run at once at most.
	Capacity() int
	// Engines names the engines these permits run, for the worker registry.
	Engines() []string
	// Model describes the model the permits run; speaker conditioning is keyed by
	// its version.
	Model(ctx context.Context) (tts.HostInfo, error)
}

// permitTrier is implemented by Permits that can tell at once whether a permit is
// free.
type permitTrier interface {
	// TryAcquire returns a free permit, or nil without waiting.
	TryAcquire(req PermitRequest) Permit
}

// LocalPermits runs up to N syntheses at once on one engine: the CPU preview engine,
// the simulator, or an external server with declared concurrency.
type LocalPermits struct {
	engine tts.Engine
	sem    chan struct{}
}

// NewLocalPermits makes n permits over engine.
func NewLocalPermits(engine tts.Engine, n int) *LocalPermits {
	return &LocalPermits{engine: engine, sem: make(chan struct{}, max(n, 1))}
}

// Acquire waits for a free permit.
func (s *LocalPermits) Acquire(ctx context.Context, _ PermitRequest) (Permit, error) {
	select {
	case s.sem <- struct{}{}:
		return localPermit{s}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TryAcquire takes a free permit if there is one.
func (s *LocalPermits) TryAcquire(PermitRequest) Permit {
	select {
	case s.sem <- struct{}{}:
		return localPermit{s}
	default:
		return nil
	}
}

// Capacity is the number of permits.
func (s *LocalPermits) Capacity() int { return cap(s.sem) }

// Engines names the one engine.
func (s *LocalPermits) Engines() []string { return []string{s.engine.Name()} }

// Model asks the engine what it runs.
func (s *LocalPermits) Model(ctx context.Context) (tts.HostInfo, error) { return s.engine.Info(ctx) }

type localPermit struct{ s *LocalPermits }

func (l localPermit) Engine() tts.Engine { return l.s.engine }
func (l localPermit) Device() string     { return "" }
func (l localPermit) Done(Outcome)       { <-l.s.sem }

// UserError fails a line for good with a catalog message the editor reads (key and
// its arguments): what the engine of a permit for a line that can never run returns.
func UserError(key string, args ...any) error { return userKey(key, args...) }
