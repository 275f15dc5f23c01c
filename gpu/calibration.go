package gpu

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"dubstudio/i18n"
)

// The analysis of calibration runs, following the memory-first method: measure one
// task (memory after load, peak, memory after the run), then peaks per text length
// keeping the worst of several runs, then raise concurrency step by step and use one
// step below the first that crashes or slows down. These are pure functions over
// measurements; the runs themselves are driven elsewhere.

// MemoryCounter names where a memory figure was read: the two differ (NVML sees
// the whole process with its cache and CUDA context; the allocator sees tensors).
type MemoryCounter string

// Memory counters.
const (
	CounterNVML           MemoryCounter = "nvml"            // per-process, as nvidia-smi
	CounterTorchPeak      MemoryCounter = "torch_max_alloc" // torch.cuda.max_memory_allocated
	CounterTorchAllocated MemoryCounter = "torch_alloc"     // torch.cuda.memory_allocated
	CounterTorchReserved  MemoryCounter = "torch_reserved"  // torch.cuda.memory_reserved
	// CounterSequence is a batching host's account of one line (its sequence's KV
	// and activation bytes), not a process counter.
	CounterSequence MemoryCounter = "sequence"
)

// Run is one measured synthesis of a calibration.
type Run struct {
	Bucket       string // length bucket: "short", "medium", "long", ...
	Characters   int
	AudioSeconds float64
	// PeakBytes is the extra peak of the run over the idle host.
	PeakBytes int64
	// FallbackBytes is what the host's memory fell back to after the run.
	FallbackBytes int64
	Counter       MemoryCounter
	Duration      time.Duration
	// KVBytes is, on a batching host, the line's KV blocks at their most (its
	// sequence.kv_bytes; PeakBytes is then its activations, sequence.activation_bytes);
	// 0 on a process host.
	KVBytes int64
}

// BucketResult summarises one length bucket.
type BucketResult struct {
	Bucket string
	Runs   int
	// MinAudioSeconds is the shortest run of the bucket: the curve point pairs it
	// with the worst peak, so that every request at least that long is predicted at
	// least that peak.
	MinAudioSeconds, MaxAudioSeconds float64
	MaxCharacters                    int
	// PeakBytes is the highest peak of the bucket, never the mean.
	PeakBytes int64
	// KVBytes is the bucket's most KV bytes of a line on a batching host (0 elsewhere):
	// a sequence of this length costs KVBytes of the host's KV pool plus PeakBytes.
	KVBytes                   int64
	MeanDuration, MaxDuration time.Duration
	// Trusted: the bucket has at least the minimum number of runs; only trusted
	// buckets make the curve.
	Trusted bool
}

// Warning is a problem found in measurements, as a catalog message.
type Warning struct {
	Key  string `json:"key"`
	Args []any  `json:"args,omitempty"`
}

// In returns the warning's text in lang. Arguments that went through JSON (numbers
// come back as float64) are converted to what the message's verbs want.
func (w Warning) In(lang i18n.Lang) string { return i18n.T(lang, w.Key, FixArgs(w.Key, w.Args)...) }

// FixArgs converts numeric arguments of the catalog message key to the types its
// verbs want (%d an integer, %f and %g a float), as they come back from JSON.
func FixArgs(key string, args []any) []any {
	m, ok := i18n.Lookup(key)
	if !ok {
		return args
	}
	verbs := verbsOf(m.EN)
	out := append([]any(nil), args...)
	for i, a := range out {
		if i >= len(verbs) {
			break
		}
		switch v := a.(type) {
		case float64:
			if verbs[i] == 'd' {
				out[i] = int64(math.Round(v))
			}
		case int:
			if verbs[i] == 'f' || verbs[i] == 'g' {
				out[i] = float64(v)
			}
		case int64:
			if verbs[i] == 'f' || verbs[i] == 'g' {
				out[i] = float64(v)
			}
		}
	}
	return out
}

// verbsOf lists the verbs of a format string in order ("%%" is no verb).
func verbsOf(format string) []byte {
	var out []byte
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0123456789.", format[j]) >= 0 {
			j++
		}
		if j < len(format) && format[j] != '%' {
			out = append(out, format[j])
		}
		i = j
	}
	return out
}

