// Package calibrate measures how much concurrent synthesis one GPU can take with one
// concurrency profile, following the memory-first method of docs/gpu.md:
//
//  1. memory after load: one model host is started, warmed up, and its memory read
//     after load and after releasing its cache; with shared weights, a second host
//     that borrows the first's weights is measured the same way;
//  2. peaks per length bucket (short, medium, long, longest allowed): at least three
//     runs each with the same speaker and seed, keeping the highest peak, never the
//     mean;
//  3. the fall-back after each run, with a leak warning when it creeps upward;
//  4. a stepwise load test (concurrency 1, 2, 3, 4, 6, ...) with enough lines per step,
//     recording successes, failures, out-of-memory errors, killed hosts, average and
//     p95 latency, peak VRAM and throughput: through the executor (Config.Admission,
//     as the worker renders), or with the calibration's own hosts unmanaged.
//
// The analysis (worst peaks, leaks, crash and slowdown points, the recommendation of
// the lowest concurrency near the best throughput) is package gpu's (AnalyzeCalibration,
// AnalyzeLoadTest);
// this package drives the runs through the same interfaces the worker uses, so that
// it runs against real model hosts (gpu/ttshost.Launcher) on a GPU and against the
// simulator (gpu/ttshost.SimLauncher) in tests.
package calibrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"dubstudio/gpu"
	"dubstudio/gpu/ttshost"
	"dubstudio/i18n"
	"dubstudio/tts"
)

// Launcher starts the i-th host (0-based) on the GPU with the profile's settings.
type Launcher func(ctx context.Context, i int) (ttshost.EngineHost, error)

// DeviceMemory reads the whole card (NVML's used memory). A DeviceMemory that also
// has ResetPeak() and PeakUsed() int64 (a simulated device) gives exact load-test
// peaks; otherwise the runner polls Used.
type DeviceMemory interface {
	Used() (int64, bool)
}

type peakTracker interface {
	ResetPeak()
	PeakUsed() int64
}

// Config configures Run.
type Config struct {
	GPU     gpu.Device
	Profile gpu.Profile
	Launch  Launcher
	// Device reads the card's used memory; nil: peaks of load-test steps are the
	// sum of the hosts' readings after the step.
	Device DeviceMemory
	// Buckets to measure; default DefaultBuckets(Profile).
	Buckets []gpu.CalibrationBucket
	// Runs per bucket; default and minimum 3.
	Runs int
	// LinesPerStep is how many lines each load-test step renders at least (always at
	// least two per synthesis at once unmanaged, three through Admission, rounded up to whole
	// rounds of the buckets or of their mix); default 8.
	LinesPerStep int
	// MaxConcurrency bounds the load test; 0: the concurrency the budget fits with the measured
	// curve, at most 32 (gpu.HostsThatFit with Admission, else gpu.ConcurrencyThatFits).
	MaxConcurrency int
	// Reference is the speaker's reference recording; empty: an 8 s synthetic one in
	// WorkDir.
	Reference string
	// WorkDir receives the audio (deleted as it goes); empty: a temporary directory.
	WorkDir string
	// Progress is told what the run is doing, as a catalog message.
	Progress func(key string, args ...any)
	// NoWarmUp skips warming new hosts up (one line of each bucket, untimed) before
	// a load-test step.
	NoWarmUp bool
	// Admission, when set, runs the load test the way the worker renders: through
	// the VRAM-budgeted executor with the measured calibration (the calibration's
	// own hosts are stopped first). Without it the calibration's hosts take the
	// lines unmanaged, one each, as in the source documents' method.
	Admission Admission
	// PollInterval is how often Device is read during a load-test step; default
	// 100 ms.
	PollInterval time.Duration
	Logger       *slog.Logger
	// Now is the clock latencies are measured with; default time.Now.
	Now func() time.Time
}

// Admission runs load-test lines through the executor (fleet.CalibrationHosts).
type Admission interface {
	// Prepare readies the seats of profile p (p.Concurrency of them) admitted by cal:
	// the hosts started and serving.
	Prepare(ctx context.Context, p gpu.Profile, cal gpu.Calibration) error
	// Synthesize waits for a seat for a line of audioSeconds and runs req there.
	Synthesize(ctx context.Context, req tts.Request, audioSeconds float64) (tts.Result, error)
}

