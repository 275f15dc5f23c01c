package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// oomRetries is the worker's default OOM_RETRIES.
const oomRetries = 1

// executor runs dubstudio's way: the worker's GPUs calibrate the card with
// the default profile (what the admin page's button does), apply the
// recommendation, and the lines go through the VRAM-budgeted executor with as many
// at once as River hands the worker. calOut receives the calibration as JSON.
func (r *rig) executor(ctx context.Context, memory func(string) calibrate.DeviceMemory, calOut string) *result {
	// The GPUs run their own monitor and close it when they stop.
	mon := r.newMonitor(ctx)
	res := &result{Situation: r.situation, Method: "executor", Lines: len(r.lines),
		BaselineBytes: usedNow(mon, r.dev.UUID)}
	gpus, err := fleet.NewGPUs(fleet.GPUsConfig{Engine: "bench", Monitor: mon,
		GPUs: []gpu.Device{r.dev}, Launcher: r.launcher, Memory: memory, TokensPerSecond: r.tps, ShareWeights: true})
	if err != nil {
		res.StartError = err.Error()
		return res
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = gpus.Stop(sctx)
	}()
	// A worker's GPUs run before anyone calibrates (the default profile's hosts);
	// the calibration drains them and runs its own.
	gpus.Start(ctx)
	calStart := time.Now()
	cal, err := gpus.Calibrate(ctx, 1, r.dev.UUID, r.profile, func(key string, args ...any) {
		r.log("calibration: %s %v", key, args)
	})
	if cal != nil && calOut != "" {
		if b, jerr := json.MarshalIndent(cal, "", "  "); jerr == nil {
			_ = os.WriteFile(calOut, b, 0o644)
		}
	}
	if err != nil {
		res.StartError = fmt.Sprintf("calibration: %v", err)
		return res
	}
	r.log("calibration took %.0f s: recommended concurrency %d (%s), crash at %d, slowdown at %d",
		time.Since(calStart).Seconds(), cal.Recommended, cal.Verdict.Why, cal.Verdict.CrashAt, cal.Verdict.SlowdownAt)
	if cal.Recommended == 0 {
		res.StartError = "the calibration recommends no concurrency"
		return res
	}
	p := cal.RecommendedProfile
	res.Profile, res.Hosts = &p, p.Concurrency
	if err := gpus.Apply(r.dev.UUID, fleet.Setting{Profile: p, Calibration: cal.Calibration, CalibrationID: 1}); err != nil {
		res.StartError = fmt.Sprintf("applying the calibration: %v", err)
		return res
	}
	return r.renderThroughPermits(ctx, gpus, mon, res, p.Concurrency, p.Concurrency)
}

// renderThroughPermits renders the workload through the worker's permits once
// serving hosts are up: the worker's prepare job (each character once), warmUps short
// untimed lines in parallel to warm the hosts' kernels, then every line with as many
// at once as River hands the worker. It fills in res and returns it.
func (r *rig) renderThroughPermits(ctx context.Context, gpus *fleet.GPUs, mon *gpu.Monitor, res *result, serving, warmUps int) *result {
	peak := watchPeak(mon, r.dev.UUID)
	if err := gpus.WaitServing(ctx, r.dev.UUID, serving); err != nil {
		res.StartError = err.Error()
		res.PeakUsedBytes = peak.end()
		return res
	}
	sl, err := gpus.Acquire(ctx, workflow.PermitRequest{AudioSeconds: 15})
	if err == nil {
		err = r.speakers.prepare(ctx, sl.Engine(), r.work)
		sl.Done(workflow.Outcome{Failed: err != nil})
	}
	if err != nil {
		res.StartError = err.Error()
		res.PeakUsedBytes = peak.end()
		return res
	}
	t := &tally{r: res}
	var wg sync.WaitGroup
	for i := range warmUps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := line{ID: int64(-1 - i), Seconds: 2, Character: i % len(r.speakers.refs), Text: "A short line to warm the host up."}
			if _, err := r.permitLine(ctx, gpus, l); err != nil {
				t.warmUpFailed(i, err)
			}
		}()
	}
	wg.Wait()

	queue := make(chan line, len(r.lines))
	for _, l := range r.lines {
		queue <- l
	}
	close(queue)
	start := time.Now()
	for range gpus.Capacity() { // what River hands the worker at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range queue {
				r.executorLine(ctx, gpus, l, t)
			}
		}()
	}
	wg.Wait()
	t.finish(time.Since(start))
	res.PeakUsedBytes = peak.end()
	return res
}

// executorLine renders one line as the worker's synthesize job does: an OOM is
// retried oomRetries times, a lost host (transient) is retried with a short
// backoff, anything else fails the line.
func (r *rig) executorLine(ctx context.Context, gpus *fleet.GPUs, l line, t *tally) {
	ooms, lost := 0, 0
	for {
		out, took, err := r.permitLineTimed(ctx, gpus, l)
		switch {
		case err == nil:
			t.done(out, took)
			return
		case isOOM(err):
			t.oom()
			if ooms++; ooms > oomRetries {
				t.fail(l, err)
				return
			}
		case errors.Is(err, tts.ErrUnavailable) && ctx.Err() == nil:
			t.killed(l, err)
			if lost++; lost > 5 {
				t.fail(l, err)
				return
			}
			time.Sleep(time.Second)
		default:
			t.fail(l, err)
			return
		}
	}
}

func (r *rig) permitLine(ctx context.Context, gpus *fleet.GPUs, l line) (tts.Result, error) {
	res, _, err := r.permitLineTimed(ctx, gpus, l)
	return res, err
}

// permitLineTimed waits for a permit, then synthesizes; took counts from the moment
// the permit is granted.
func (r *rig) permitLineTimed(ctx context.Context, gpus *fleet.GPUs, l line) (tts.Result, time.Duration, error) {
	sl, err := gpus.Acquire(ctx, workflow.PermitRequest{LineID: max(l.ID, 1), AudioSeconds: l.Seconds, TextRunes: len([]rune(l.Text))})
	if err != nil {
		return tts.Result{}, 0, err
	}
	t0 := time.Now()
	out := filepath.Join(r.work, fmt.Sprintf("line%d-%d.wav", l.ID, time.Now().UnixNano()))
	defer os.Remove(out)
	// The permit's engine applies the profile's segment size and generation cap.
	req := r.speakers.request(l, out, r.profile, r.tps)
	req.MaxTextTokensPerSegment, req.MaxMelTokens = 0, 0
	res, err := sl.Engine().Synthesize(ctx, req)
	sl.Done(workflow.Outcome{PeakBytes: res.PeakReservedBytes, OOM: isOOM(err), Failed: err != nil})
	return res, time.Since(t0), err
}
