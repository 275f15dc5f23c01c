package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"dubstudio/gpu"
	"dubstudio/tts"
)

// benchHost is a model host the fixed method drives itself.
type benchHost interface {
	gpu.Host
	Engine() tts.Engine
}

// rig is what both methods share: the card, its monitor, how hosts start, the
// script and its characters.
type rig struct {
	dev     gpu.Device
	monitor *gpu.Monitor
	// newMonitor opens another monitor of the same card (the executor's GPUs own
	// theirs).
	newMonitor func(ctx context.Context) *gpu.Monitor
	launcher   gpu.HostLauncher
	lines      []line
	speakers   *speakers
	work       string
	situation  string
	profile    gpu.Profile // the default profile: segment size and generation cap
	tps        float64
	log        func(format string, args ...any)
	// batch is the batched method's profile while it runs: the launcher starts
	// batching hosts of it (ttshost.BatchArgs); zero otherwise.
	batchMu sync.Mutex
	batch   gpu.Profile
}

// launch starts the i-th host of a pool (with shared weights the first lends them).
func (r *rig) launch(ctx context.Context, id string, i int) (benchHost, error) {
	h, err := gpu.LaunchPinned(ctx, r.launcher, gpu.LaunchOpts{GPU: r.dev.UUID, GPUIndex: r.dev.Index, ID: id,
		Weights: r.profile.WeightsRole(i)}, 0)
	if err != nil {
		return nil, err
	}
	bh, ok := h.(benchHost)
	if !ok {
		_ = h.Kill()
		return nil, fmt.Errorf("host %s is a %T, without an engine", id, h)
	}
	return bh, nil
}

// fixed runs the source documents' method with n model hosts: n workers, each with
// its own host, take lines from a bounded queue; a line that runs out of memory is
// retried once after the host frees its cache, a second failure puts it on the
// failed list. A host that dies is counted, its line failed, and a new one started.
func (r *rig) fixed(ctx context.Context, n int) *result {
	res := &result{Situation: r.situation, Method: "fixed", Hosts: n, Lines: len(r.lines),
		BaselineBytes: usedNow(r.monitor, r.dev.UUID)}
	peak := watchPeak(r.monitor, r.dev.UUID)
	hosts := make([]benchHost, n)
	defer func() {
		var wg sync.WaitGroup
		for _, h := range hosts {
			if h != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					_ = h.Stop(sctx)
				}()
			}
		}
		wg.Wait()
	}()

	// Start the hosts together, as a fixed pool does (with shared weights, the
	// lender first).
	errs := make([]error, n)
	var wg sync.WaitGroup
	first := 0
	if r.profile.ShareWeights {
		hosts[0], errs[0] = r.launch(ctx, fmt.Sprintf("fixed%d-0", n), 0)
		first = 1
	}
	for i := first; i < n && errs[0] == nil; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hosts[i], errs[i] = r.launch(ctx, fmt.Sprintf("fixed%d-%d", n, i), i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		res.StartError = err.Error()
		if isOOM(err) {
			res.OOMs++
		}
		res.PeakUsedBytes = peak.end()
		return res
	}
	if err := r.speakers.prepare(ctx, hosts[0].Engine(), r.work); err != nil {
		res.StartError = err.Error()
		res.PeakUsedBytes = peak.end()
		return res
	}
	t := &tally{r: res}
	// One short line per host first, untimed: the first request of a host is slow.
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := line{ID: int64(-1 - i), Seconds: 2, Character: i % len(r.speakers.refs), Text: "A short line to warm the host up."}
			if _, err := r.synthesize(ctx, hosts[i], l); err != nil {
				t.warmUpFailed(i, err)
			}
		}()
	}
	wg.Wait()

	queue := make(chan line, 2*n) // bounded: concurrency is the workers, not the queue
	start := time.Now()
	go func() {
		defer close(queue)
		for _, l := range r.lines {
			select {
			case queue <- l:
			case <-ctx.Done():
				return
			}
		}
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range queue {
				h := hosts[i]
				t0 := time.Now()
				out, err := r.synthesize(ctx, h, l)
				if isOOM(err) {
					t.oom()
					// Free the cache, then once more.
					_, _ = h.ReleaseCache(ctx)
					out, err = r.synthesize(ctx, h, l)
					if isOOM(err) {
						t.oom()
					}
				}
				switch {
				case err == nil:
					t.done(out, time.Since(t0))
				case exited(h):
					t.killed(l, err)
					t.fail(l, err)
					if nh, lerr := r.launch(ctx, fmt.Sprintf("fixed%d-%d-again", n, i), i); lerr == nil {
						hosts[i] = nh
					} else {
						t.mu.Lock()
						t.note(fmt.Sprintf("host %d not restarted: %v", i, lerr))
						t.mu.Unlock()
						return // this worker is gone; the others drain the queue
					}
				default:
					t.fail(l, err)
				}
			}
		}()
	}
	wg.Wait()
	t.finish(time.Since(start))
	res.PeakUsedBytes = peak.end()
	return res
}

// synthesize runs line l on host h and removes its audio.
func (r *rig) synthesize(ctx context.Context, h benchHost, l line) (tts.Result, error) {
	out := filepath.Join(r.work, fmt.Sprintf("line%d-%d.wav", l.ID, time.Now().UnixNano()))
	defer os.Remove(out)
	return h.Engine().Synthesize(ctx, r.speakers.request(l, out, r.profile, r.tps))
}

// exited reports whether h's process has ended, giving it a moment to be reaped.
func exited(h gpu.Host) bool {
	select {
	case <-h.Exited():
		return true
	case <-time.After(2 * time.Second):
		return false
	}
}