// maxFailures bounds the failures a result keeps.
const maxFailures = 50

// DefaultBuckets returns short (2 s), medium (6 s), long (12 s) and longest
// (the profile's MaxGenSeconds) lines, leaving out those not shorter than the
// longest.
func DefaultBuckets(p gpu.Profile) []gpu.CalibrationBucket {
	longest := p.MaxGenSeconds
	var out []gpu.CalibrationBucket
	for i, s := range []float64{2, 6, 12} {
		if s < longest*0.9 {
			out = append(out, gpu.CalibrationBucket{Name: []string{"short", "medium", "long"}[i], Seconds: s})
		}
	}
	out = append(out, gpu.CalibrationBucket{Name: "longest", Seconds: longest})
	for i := range out {
		out[i].Text = TextOf(out[i].Seconds)
	}
	return out
}

// words for generated English lines.
var words = strings.Fields(`the studio renders every line of the script with the voice of its character and
	keeps each take within the slot of the picture so that the dub sounds natural while the
	editors listen approve and move on to the next scene before the deadline arrives tonight`)

// TextOf returns an English text whose natural reading takes about seconds (by
// tts.PredictNaturalSeconds), in sentences of ten words.
func TextOf(seconds float64) string {
	var b strings.Builder
	n := 0
	for {
		if n > 0 {
			if n%10 == 0 {
				b.WriteString(". ")
			} else {
				b.WriteByte(' ')
			}
		}
		w := words[n%len(words)]
		if n%10 == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
		n++
		if tts.PredictNaturalSeconds(b.String()+".", "en") >= seconds {
			break
		}
	}
	b.WriteByte('.')
	return b.String()
}

// runner holds the state of one calibration.
type runner struct {
	cfg   Config
	log   *slog.Logger
	res   *gpu.CalibrationResult
	ref   string
	cond  string
	work  string
	hosts []ttshost.EngineHost
	seq   int
	mu    sync.Mutex
	// admitted is the concurrency of the last admitted step (its hosts are warm).
	admitted int
}

