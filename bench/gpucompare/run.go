package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"dubstudio/gpu"
	"dubstudio/tts"
)

// result is one run of the workload.
type result struct {
	Situation string `json:"situation"` // "whole card" or "24 GiB"
	Method    string `json:"method"`    // "fixed" or "executor"
	// Hosts is N for the fixed method, the profile's concurrency for the executor, 1 for
	// the batched method (whose host decodes Sequences lines at once).
	Hosts        int     `json:"hosts"`
	Sequences    int     `json:"sequences,omitempty"`
	Lines        int     `json:"lines"`
	Done         int     `json:"done"`
	Failed       int     `json:"failed"`
	OOMs         int     `json:"ooms"`
	HostsKilled  int     `json:"hosts_killed"`
	AudioSeconds float64 `json:"audio_seconds"`
	WallSeconds  float64 `json:"wall_seconds"`
	// Throughput is audio seconds produced per wall second.
	Throughput float64 `json:"throughput"`
	// PeakUsedBytes is the card's highest NVML reading during the run, other
	// processes included; BaselineBytes the reading before our hosts started.
	PeakUsedBytes int64 `json:"peak_used_bytes"`
	BaselineBytes int64 `json:"baseline_bytes"`
	// Line latency: from the moment a host takes the line until its audio is back,
	// retries included.
	P50Seconds float64 `json:"p50_seconds"`
	P95Seconds float64 `json:"p95_seconds"`
	// P95ShortSeconds is the p95 latency of the lines of at most 5 s of audio.
	P95ShortSeconds float64 `json:"p95_short_seconds"`
	// StageSeconds sums the hosts' stage times over the lines ("queue", "gpt",
	// "s2mel", "vocoder", ...).
	StageSeconds map[string]float64 `json:"stage_seconds,omitempty"`
	// BatchRowsMean is the mean over lines of a batching host's mean rows per decode
	// step while the line decoded; BatchRowsMost the largest of them.
	BatchRowsMean float64  `json:"batch_rows_mean,omitempty"`
	BatchRowsMost float64  `json:"batch_rows_most,omitempty"`
	StartError    string   `json:"start_error,omitempty"`
	Errors        []string `json:"errors,omitempty"`
	// Profile is the executor's profile, from its calibration.
	Profile *gpu.Profile `json:"profile,omitempty"`
}

// healthy: every line done, no OOM, no host lost, every host started.
func (r *result) healthy() bool {
	return r.StartError == "" && r.Failed == 0 && r.OOMs == 0 && r.HostsKilled == 0 && r.Done == r.Lines
}

// tally collects a run's outcomes from several goroutines.
type tally struct {
	mu        sync.Mutex
	r         *result
	latencies []float64
	short     []float64 // latencies of lines of at most shortLineSeconds
	rows      []float64 // batching hosts' mean rows per step, per line
}

// shortLineSeconds bounds the short lines whose p95 latency is reported.
const shortLineSeconds = 5

func (t *tally) done(out tts.Result, took time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.Done++
	t.r.AudioSeconds += out.AudioSeconds
	t.latencies = append(t.latencies, took.Seconds())
	if out.AudioSeconds <= shortLineSeconds {
		t.short = append(t.short, took.Seconds())
	}
	for k, v := range out.Stages {
		if t.r.StageSeconds == nil {
			t.r.StageSeconds = map[string]float64{}
		}
		t.r.StageSeconds[k] += v
	}
	if out.Sequence != nil {
		t.rows = append(t.rows, out.Sequence.BatchRowsMean)
	}
}

func (t *tally) fail(l line, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.Failed++
	t.note(fmt.Sprintf("line %d (%.1f s): %v", l.ID, l.Seconds, err))
}

func (t *tally) oom() {
	t.mu.Lock()
	t.r.OOMs++
	t.mu.Unlock()
}

func (t *tally) killed(l line, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.HostsKilled++
	t.note(fmt.Sprintf("host lost on line %d (%.1f s): %v", l.ID, l.Seconds, err))
}

// warmUpFailed records a failed warm-up line: an OOM counts, the rest is noted.
func (t *tally) warmUpFailed(i int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if isOOM(err) {
		t.r.OOMs++
	}
	t.note(fmt.Sprintf("warm-up %d: %v", i, err))
}

func (t *tally) note(s string) {
	if len(t.r.Errors) < 20 {
		t.r.Errors = append(t.r.Errors, s)
	}
}

// finish computes the figures from the wall time.
func (t *tally) finish(wall time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.WallSeconds = wall.Seconds()
	if t.r.WallSeconds > 0 {
		t.r.Throughput = t.r.AudioSeconds / t.r.WallSeconds
	}
	t.r.P50Seconds, t.r.P95Seconds = percentile(t.latencies, 0.50), percentile(t.latencies, 0.95)
	t.r.P95ShortSeconds = percentile(t.short, 0.95)
	if len(t.rows) > 0 {
		var sum float64
		for _, x := range t.rows {
			sum += x
		}
		t.r.BatchRowsMean, t.r.BatchRowsMost = sum/float64(len(t.rows)), slices.Max(t.rows)
	}
}

// percentile is the nearest-rank percentile of xs (0 when empty).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// peakWatch keeps the card's highest used memory while it runs, reading NVML
// every 200 ms.
type peakWatch struct {
	mu   sync.Mutex
	peak int64
	stop chan struct{}
	done chan struct{}
}

func watchPeak(m *gpu.Monitor, uuid string) *peakWatch {
	w := &peakWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			used := usedNow(m, uuid)
			w.mu.Lock()
			w.peak = max(w.peak, used)
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// end stops watching and returns the peak.
func (w *peakWatch) end() int64 {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

// usedNow reads the card's used memory.
func usedNow(m *gpu.Monitor, uuid string) int64 {
	for _, s := range m.SampleNow(context.Background()) {
		if s.UUID == uuid {
			return s.UsedBytes
		}
	}
	return 0
}

// speakers are the script's characters: a reference recording each and, once
// prepared, its conditioning file.
type speakers struct {
	refs  []string
	conds []string
}

// request is line l's synthesis request, the same for both methods: the line's slot
// as target length, its character's prepared conditioning, the default profile's
// segment size and generation cap (what the executor's permits send).
func (sp *speakers) request(l line, out string, p gpu.Profile, tokensPerSecond float64) tts.Request {
	return tts.Request{Text: l.Text, Language: "en", TargetSeconds: l.Seconds,
		Speaker:                 tts.Speaker{ReferenceAudioPath: sp.refs[l.Character], ConditioningPath: sp.conds[l.Character]},
		MaxTextTokensPerSegment: p.SegmentTokens, MaxMelTokens: int(math.Ceil(p.MaxGenSeconds * 1.2 * tokensPerSecond)),
		Seed: l.ID, OutputPath: out}
}

// prepare computes every character's conditioning with engine, into dir.
func (sp *speakers) prepare(ctx context.Context, e tts.Engine, dir string) error {
	sp.conds = make([]string, len(sp.refs))
	for i, ref := range sp.refs {
		res, err := e.PrepareSpeaker(ctx, tts.PrepareRequest{ReferenceAudioPath: ref, CacheDir: filepath.Join(dir, "conditioning")})
		if err != nil {
			return fmt.Errorf("preparing character %d: %w", i+1, err)
		}
		sp.conds[i] = res.CachePath
	}
	return nil
}

// isOOM reports an out-of-memory failure of a synthesis or a host's start.
func isOOM(err error) bool { return errors.Is(err, tts.ErrOutOfMemory) }
