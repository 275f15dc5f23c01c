package calibrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"dubstudio/gpu"
	"dubstudio/gpu/ttshost"
	"dubstudio/i18n"
	"dubstudio/tts"
)

// The calibration of a batching host (Profile.Batching, protocol 2): one host for
// the whole calibration, started with the profile's maximum sequences (the load
// test's ceiling), beams and KV pool.
//
//  1. memory after load as for a process host; the host's batch figures from its
//     health (KV pool, KV bytes per token, beams, maximum sequences);
//  2. bytes per sequence by length: each bucket's lines alone, at least three runs,
//     the worst of the host's per-line shares kept (sequence.kv_bytes, in the KV pool,
//     and sequence.activation_bytes, beyond it): the activations make the curve the
//     executor admits lines by;
//  3. how many lines of the load test's mix fit at once (gpu.BatchSequencesThatFit);
//  4. a load test at 1, 2, 4, 8, ... lines at once (gpu.BatchLoadTestSteps) on the
//     one host, each step after an untimed warm-up of as many short lines at once,
//     until a step fails, a step gains under 5% (gpu.BatchLoadTestSettled), or the
//     lines that fit or the host's maximum sequences are reached;
//  5. the analysis (gpu.AnalyzeBatchLoadTest): crash, slowdown and latency points,
//     the recommended maximum sequences.
//
// The executor admits a batching host's lines by their activations alone, which the
// host bounds by its own KV pool; the load test therefore runs on the host directly,
// whether or not Config.Admission is set.

// batchReporter is a host that reports its batch (ttshost.PinnedHost, ttshost.SimHost).
type batchReporter interface{ BatchInfo() *tts.BatchInfo }

func (r *runner) runBatching(ctx context.Context) error {
	r.cfg.Progress("gpu.calibration.progress.load")
	h, err := r.launch(ctx)
	if err != nil {
		return fmt.Errorf("starting the batching model host: %w", err)
	}
	var bi *tts.BatchInfo
	if br, ok := h.(batchReporter); ok {
		bi = br.BatchInfo()
	}
	if bi == nil {
		return fmt.Errorf("the model host does not batch (it reports no batch in its health, protocol 2): %w", gpu.ErrInvalid)
	}
	info, err := h.Engine().Info(ctx)
	if err != nil {
		return fmt.Errorf("asking the model host about its model: %w", err)
	}
	r.res.Engine, r.res.Model, r.res.ModelVersion = h.Engine().Name(), info.Model, info.Version
	r.res.LoadedAllocatedBytes = info.ResidentBytes
	if r.res.LoadedBytes, r.res.MemoryCounter, err = h.Memory(ctx); err != nil {
		return fmt.Errorf("reading the model host's memory: %w", err)
	}
	if r.res.ResidentBytes, err = r.settled(ctx, h); err != nil {
		return err
	}
	batch := &gpu.BatchCalibration{HostResidentBytes: info.ResidentBytes, KVCacheBytes: bi.KVCacheBytes,
		KVBytesPerToken: bi.KVBytesPerToken, Beams: bi.Beams, MaxSequences: bi.MaxSequences, PrefixTokens: bi.PrefixTokens,
		TokensPerAudioSecond: bi.TokensPerSecond, ActivationBytesPerSecond: bi.ActivationBytesPerSecond}
	r.res.Batch = batch

	// (2) Bytes per sequence by length, each line alone.
	r.res.PeakCounter = gpu.CounterSequence
	for _, b := range r.cfg.Buckets {
		for i := range r.cfg.Runs {
			r.cfg.Progress("gpu.calibration.progress.bucket", b.Name, b.Seconds, i+1, r.cfg.Runs)
			run, err := r.measureSequence(ctx, h, b)
			if err != nil {
				return fmt.Errorf("bucket %s, run %d: %w", b.Name, i+1, err)
			}
			r.res.Runs = append(r.res.Runs, run)
		}
	}
	// The weights and what else the process holds beside its KV pool: BatchResident
	// adds the profile's pool to it.
	weights := max(r.res.ResidentBytes-bi.KVCacheBytes, 0)
	rep := gpu.AnalyzeCalibration(gpu.CalibrationInput{ResidentBytes: weights, Runs: r.res.Runs,
		MinRuns: r.cfg.Runs, MeasuredAt: r.cfg.Now()})
	r.res.Analysis, r.res.Calibration, r.res.Leaks, r.res.Warnings = rep.Buckets, rep.Calibration, rep.Leaks, rep.Warnings

	total, foreign := r.cfg.GPU.TotalBytes, r.res.BaselineUsedBytes
	if err := gpu.CheckFits(r.cfg.Profile, rep.Calibration, total, foreign); err != nil {
		var ie *i18n.Error
		if !errors.As(err, &ie) {
			return err
		}
		r.res.DoesNotFit = &gpu.Warning{Key: ie.Key, Args: ie.Args}
		r.res.Verdict = gpu.LoadVerdict{Why: "does_not_fit"}
		r.res.RecommendedProfile = r.cfg.Profile
		return nil
	}

	// (3) The lines of the mix that fit at once.
	byName := map[string]gpu.BucketResult{}
	for _, b := range rep.Buckets {
		byName[b.Bucket] = b
	}
	mix := r.mix()
	var kv, act int64
	for _, b := range mix {
		kv += byName[b.Name].KVBytes
		act += byName[b.Name].PeakBytes
	}
	batch.MixKVBytes, batch.MixActivationBytes = kv/int64(len(mix)), act/int64(len(mix))
	batch.SequencesThatFit = gpu.BatchSequencesThatFit(bi.KVCacheBytes, batch.MixKVBytes, batch.MixActivationBytes,
		r.cfg.Profile.Budget(total, foreign), r.res.ResidentBytes)
	r.res.ConcurrencyThatFits = batch.SequencesThatFit
	limit := batch.SequencesThatFit
	if bi.MaxSequences > 0 {
		limit = min(limit, bi.MaxSequences)
	}
	if r.cfg.MaxConcurrency > 0 {
		limit = min(limit, r.cfg.MaxConcurrency)
	}
	batch.Limit = limit
	if limit < 1 {
		r.res.DoesNotFit = &gpu.Warning{Key: "gpu.calibration.batch_no_room",
			Args: []any{float64(batch.MixKVBytes) / 1e9, float64(bi.KVCacheBytes) / 1e9}}
		r.res.Verdict = gpu.LoadVerdict{Why: "does_not_fit"}
		r.res.RecommendedProfile = r.cfg.Profile
		return nil
	}

	// (4) Lines at once on the one host.
	var steps []gpu.LoadStep
	var stepErr error
	for _, n := range gpu.BatchLoadTestSteps(limit) {
		r.cfg.Progress("gpu.calibration.progress.step", n)
		step, err := r.batchStep(ctx, h, n)
		if err != nil {
			// Cancelled or out of time: the steps done are analysed all the same,
			// and the run still fails.
			stepErr = err
			break
		}
		steps = append(steps, step)
		if gpu.BatchLoadTestSettled(steps) {
			break
		}
	}
	if len(steps) == 0 {
		return stepErr
	}
	v, err := gpu.AnalyzeBatchLoadTest(steps)
	if err != nil {
		return err
	}
	r.res.Verdict, r.res.Recommended = v, v.Recommended
	p := r.cfg.Profile
	if v.Recommended > 0 {
		p.Concurrency = v.Recommended
		p.LongLaneLimit = gpu.LongLinesThatFit(p, rep.Calibration, v.Recommended, total, foreign)
	}
	r.res.RecommendedProfile = p
	return stepErr
}