// LeakWarning reports memory after runs that keeps rising.
type LeakWarning struct {
	Bucket string // "" for the whole series
	// Runs is how many runs the rise spans; FromBytes and ToBytes its ends.
	Runs               int
	FromBytes, ToBytes int64
}

// Warning returns the leak as a catalog message.
func (l LeakWarning) Warning() Warning {
	return Warning{Key: "gpu.calibration.leak", Args: []any{l.Runs, float64(l.FromBytes) / 1e9, float64(l.ToBytes) / 1e9}}
}

// CalibrationInput is what a calibration run measured.
type CalibrationInput struct {
	// ResidentBytes is NVML's reading of one idle host after load and warm-up;
	// BorrowerBytes of one that maps the first's weights (0: not measured).
	ResidentBytes int64
	BorrowerBytes int64
	// Runs in the order they ran.
	Runs []Run
	// MinRuns per bucket for its peak to count; default 3.
	MinRuns int
	// LeakTolerance is the rise between two runs that counts as creeping; default
	// 16 MiB. LeakRuns is how many rises in a row make a leak; default 3.
	LeakTolerance int64
	LeakRuns      int
	MeasuredAt    time.Time
}

// CalibrationReport is the analysis of a CalibrationInput.
type CalibrationReport struct {
	// Calibration is the curve from the trusted buckets (uncalibrated if none).
	Calibration Calibration
	Buckets     []BucketResult
	// Leaks found per bucket and over the whole series.
	Leaks    []LeakWarning
	Warnings []Warning
}

// AnalyzeCalibration keeps the worst peak of every bucket with enough runs, builds
// the prediction curve from them, and checks the memory after each run for leaks.
func AnalyzeCalibration(in CalibrationInput) CalibrationReport {
	if in.MinRuns <= 0 {
		in.MinRuns = 3
	}
	if in.LeakTolerance <= 0 {
		in.LeakTolerance = 16 * MiB
	}
	if in.LeakRuns <= 0 {
		in.LeakRuns = 3
	}
	rep := CalibrationReport{Calibration: Calibration{ResidentBytes: in.ResidentBytes,
		BorrowerBytes: in.BorrowerBytes, MeasuredAt: in.MeasuredAt}}

	byBucket := map[string]*BucketResult{}
	var order []string
	var durations = map[string]time.Duration{}
	fallbacks := map[string][]int64{}
	var all []int64
	for _, r := range in.Runs {
		b := byBucket[r.Bucket]
		if b == nil {
			b = &BucketResult{Bucket: r.Bucket, MinAudioSeconds: r.AudioSeconds}
			byBucket[r.Bucket] = b
			order = append(order, r.Bucket)
		}
		b.Runs++
		b.MinAudioSeconds = min(b.MinAudioSeconds, r.AudioSeconds)
		b.MaxAudioSeconds = max(b.MaxAudioSeconds, r.AudioSeconds)
		b.MaxCharacters = max(b.MaxCharacters, r.Characters)
		b.PeakBytes = max(b.PeakBytes, r.PeakBytes)
		b.KVBytes = max(b.KVBytes, r.KVBytes)
		b.MaxDuration = max(b.MaxDuration, r.Duration)
		durations[r.Bucket] += r.Duration
		fallbacks[r.Bucket] = append(fallbacks[r.Bucket], r.FallbackBytes)
		all = append(all, r.FallbackBytes)
	}
	for _, name := range order {
		b := byBucket[name]
		b.MeanDuration = durations[name] / time.Duration(b.Runs)
		b.Trusted = b.Runs >= in.MinRuns
		if !b.Trusted {
			rep.Warnings = append(rep.Warnings, Warning{Key: "gpu.calibration.too_few_runs",
				Args: []any{b.Bucket, b.Runs, in.MinRuns}})
		} else {
			rep.Calibration.Points = append(rep.Calibration.Points,
				CurvePoint{AudioSeconds: b.MinAudioSeconds, PeakBytes: b.PeakBytes})
		}
		if leak, ok := DetectLeak(fallbacks[name], in.LeakTolerance, in.LeakRuns); ok {
			leak.Bucket = name
			rep.Leaks = append(rep.Leaks, leak)
		}
		rep.Buckets = append(rep.Buckets, *b)
	}
	sort.Slice(rep.Buckets, func(i, j int) bool { return rep.Buckets[i].MinAudioSeconds < rep.Buckets[j].MinAudioSeconds })
	sort.Slice(rep.Calibration.Points, func(i, j int) bool {
		return rep.Calibration.Points[i].AudioSeconds < rep.Calibration.Points[j].AudioSeconds
	})
	// Over the whole series a rise is normal when longer buckets follow shorter ones
	// and the counter includes the cache, which ratchets; memory still allocated
	// after a run must not rise whatever ran before.
	if len(order) > 1 && in.Runs[0].Counter == CounterTorchAllocated {
		if leak, ok := DetectLeak(all, in.LeakTolerance, in.LeakRuns); ok {
			rep.Leaks = append(rep.Leaks, leak)
		}
	}
	for _, l := range rep.Leaks {
		rep.Warnings = append(rep.Warnings, l.Warning())
	}
	return rep
}

