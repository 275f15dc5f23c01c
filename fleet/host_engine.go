package fleet

import (
	"context"
	"errors"
	"math"
	"sync"

	"dubstudio/gpu"
	"dubstudio/tts"
)

// hostEngine is the leased host's engine: it applies the GPU's profile to the
// request (segment size, generation cap), stops waiting when the lease is lost
// (GPU lost, host gone) and keeps the outcome for Done.
type hostEngine struct {
	tts.Engine
	permit *gpuPermit

	mu  sync.Mutex
	res tts.Result
	err error
	ran bool
}

func (e *hostEngine) run(ctx context.Context, do func(ctx context.Context) error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := e.permit.lease
	go func() {
		select {
		case <-l.Lost():
			cancel()
		case <-lctx.Done():
		}
	}()
	err := do(lctx)
	if err != nil && ctx.Err() == nil {
		select {
		case <-l.Lost():
			// The GPU was lost or the host removed under the request: retry elsewhere.
			err = &tts.Error{Code: tts.CodeUnavailable, Message: "the GPU or its model host went away", Err: l.Err()}
		default:
			if errors.Is(err, tts.ErrUnavailable) && hostExited(e.permit.host, l) {
				err = &tts.Error{Code: tts.CodeUnavailable, Message: "the model host died mid-line",
					Err: &gpu.RetryableError{Reason: gpu.ReasonHostDied, GPU: l.GPU, Err: err}}
			}
		}
	}
	return err
}

// Synthesize runs the line on the leased host.
func (e *hostEngine) Synthesize(ctx context.Context, req tts.Request) (tts.Result, error) {
	p := e.permit.profile
	if req.MaxTextTokensPerSegment == 0 {
		req.MaxTextTokensPerSegment = p.SegmentTokens
	}
	if req.MaxMelTokens == 0 {
		req.MaxMelTokens = int(math.Ceil(p.MaxGenSeconds * 1.2 * e.permit.s.cfg.TokensPerSecond))
	}
	var res tts.Result
	err := e.run(ctx, func(ctx context.Context) error {
		var err error
		res, err = e.Engine.Synthesize(ctx, req)
		return err
	})
	e.mu.Lock()
	e.res, e.err, e.ran = res, err, true
	e.mu.Unlock()
	return res, err
}

// PrepareSpeaker computes a speaker's conditioning on the leased host.
func (e *hostEngine) PrepareSpeaker(ctx context.Context, req tts.PrepareRequest) (tts.PrepareResult, error) {
	var res tts.PrepareResult
	err := e.run(ctx, func(ctx context.Context) error {
		var err error
		res, err = e.Engine.PrepareSpeaker(ctx, req)
		return err
	})
	e.mu.Lock()
	e.err, e.ran = err, true
	e.mu.Unlock()
	return res, err
}
