package workflow

import (
	"context"

	"dubstudio/tts"
)

// SlotRequest describes a synthesis about to run, for admission.
type SlotRequest struct {
	LineID int64
	// AudioSeconds is how much audio the line will produce: its slot when
	// duration-locked, otherwise a prediction from its text.
	AudioSeconds float64
	TextRunes    int
}

// SlotOutcome reports how a synthesis went, so that admission can learn from it.
type SlotOutcome struct {
	PeakBytes int64
	OOM       bool
	Failed    bool
	// Hung: the engine did not answer within the synthesis deadline. A slot over a
	// model-host process should kill the host (the pool restarts it): a request it
	// abandoned may still be running there.
	Hung bool
}

// Slot is the right to run one synthesis on one engine (one model-host process, one
// GPU share, or one CPU slot).
type Slot interface {
	Engine() tts.Engine
	// Device names where the synthesis runs: a GPU's UUID, or "" on the CPU.
	Device() string
	// Done gives the slot back.
	Done(SlotOutcome)
}

// Slots admits syntheses: on a GPU host the VRAM-budgeted executor, on a CPU host a
// fixed number of engine slots. Acquire blocks until the request may run or ctx ends.
type Slots interface {
	Acquire(ctx context.Context, req SlotRequest) (Slot, error)
	// Capacity is how many syntheses can run at once at most.
	Capacity() int
	// Engines names the engines these slots run, for the worker registry.
	Engines() []string
	// Model describes the model the slots run; speaker conditioning is keyed by its
	// version.
	Model(ctx context.Context) (tts.HostInfo, error)
}

// slotTrier is implemented by Slots that can tell at once whether a slot is free.
type slotTrier interface {
	// TryAcquire returns a free slot, or nil without waiting.
	TryAcquire(req SlotRequest) Slot
}

// LocalSlots runs up to N syntheses at once on one engine: the CPU preview engine, the
// simulator, or an external server with declared concurrency.
type LocalSlots struct {
	engine tts.Engine
	sem    chan struct{}
}

// NewLocalSlots makes n slots over engine.
func NewLocalSlots(engine tts.Engine, n int) *LocalSlots {
	return &LocalSlots{engine: engine, sem: make(chan struct{}, max(n, 1))}
}

// Acquire waits for a free slot.
func (s *LocalSlots) Acquire(ctx context.Context, _ SlotRequest) (Slot, error) {
	select {
	case s.sem <- struct{}{}:
		return localSlot{s}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TryAcquire takes a free slot if there is one.
func (s *LocalSlots) TryAcquire(SlotRequest) Slot {
	select {
	case s.sem <- struct{}{}:
		return localSlot{s}
	default:
		return nil
	}
}

// Capacity is the number of slots.
func (s *LocalSlots) Capacity() int { return cap(s.sem) }

// Engines names the one engine.
func (s *LocalSlots) Engines() []string { return []string{s.engine.Name()} }

// Model asks the engine what it runs.
func (s *LocalSlots) Model(ctx context.Context) (tts.HostInfo, error) { return s.engine.Info(ctx) }

type localSlot struct{ s *LocalSlots }

func (l localSlot) Engine() tts.Engine { return l.s.engine }
func (l localSlot) Device() string     { return "" }
func (l localSlot) Done(SlotOutcome)   { <-l.s.sem }