// Run calibrates: it starts hosts through cfg.Launch (and stops them all before it
// returns), measures and analyses. A failure to start or use the first host is an
// error; failures during the load test are results.
func Run(ctx context.Context, cfg Config) (*gpu.CalibrationResult, error) {
	if cfg.Launch == nil {
		return nil, fmt.Errorf("calibration needs a launcher: %w", gpu.ErrInvalid)
	}
	if err := cfg.Profile.Validate(); err != nil {
		return nil, err
	}
	if cfg.Runs < 3 {
		cfg.Runs = 3
	}
	if cfg.LinesPerStep <= 0 {
		cfg.LinesPerStep = 8
	}
	if len(cfg.Buckets) == 0 {
		cfg.Buckets = DefaultBuckets(cfg.Profile)
	}
	for i := range cfg.Buckets {
		if cfg.Buckets[i].Text == "" {
			cfg.Buckets[i].Text = TextOf(cfg.Buckets[i].Seconds)
		}
		if cfg.Buckets[i].Seconds > cfg.Profile.MaxGenSeconds {
			return nil, fmt.Errorf("bucket %s (%.0f s) is longer than the profile allows: %w",
				cfg.Buckets[i].Name, cfg.Buckets[i].Seconds, gpu.ErrInvalid)
		}
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	r := &runner{cfg: cfg, log: cfg.Logger, res: &gpu.CalibrationResult{GPU: cfg.GPU, Profile: cfg.Profile, Buckets: cfg.Buckets,
		StartedAt: time.Now()}}
	work := cfg.WorkDir
	if work == "" {
		dir, err := os.MkdirTemp("", "dubstudio-calibrate-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		work = dir
	}
	r.work = work
	defer r.stopAll()
	if err := r.run(ctx); err != nil {
		return r.res, err
	}
	r.res.FinishedAt = time.Now()
	return r.res, nil
}

func (r *runner) run(ctx context.Context) error {
	r.ref = r.cfg.Reference
	if r.ref == "" {
		r.ref = filepath.Join(r.work, "reference.wav")
		if err := WriteVoice(r.ref, 140); err != nil {
			return err
		}
	}
	if r.cfg.Device != nil {
		if used, ok := r.cfg.Device.Used(); ok {
			r.res.BaselineUsedBytes = used
		}
	}
	if r.cfg.Profile.Batching {
		return r.runBatching(ctx)
	}

	// (1) Memory after load, then after a warm-up request and a cache release.
	r.cfg.Progress("gpu.calibration.progress.load")
	h, err := r.launch(ctx)
	if err != nil {
		return fmt.Errorf("starting the first model host: %w", err)
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
	if r.cfg.Profile.ShareWeights {
		// The second host borrows the first's weights; it stays for the load test.
		r.cfg.Progress("gpu.calibration.progress.borrower")
		b, err := r.launch(ctx)
		if err == nil {
			r.res.BorrowerBytes, err = r.settled(ctx, b)
		}
		if err != nil {
			return fmt.Errorf("a host borrowing the weights: %w", err)
		}
	}

	// (2) and (3): peaks per bucket, fall-back after each run.
	for _, b := range r.cfg.Buckets {
		for i := range r.cfg.Runs {
			r.cfg.Progress("gpu.calibration.progress.bucket", b.Name, b.Seconds, i+1, r.cfg.Runs)
			run, err := r.measure(ctx, h, b)
			if err != nil {
				return fmt.Errorf("bucket %s, run %d: %w", b.Name, i+1, err)
			}
			r.res.Runs = append(r.res.Runs, run)
		}
	}
	rep := gpu.AnalyzeCalibration(gpu.CalibrationInput{ResidentBytes: r.res.ResidentBytes,
		BorrowerBytes: r.res.BorrowerBytes, Runs: r.res.Runs, MinRuns: r.cfg.Runs, MeasuredAt: time.Now()})
	r.res.Analysis, r.res.Calibration, r.res.Leaks, r.res.Warnings = rep.Buckets, rep.Calibration, rep.Leaks, rep.Warnings

	// The budget with what was measured.
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
	r.res.ConcurrencyThatFits = gpu.ConcurrencyThatFits(r.cfg.Profile, rep.Calibration, total, foreign)

	// (4) The stepwise load test.
	limit := r.cfg.MaxConcurrency
	if limit <= 0 {
		fit := r.res.ConcurrencyThatFits
		if r.cfg.Admission != nil {
			// The executor frees caches and keeps long lines apart: hosts fit by
			// their models, beside one longest line.
			fit = gpu.HostsThatFit(r.cfg.Profile, rep.Calibration, total, foreign)
		}
		limit = min(max(fit, 1), 32)
	}
	var steps []gpu.LoadStep
	if r.cfg.Admission != nil {
		r.stopAll() // the executor's hosts take over
	}
	for _, n := range gpu.LoadTestSteps(limit) {
		r.cfg.Progress("gpu.calibration.progress.step", n)
		var step gpu.LoadStep
		var err error
		if r.cfg.Admission != nil {
			step, err = r.admittedStep(ctx, r.stepProfile(n, rep.Calibration, total, foreign), rep.Calibration)
		} else {
			step, err = r.loadStep(ctx, n)
		}
		if err != nil {
			return err
		}
		steps = append(steps, step)
		if gpu.LoadTestSettled(steps) {
			break // a crash, or throughput that stopped growing: more cannot change the answer
		}
	}
	v, err := gpu.AnalyzeLoadTest(steps)
	if err != nil {
		return err
	}
	r.res.Verdict = v
	r.res.Recommended = v.Recommended
	p := r.cfg.Profile
	switch {
	case v.Recommended > 0 && r.cfg.Admission != nil:
		p = r.stepProfile(v.Recommended, rep.Calibration, total, foreign)
	case v.Recommended > 0:
		p.Concurrency = v.Recommended
		p.LongLaneLimit = min(p.LongLaneLimit, p.Concurrency)
	}
	r.res.RecommendedProfile = p
	return nil
}

// settled prepares the speaker on h, runs a warm-up line, releases h's cache and
// returns the memory h holds then: a host's resident memory.
func (r *runner) settled(ctx context.Context, h ttshost.EngineHost) (int64, error) {
	if err := r.prepare(ctx, h); err != nil {
		return 0, err
	}
	if _, err := r.synthesize(ctx, h, r.cfg.Buckets[0]); err != nil {
		return 0, fmt.Errorf("warm-up request: %w", err)
	}
	if _, err := h.ReleaseCache(ctx); err != nil && !errors.Is(err, gpu.ErrNotSupported) {
		return 0, fmt.Errorf("releasing the model host's cache: %w", err)
	}
	b, _, err := h.Memory(ctx)
	return b, err
}

// stepProfile is the profile with concurrency n and a long lane as wide as memory allows:
// under the executor, long lines need holding back only where they would not fit.
func (r *runner) stepProfile(n int, cal gpu.Calibration, total, foreign int64) gpu.Profile {
	p := r.cfg.Profile
	p.Concurrency = n
	p.LongLaneLimit = gpu.LongLinesThatFit(p, cal, n, total, foreign)
	return p
}

func (r *runner) launch(ctx context.Context) (ttshost.EngineHost, error) {
	r.mu.Lock()
	i := len(r.hosts)
	r.mu.Unlock()
	h, err := r.cfg.Launch(ctx, i)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.hosts = append(r.hosts, h)
	r.mu.Unlock()
	return h, nil
}

func (r *runner) stopAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.mu.Lock()
	hosts := r.hosts
	r.hosts = nil
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.Stop(ctx)
		}()
	}
	wg.Wait()
}