// DetectLeak reports memory after runs that creeps upward: at least rises runs in a
// row each higher than the one before by more than tolerance, or, without any drop
// beyond tolerance, at least rises small rises that add up to more than
// rises × tolerance. A single jump (the cache ratcheting) is not a leak.
func DetectLeak(fallbacks []int64, tolerance int64, rises int) (LeakWarning, bool) {
	if rises < 1 {
		rises = 1
	}
	// Consecutive rises.
	bestStart, bestLen := 0, 0
	start := 0
	for i := 1; i < len(fallbacks); i++ {
		if fallbacks[i]-fallbacks[i-1] <= tolerance {
			start = i
			continue
		}
		if n := i - start; n > bestLen {
			bestStart, bestLen = start, n
		}
	}
	if bestLen >= rises {
		return LeakWarning{Runs: bestLen + 1, FromBytes: fallbacks[bestStart],
			ToBytes: fallbacks[bestStart+bestLen]}, true
	}
	// Slow creep: no real drop, and a clear climb overall.
	start = 0
	for i := 1; i <= len(fallbacks); i++ {
		if i < len(fallbacks) && fallbacks[i]-fallbacks[i-1] >= -tolerance {
			continue
		}
		// fallbacks[start:i] has no drop.
		lo, hi := start, i-1
		minAt := lo
		for j := lo; j <= hi; j++ {
			if fallbacks[j] < fallbacks[minAt] {
				minAt = j
			}
		}
		ups := 0
		for j := minAt + 1; j <= hi; j++ {
			if fallbacks[j] > fallbacks[j-1] {
				ups++
			}
		}
		// A single jump is the cache ratcheting to a longer request; creeping rises
		// run after run.
		if ups >= rises && fallbacks[hi]-fallbacks[minAt] > int64(rises)*tolerance {
			return LeakWarning{Runs: hi - minAt + 1, FromBytes: fallbacks[minAt], ToBytes: fallbacks[hi]}, true
		}
		start = i
	}
	return LeakWarning{}, false
}

// LoadStep is the result of one step of a load test: Concurrency requests at once.
type LoadStep struct {
	Concurrency                              int
	Tasks, Successes, Failures, OOMs, Killed int
	AvgLatency, P95Latency                   time.Duration
	PeakVRAMBytes                            int64
	// Throughput is work per second over the step (lines, or audio seconds per
	// second: any unit, the same for every step).
	Throughput float64
	// LatencyPerAudioSecond is the step's successful lines' latency over their audio
	// (the sum of one over the sum of the other): per-line latency independent of
	// the mix of lengths.
	LatencyPerAudioSecond float64
}

// Healthy reports whether the step had no failure of any kind.
func (s LoadStep) Healthy() bool {
	return s.Failures == 0 && s.OOMs == 0 && s.Killed == 0 && s.Successes >= s.Tasks
}