// measureSequence runs one line of bucket b alone on the batching host h: its own
// share (KV blocks and activations), its time, and the host's memory afterwards.
func (r *runner) measureSequence(ctx context.Context, h ttshost.EngineHost, b gpu.CalibrationBucket) (gpu.Run, error) {
	start := r.cfg.Now()
	res, err := r.synthesize(ctx, h, b)
	elapsed := r.cfg.Now().Sub(start)
	if err != nil {
		return gpu.Run{}, err
	}
	if res.Sequence == nil {
		return gpu.Run{}, fmt.Errorf("the batching host answered without the line's sequence (protocol 2): %w", gpu.ErrInvalid)
	}
	after, counter, err := h.Memory(ctx)
	if err != nil {
		return gpu.Run{}, err
	}
	return gpu.Run{Bucket: b.Name, Characters: len([]rune(b.Text)), AudioSeconds: res.AudioSeconds,
		PeakBytes: res.Sequence.ActivationBytes, KVBytes: res.Sequence.KVBytes, FallbackBytes: after,
		Counter: counter, Duration: elapsed}, nil
}

// batchStep is one load-test step on the batching host h: n lines at once from a
// queue in the mix of a script, at least four a line at once and the longest first,
// after an untimed warm-up of n short lines at once (larger batches pick other
// kernels). The first run on an H200 queued two a line at once, shortest first: the
// 30 s line of each step started last and ran alone, the step's time was its tail, and
// the calibration stopped at 4 lines (7.66 audio s/s) on a host that renders 30 at 64.
func (r *runner) batchStep(ctx context.Context, h ttshost.EngineHost, n int) (gpu.LoadStep, error) {
	step := gpu.LoadStep{Concurrency: n}
	round := r.mix()
	rounds := int(math.Ceil(float64(max(r.cfg.LinesPerStep, 4*n)) / float64(len(round))))
	step.Tasks = rounds * len(round)
	run := func(ctx context.Context, _ int, b gpu.CalibrationBucket) outcome {
		t0 := r.cfg.Now()
		res, err := r.synthesize(ctx, h, b)
		return outcome{b: b, err: err, latency: r.cfg.Now().Sub(t0), audio: res.AudioSeconds,
			killed: errors.Is(err, tts.ErrUnavailable) && exited(h)}
	}
	if !r.cfg.NoWarmUp && n > 1 {
		r.cfg.Progress("gpu.calibration.progress.batch_warmup", n)
		shortest := round[0]
		var wg sync.WaitGroup
		var mu sync.Mutex
		var bad []outcome
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if o := run(ctx, i, shortest); o.err != nil {
					mu.Lock()
					bad = append(bad, o)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return step, ctx.Err()
		}
		for _, o := range bad {
			r.count(&step, n, o)
		}
		if len(bad) > 0 {
			return step, nil
		}
	}
	queue := make(chan task, step.Tasks)
	for _, b := range longestFirst(round, rounds) {
		queue <- task{b}
	}
	close(queue)
	return r.timedStep(ctx, step, queue, run, func() int64 {
		b, _, err := h.Memory(ctx)
		if err != nil {
			return 0
		}
		return b
	})
}

// longestFirst is rounds of the mix, the longest lines first: with n workers taking
// lines in this order, the last lines to start are the shortest, so the step ends
// soon after its queue does (the longest-processing-time order).
func longestFirst(mix []gpu.CalibrationBucket, rounds int) []gpu.CalibrationBucket {
	out := make([]gpu.CalibrationBucket, 0, rounds*len(mix))
	for range rounds {
		out = append(out, mix...)
	}
	slices.SortStableFunc(out, func(a, b gpu.CalibrationBucket) int { return cmp.Compare(b.Seconds, a.Seconds) })
	return out
}