// prepare computes the speaker's conditioning on h (its cache file is shared by
// the hosts that follow).
func (r *runner) prepare(ctx context.Context, h ttshost.EngineHost) error {
	res, err := h.Engine().PrepareSpeaker(ctx, tts.PrepareRequest{ReferenceAudioPath: r.ref,
		CacheDir: filepath.Join(r.work, "conditioning")})
	if err != nil {
		return fmt.Errorf("preparing the speaker: %w", err)
	}
	r.mu.Lock()
	r.cond = res.CachePath
	r.mu.Unlock()
	return nil
}

func (r *runner) synthesize(ctx context.Context, h ttshost.EngineHost, b gpu.CalibrationBucket) (tts.Result, error) {
	req := r.request(b)
	defer os.Remove(req.OutputPath)
	return h.Engine().Synthesize(ctx, req)
}

// request is a line of bucket b, with an output file of its own.
func (r *runner) request(b gpu.CalibrationBucket) tts.Request {
	r.mu.Lock()
	r.seq++
	out := filepath.Join(r.work, fmt.Sprintf("line-%d.wav", r.seq))
	cond := r.cond
	r.mu.Unlock()
	return tts.Request{Text: b.Text, Language: "en", TargetSeconds: b.Seconds,
		MaxTextTokensPerSegment: r.cfg.Profile.SegmentTokens, Seed: 42, OutputPath: out,
		Speaker: tts.Speaker{ReferenceAudioPath: r.ref, ConditioningPath: cond}}
}

// measure runs one line of bucket b on h: its peak over the model, its time, and
// what the host's memory falls back to afterwards.
func (r *runner) measure(ctx context.Context, h ttshost.EngineHost, b gpu.CalibrationBucket) (gpu.Run, error) {
	before, _, err := h.Memory(ctx)
	if err != nil {
		return gpu.Run{}, err
	}
	start := r.cfg.Now()
	res, err := r.synthesize(ctx, h, b)
	elapsed := r.cfg.Now().Sub(start)
	if err != nil {
		return gpu.Run{}, err
	}
	after, counter, err := h.Memory(ctx)
	if err != nil {
		return gpu.Run{}, err
	}
	run := gpu.Run{Bucket: b.Name, Characters: len([]rune(b.Text)), AudioSeconds: res.AudioSeconds,
		FallbackBytes: after, Counter: counter, Duration: elapsed}
	if res.PeakAllocatedBytes > 0 && r.res.LoadedAllocatedBytes > 0 {
		run.PeakBytes = max(res.PeakAllocatedBytes-r.res.LoadedAllocatedBytes, 0)
		r.res.PeakCounter = gpu.CounterTorchPeak
	} else {
		// No allocator figures: the growth of the process is a lower bound.
		run.PeakBytes = max(after-min(before, r.res.ResidentBytes), 0)
		r.res.PeakCounter = counter
	}
	return run, nil
}