// LoadVerdict is the analysis of a load test.
type LoadVerdict struct {
	Steps []LoadStep
	// CrashAt is the concurrency of the first step with failures, OOMs or killed
	// hosts; 0 if none.
	CrashAt int
	// SlowdownAt is the concurrency of the first healthy step whose throughput gained
	// under 5% over the best step below it (more at once, no more audio); 0 if none.
	SlowdownAt int
	// Recommended is the lowest concurrency, among the healthy steps below the crash
	// point, that give at least KneeShare of the best throughput measured there; 0
	// when even one synthesis at a time fails.
	Recommended int
	// Why names what decided: "slowdown" (steps above it added no throughput),
	// "crash" (the step above it failed) or "untested_limit" (throughput was still
	// rising at the highest step tested).
	Why string
	// LatencyAt is, on a batching host (AnalyzeBatchLoadTest), the concurrency of
	// the first healthy step whose latency per audio second is more than
	// MaxLatencyGrowth times the first step's (one line at a time); 0 if none.
	LatencyAt int
}

// LoadTestSteps returns the concurrency levels to test up to limit: 1, 2, 3, 4, 6, 8, 12,
// 16, 24, 32, ... (doubling after 4, with the halfway step).
func LoadTestSteps(limit int) []int {
	var out []int
	for _, n := range []int{1, 2, 3, 4} {
		if n <= limit {
			out = append(out, n)
		}
	}
	for p := 4; ; p *= 2 {
		for _, n := range []int{p + p/2, 2 * p} {
			if n > limit {
				return out
			}
			out = append(out, n)
		}
	}
}

// MinThroughputGain defines the slowdown point, KneeShare the recommendation.
//
// The source documents recommend one step below the slowdown point for a fixed pool
// of processes, whose memory nothing watches. dubstudio's hosts run under the
// executor, which admits each line by its predicted peak, so the load test runs
// through it and the recommendation follows the throughput: the lowest concurrency that
// come within 3% of the most audio per second measured. Time per line is not a
// limit: rendering a script is batch work.
const (
	MinThroughputGain = 0.05
	KneeShare         = 0.97
)

// AnalyzeLoadTest finds the crash point and the slowdown point of a stepwise load
// test and recommends the lowest concurrency near the best throughput below the crash.
func AnalyzeLoadTest(steps []LoadStep) (LoadVerdict, error) {
	v := LoadVerdict{Steps: append([]LoadStep(nil), steps...)}
	if len(v.Steps) == 0 {
		return v, fmt.Errorf("load test without steps: %w", ErrInvalid)
	}
	sort.Slice(v.Steps, func(i, j int) bool { return v.Steps[i].Concurrency < v.Steps[j].Concurrency })
	for i, s := range v.Steps {
		if s.Concurrency < 1 || (i > 0 && s.Concurrency == v.Steps[i-1].Concurrency) {
			return v, fmt.Errorf("load test step %d: concurrency levels must be positive and distinct: %w", i, ErrInvalid)
		}
	}
	healthy := v.Steps
	for i, s := range v.Steps {
		if !s.Healthy() {
			v.CrashAt, healthy = s.Concurrency, v.Steps[:i]
			break
		}
	}
	if len(healthy) == 0 {
		v.Why = "crash"
		return v, nil
	}
	best := 0.0
	for _, s := range healthy {
		if v.SlowdownAt == 0 && best > 0 && s.Throughput < best*(1+MinThroughputGain) {
			v.SlowdownAt = s.Concurrency
		}
		best = max(best, s.Throughput)
	}
	for i, s := range healthy {
		if s.Throughput >= KneeShare*best {
			v.Recommended = s.Concurrency
			switch {
			case i < len(healthy)-1:
				v.Why = "slowdown"
			case v.CrashAt != 0:
				v.Why = "crash"
			default:
				v.Why = "untested_limit"
			}
			break
		}
	}
	return v, nil
}

// LoadTestSettled reports whether a load test can stop after steps (in order): a
// step failed, or the last two steps each gained under MinThroughputGain over the
// best before them, so that higher concurrency cannot change the recommendation.
func LoadTestSettled(steps []LoadStep) bool {
	if len(steps) == 0 {
		return false
	}
	if !steps[len(steps)-1].Healthy() {
		return true
	}
	if len(steps) < 3 {
		return false
	}
	flat := 0
	best := 0.0
	for _, s := range steps {
		if best > 0 && s.Throughput < best*(1+MinThroughputGain) {
			flat++
		} else {
			flat = 0
		}
		best = max(best, s.Throughput)
	}
	return flat >= 2
}