// task is one line of a load-test step.
type task struct{ b gpu.CalibrationBucket }

type outcome struct {
	b       gpu.CalibrationBucket
	err     error
	killed  bool
	latency time.Duration
	audio   float64
}

// loadStep runs one step with n hosts from a bounded queue: n workers, each bound
// to a host, take the step's lines until none is left.
func (r *runner) loadStep(ctx context.Context, n int) (gpu.LoadStep, error) {
	step := gpu.LoadStep{Concurrency: n}
	rounds := int(math.Ceil(float64(max(r.cfg.LinesPerStep, 2*n)) / float64(len(r.cfg.Buckets))))
	step.Tasks = rounds * len(r.cfg.Buckets)
	first := len(r.hosts)
	for len(r.hosts) < n {
		h, err := r.launch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return step, ctx.Err()
			}
			// A host that cannot even load is this step's crash.
			kind := "start"
			if errors.Is(err, tts.ErrOutOfMemory) {
				step.OOMs++
				kind = "oom"
			} else {
				step.Failures++
			}
			r.fail(gpu.CalibrationFailure{Concurrency: n, Kind: kind, Error: err.Error()})
			return step, nil
		}
		if err := r.prepare(ctx, h); err != nil {
			step.Failures++
			r.fail(gpu.CalibrationFailure{Concurrency: n, Kind: "start", Error: err.Error()})
			return step, nil //nolint:nilerr // the failure is the step's result, recorded above
		}
	}
	if !r.cfg.NoWarmUp && first < n {
		// The first request of each length on a new host is several times slower
		// (the allocator grows, kernels are picked): warm the new hosts up, together,
		// before the step is timed. Failures here are the step's.
		r.cfg.Progress("gpu.calibration.progress.warmup", n-first)
		var wg sync.WaitGroup
		outs := make(chan outcome, (n-first)*len(r.cfg.Buckets))
		for i := first; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := r.host(i)
				for _, b := range r.cfg.Buckets {
					_, err := r.synthesize(ctx, h, b)
					if err == nil {
						continue
					}
					o := outcome{b: b, err: err}
					if errors.Is(err, tts.ErrUnavailable) && exited(h) {
						o.killed = true
						// Replaced for the next step; a host that fails to start
						// shows there as that step's failure.
						_, _ = r.replace(ctx, i)
					}
					outs <- o
					return
				}
			}()
		}
		wg.Wait()
		close(outs)
		for o := range outs {
			r.count(&step, n, o)
		}
		if ctx.Err() != nil {
			return step, ctx.Err()
		}
		if step.Failures+step.OOMs+step.Killed > 0 {
			return step, nil
		}
	}
	queue := r.tasks(rounds)
	hosts := make([]ttshost.EngineHost, n)
	for i := range n {
		hosts[i] = r.host(i)
	}
	return r.timedStep(ctx, step, queue, func(ctx context.Context, i int, b gpu.CalibrationBucket) outcome {
		h := hosts[i]
		if h == nil {
			return outcome{b: b, err: errors.New("the killed model host could not be restarted")}
		}
		t0 := r.cfg.Now()
		res, err := r.synthesize(ctx, h, b)
		o := outcome{b: b, err: err, latency: r.cfg.Now().Sub(t0), audio: res.AudioSeconds}
		if errors.Is(err, tts.ErrUnavailable) && exited(h) {
			o.killed = true
			// The OS killed it: the rest of its lines wait for a new host.
			if nh, lerr := r.replace(ctx, i); lerr == nil {
				hosts[i] = nh
			} else {
				hosts[i] = nil
			}
		}
		return o
	}, func() int64 {
		var sum int64
		for i := range n {
			if h := r.host(i); h != nil {
				if b, _, err := h.Memory(ctx); err == nil {
					sum += b
				}
			}
		}
		return sum
	})
}

// admittedStep is a load-test step through cfg.Admission: p.Concurrency seats
// admitted by the measured calibration, as many lines at once as seats, in the mix
// of a script (mostly short lines, few long ones; see mix), at least three a seat.
func (r *runner) admittedStep(ctx context.Context, p gpu.Profile, cal gpu.Calibration) (gpu.LoadStep, error) {
	n := p.Concurrency
	step := gpu.LoadStep{Concurrency: n}
	round := r.mix()
	rounds := int(math.Ceil(float64(max(r.cfg.LinesPerStep, 3*n)) / float64(len(round))))
	step.Tasks = rounds * len(round)
	if err := r.cfg.Admission.Prepare(ctx, p, cal); err != nil {
		if ctx.Err() != nil {
			return step, ctx.Err()
		}
		o := outcome{b: gpu.CalibrationBucket{Name: "start"}, err: err}
		r.count(&step, n, o)
		return step, nil
	}
	defer func() { r.admitted = n }()
	run := func(ctx context.Context, _ int, b gpu.CalibrationBucket) outcome {
		req := r.request(b)
		defer os.Remove(req.OutputPath)
		t0 := r.cfg.Now()
		res, err := r.cfg.Admission.Synthesize(ctx, req, b.Seconds)
		// A host lost under a line is restarted by its pool; the line counts as killed.
		return outcome{b: b, err: err, latency: r.cfg.Now().Sub(t0), audio: res.AudioSeconds,
			killed: errors.Is(err, tts.ErrUnavailable)}
	}
	if added := n - r.admitted; !r.cfg.NoWarmUp && added > 0 {
		// One line of each bucket per new host, untimed: new hosts are slow at first.
		r.cfg.Progress("gpu.calibration.progress.warmup", added)
		warm := r.tasks(added)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var bad []outcome
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for t := range warm {
					if o := run(ctx, i, t.b); o.err != nil {
						mu.Lock()
						bad = append(bad, o)
						mu.Unlock()
					}
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
	for range rounds {
		for _, b := range round {
			queue <- task{b}
		}
	}
	close(queue)
	return r.timedStep(ctx, step, queue, run, nil)
}

// mix is one round of a load test through the executor: the buckets from the
// shortest to the longest, the k-th shortest of n buckets n-k+1 times (2, 6, 12
// and 30 s: four, three, two and one lines), since a script holds many more short
// lines than long ones. An equal share of the longest lines would time mostly the
// long lane.
func (r *runner) mix() []gpu.CalibrationBucket {
	bs := slices.Clone(r.cfg.Buckets)
	slices.SortStableFunc(bs, func(a, b gpu.CalibrationBucket) int { return cmp.Compare(a.Seconds, b.Seconds) })
	var out []gpu.CalibrationBucket
	for i, b := range bs {
		for range len(bs) - i {
			out = append(out, b)
		}
	}
	return out
}

// tasks queues rounds lines of every bucket.
func (r *runner) tasks(rounds int) <-chan task {
	q := make(chan task, rounds*len(r.cfg.Buckets))
	for range rounds {
		for _, b := range r.cfg.Buckets {
			q <- task{b}
		}
	}
	close(q)
	return q
}

// timedStep runs the queued lines with step.Concurrency workers, each calling run, and
// measures the step: successes and failures, latency, throughput and the card's
// peak (from cfg.Device, else hostsMemory after the step).
func (r *runner) timedStep(ctx context.Context, step gpu.LoadStep, queue <-chan task,
	run func(ctx context.Context, worker int, b gpu.CalibrationBucket) outcome, hostsMemory func() int64) (gpu.LoadStep, error) {
	n := step.Concurrency
	var peak int64
	pt, exact := r.cfg.Device.(peakTracker)
	stopPoll := make(chan struct{})
	var pollWG sync.WaitGroup
	if exact {
		pt.ResetPeak()
	} else if r.cfg.Device != nil {
		pollWG.Add(1)
		go func() {
			defer pollWG.Done()
			t := time.NewTicker(r.cfg.PollInterval)
			defer t.Stop()
			for {
				if used, ok := r.cfg.Device.Used(); ok {
					r.mu.Lock()
					peak = max(peak, used)
					r.mu.Unlock()
				}
				select {
				case <-stopPoll:
					return
				case <-t.C:
				}
			}
		}()
	}

	results := make(chan outcome, step.Tasks)
	start := r.cfg.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range queue {
				results <- run(ctx, i, t.b)
			}
		}()
	}
	wg.Wait()
	wall := r.cfg.Now().Sub(start)
	close(stopPoll)
	pollWG.Wait()
	close(results)
	if ctx.Err() != nil {
		return step, ctx.Err()
	}

	var lat []time.Duration
	var audio float64
	for o := range results {
		if o.err == nil {
			step.Successes++
			lat = append(lat, o.latency)
			audio += o.audio
			continue
		}
		r.count(&step, n, o)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		var sum time.Duration
		for _, l := range lat {
			sum += l
		}
		step.AvgLatency = sum / time.Duration(len(lat))
		step.P95Latency = lat[int(math.Ceil(0.95*float64(len(lat))))-1]
		if audio > 0 {
			step.LatencyPerAudioSecond = sum.Seconds() / audio
		}
	}
	if wall > 0 {
		step.Throughput = audio / wall.Seconds()
	}
	switch {
	case exact:
		step.PeakVRAMBytes = pt.PeakUsed()
	case r.cfg.Device != nil:
		step.PeakVRAMBytes = peak
	case hostsMemory != nil:
		step.PeakVRAMBytes = hostsMemory()
	}
	r.log.InfoContext(ctx, "load test step", "concurrency", n, "tasks", step.Tasks, "ok", step.Successes,
		"failures", step.Failures, "ooms", step.OOMs, "killed", step.Killed, "avg", step.AvgLatency,
		"p95", step.P95Latency, "peak_bytes", step.PeakVRAMBytes, "throughput", step.Throughput)
	return step, nil
}