// CalibrationBucket is one text length a calibration measures.
type CalibrationBucket struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Text    string  `json:"text"`
}

// CalibrationFailure is one failed line of a calibration's load test.
type CalibrationFailure struct {
	Concurrency int    `json:"concurrency"`
	Bucket      string `json:"bucket"`
	Kind        string `json:"kind"` // "oom", "killed", "failed", "start"
	Error       string `json:"error"`
}

// CalibrationResult is everything a calibration (gpu/calibrate) measured and
// concluded. It is stored as JSON: fleet owns its one decoder (fleet.DecodeCalibration).
type CalibrationResult struct {
	GPU          Device    `json:"gpu"`
	Profile      Profile   `json:"profile"`
	Engine       string    `json:"engine"`
	Model        string    `json:"model"`
	ModelVersion string    `json:"model_version"`
	StartedAt    time.Time `json:"started_at"`
	FinishedAt   time.Time `json:"finished_at"`
	// BaselineUsedBytes is the card's used memory before the first host started
	// (memory of processes that are not ours); 0 if unknown.
	BaselineUsedBytes int64 `json:"baseline_used_bytes"`
	// LoadedAllocatedBytes is the allocator's figure right after load
	// (torch.cuda.memory_allocated, as the host reports it).
	LoadedAllocatedBytes int64 `json:"loaded_allocated_bytes"`
	// LoadedBytes is the process after load, before any request; ResidentBytes after
	// a warm-up request and a cache release: the calibration's resident memory.
	LoadedBytes   int64         `json:"loaded_bytes"`
	ResidentBytes int64         `json:"resident_bytes"`
	MemoryCounter MemoryCounter `json:"memory_counter"`
	// BorrowerBytes is a host that maps the first's weights (Profile.ShareWeights),
	// after a warm-up line and a cache release; 0 without shared weights.
	BorrowerBytes int64 `json:"borrower_bytes,omitempty"`
	// PeakCounter is where run peaks come from (the allocator's peak over the
	// request, minus the model).
	PeakCounter MemoryCounter       `json:"peak_counter"`
	Buckets     []CalibrationBucket `json:"bucket_texts"`
	Runs        []Run               `json:"runs"`
	Analysis    []BucketResult      `json:"buckets"`
	Calibration Calibration         `json:"calibration"`
	Warnings    []Warning           `json:"warnings,omitempty"`
	Leaks       []LeakWarning       `json:"leaks,omitempty"`
	// DoesNotFit is set when the profile cannot run one synthesis with the measured
	// numbers (CheckFits); the load test is then skipped.
	DoesNotFit          *Warning             `json:"does_not_fit,omitempty"`
	ConcurrencyThatFits int                  `json:"concurrency_that_fits"`
	Verdict             LoadVerdict          `json:"verdict"`
	Failures            []CalibrationFailure `json:"failures,omitempty"`
	// Recommended is the concurrency to use (0: none works); RecommendedProfile the
	// profile with it.
	Recommended        int     `json:"recommended"`
	RecommendedProfile Profile `json:"recommended_profile"`
	// Batch is set for a batching profile: the host's batch figures (the load test's
	// steps are then lines at once on one host, and Recommended its maximum
	// sequences).
	Batch *BatchCalibration `json:"batch,omitempty"`
}

// MaxLatencyGrowth defines a batching host's latency point: the concurrency at which
// a line takes more than this many times as long per audio second as it does alone
// (issue 15's bound on lines at full load).
const MaxLatencyGrowth = 3.0

// BatchLoadTestSteps returns the concurrency levels a batching host is tested at up
// to limit: 1, 2, 4, 8, ... doubling, and limit itself last.
func BatchLoadTestSteps(limit int) []int {
	var out []int
	for n := 1; n <= limit; n *= 2 {
		out = append(out, n)
	}
	if limit >= 1 && out[len(out)-1] != limit {
		out = append(out, limit)
	}
	return out
}