// count records a failed line in step.
func (r *runner) count(step *gpu.LoadStep, n int, o outcome) {
	switch {
	case o.killed:
		step.Killed++
		r.fail(gpu.CalibrationFailure{Concurrency: n, Bucket: o.b.Name, Kind: "killed", Error: o.err.Error()})
	case errors.Is(o.err, tts.ErrOutOfMemory):
		step.OOMs++
		r.fail(gpu.CalibrationFailure{Concurrency: n, Bucket: o.b.Name, Kind: "oom", Error: o.err.Error()})
	default:
		step.Failures++
		r.fail(gpu.CalibrationFailure{Concurrency: n, Bucket: o.b.Name, Kind: "failed", Error: o.err.Error()})
	}
}

func (r *runner) host(i int) ttshost.EngineHost {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < len(r.hosts) {
		return r.hosts[i]
	}
	return nil
}

// replace starts a new i-th host after the old one died.
func (r *runner) replace(ctx context.Context, i int) (ttshost.EngineHost, error) {
	h, err := r.cfg.Launch(ctx, i)
	if err != nil {
		return nil, err
	}
	if err := r.prepare(ctx, h); err != nil {
		_ = h.Stop(ctx)
		return nil, err
	}
	r.mu.Lock()
	old := r.hosts[i]
	r.hosts[i] = h
	r.mu.Unlock()
	_ = old.Stop(ctx)
	return h, nil
}

func (r *runner) fail(f gpu.CalibrationFailure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.res.Failures) < maxFailures {
		r.res.Failures = append(r.res.Failures, f)
	}
}

// exited reports whether h's process has exited, giving it a moment: the request
// fails as the connection drops, a little before the process is reaped.
func exited(h ttshost.EngineHost) bool {
	select {
	case <-h.Exited():
		return true
	case <-time.After(2 * time.Second):
		return false
	}
}

// WriteVoice writes an 8 s, 16 kHz synthetic voice-like recording: a buzz at pitch
// f0 (Hz) with its octave, pulsing three times a second. Calibrations use 140 Hz;
// different pitches give different speakers.
func WriteVoice(path string, f0 float64) error {
	const rate = 16000
	s := make([]int16, 8*rate)
	for i := range s {
		t := float64(i) / rate
		env := 0.5 + 0.5*math.Sin(2*math.Pi*3*t)
		s[i] = int16(6000 * env * (math.Sin(2*math.Pi*f0*t) + 0.4*math.Sin(2*math.Pi*2*f0*t)))
	}
	return tts.WriteWAV(path, rate, s)
}