// BatchLoadTestSettled reports whether a batching host's load test can stop after
// steps (in order): a step failed, or the last step gained under MinThroughputGain
// over the best before it. Steps double, so one flat step is where the batch stops
// paying.
func BatchLoadTestSettled(steps []LoadStep) bool {
	if len(steps) == 0 {
		return false
	}
	last := steps[len(steps)-1]
	if !last.Healthy() {
		return true
	}
	best := 0.0
	for _, s := range steps[:len(steps)-1] {
		best = max(best, s.Throughput)
	}
	return best > 0 && last.Throughput < best*(1+MinThroughputGain)
}

// AnalyzeBatchLoadTest analyses a batching host's load test (BatchLoadTestSteps) as
// AnalyzeLoadTest does a pool of processes (crash point, slowdown point, and the
// recommended concurrency, here the host's maximum sequences), and adds the latency
// point (LatencyAt). The latency point is reported, not obeyed: under the executor a
// line beyond the host's sequences waits in the queue, so fewer sequences would make
// a script's lines wait longer, not shorter (on one H200 the latency point was 8
// lines, where the host rendered 20.7 audio s/s against 24.0 at 32).
func AnalyzeBatchLoadTest(steps []LoadStep) (LoadVerdict, error) {
	v, err := AnalyzeLoadTest(steps)
	if err != nil || v.Recommended == 0 {
		return v, err
	}
	alone := v.Steps[0].LatencyPerAudioSecond
	for _, s := range v.Steps[1:] {
		if !s.Healthy() {
			break
		}
		if alone > 0 && s.LatencyPerAudioSecond > MaxLatencyGrowth*alone {
			v.LatencyAt = s.Concurrency
			break
		}
	}
	return v, nil
}

// BatchCalibration is what the calibration of a batching host (Profile.Batching)
// measured beyond a process host's figures: what the host reports of its batch
// (GET /health, protocol 2) and how many lines of the load test's mix fit at once.
type BatchCalibration struct {
	// HostResidentBytes is what the host reports it holds after load: its weights
	// and its preallocated KV pool (KVCacheBytes). The calibration's resident memory
	// (Calibration.ResidentBytes) is the process's memory less the pool, so that
	// BatchResident adds the profile's pool to it.
	HostResidentBytes int64 `json:"host_resident_bytes"`
	KVCacheBytes      int64 `json:"kv_cache_bytes"`
	KVBytesPerToken   int64 `json:"kv_bytes_per_token"`
	// Beams are the rows a line decodes with; MaxSequences the most lines the host
	// was started to decode at once (the load test's ceiling).
	Beams        int `json:"beams"`
	MaxSequences int `json:"max_sequences"`
	PrefixTokens int `json:"prefix_tokens"`
	// TokensPerAudioSecond is mel tokens per audio second.
	TokensPerAudioSecond float64 `json:"tokens_per_audio_second"`
	// ActivationBytesPerSecond is the host's own prediction of a line's activations
	// per audio second; the measured ones are the buckets' PeakBytes.
	ActivationBytesPerSecond float64 `json:"activation_bytes_per_second"`
	// MixKVBytes and MixActivationBytes are a mean line of the load test's mix (the
	// buckets' measured worst, weighted as the mix holds them).
	MixKVBytes         int64 `json:"mix_kv_bytes"`
	MixActivationBytes int64 `json:"mix_activation_bytes"`
	// SequencesThatFit is how many such lines fit at once: in the KV pool, and with
	// their activations in the budget beside the host (at most MaxBatchSequences).
	SequencesThatFit int `json:"sequences_that_fit"`
	// Limit is the load test's highest step: SequencesThatFit, MaxSequences or the
	// calibration's own bound, whichever is least.
	Limit int `json:"limit"`
}

// BatchSequencesThatFit returns how many lines of kv and activation bytes each fit
// at once in a KV pool of pool bytes and beside a host of resident bytes in budget
// (at most MaxBatchSequences; 0 if not one).
func BatchSequencesThatFit(pool, kv, activation, budget, resident int64) int {
	n := MaxBatchSequences
	if kv > 0 {
		n = min(n, int(pool/kv))
	}
	if activation > 0 {
		n = min(n, int(max(budget-resident, 0)/activation))
	}
	return max(n, 0)
}
