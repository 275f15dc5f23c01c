package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"dubstudio/config"
	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/i18n"
	"dubstudio/internal/simdev"
	"dubstudio/studio"
	"dubstudio/tts"
)

const calibrateUsage = `Usage: dubstudio calibrate [flags]

Measures one GPU for a concurrency profile: memory after load, the worst peak of
several runs per line length, the fall-back after each run (leaks), and a stepwise
load test (concurrency 1, 2, 3, 4, 6, ...) through the executor with the measured
numbers, until a step fails or two steps add no throughput; names the crash and
slowdown points and recommends the lowest concurrency within 3% of the best throughput
below the crash. With -batching (the bench engine) one batching host is measured
instead: its memory and KV pool, each length's KV and activation bytes, and lines at
once 1, 2, 4, ... up to -concurrency (its maximum sequences) or the lines its pool
holds, until a step gains under 5%; it names the latency point (a line over 3 times
as slow per audio second as alone) and recommends the maximum sequences as it does
processes, by throughput: under the executor the lines past a host's sequences wait in
the queue, so fewer sequences would not make them wait less. The GPU should be idle: stop the worker that
owns it, or calibrate from the admin GPU page, which pauses the GPU's work.

Flags:
`

// calibrateCmd runs `dubstudio calibrate`.
func calibrateCmd(ctx context.Context, cfg *config.Config, logger *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), calibrateUsage); fs.PrintDefaults() }
	def := gpu.DefaultProfile()
	var (
		gpuSel         = fs.String("gpu", "", "GPU index or UUID (default: the first)")
		engine         = fs.String("engine", "", "indextts, bench or simulator (default: ENGINE when it is one of them, else indextts when INDEXTTS_MODEL_DIR is set, else bench)")
		profName       = fs.String("profile", "", "calibrate a stored profile by name (needs the database); the flags below are ignored then")
		concur         = fs.Int("concurrency", def.Concurrency, "profile: most syntheses at once")
		reserve        = fs.Float64("reserve", def.ReservePct, "profile: percent of the card's memory never budgeted (0-90)")
		threshold      = fs.Float64("long-threshold", def.LongTextThresholdSec, "profile: seconds from which a line takes the long lane")
		lane           = fs.Int("lane", def.LongLaneLimit, "profile: long-lane requests at once")
		maxGen         = fs.Float64("max-gen", def.MaxGenSeconds, "profile: longest line in seconds")
		segment        = fs.Int("segment", def.SegmentTokens, "profile: text tokens per segment")
		fp16           = fs.Bool("fp16", def.FP16, "profile: half-precision GPT")
		emoText        = fs.Bool("emotion-text", def.EmotionTextModel, "profile: load the Qwen emotion-from-text model")
		share          = fs.Bool("share-weights", def.ShareWeights, "profile: the GPU's hosts share one copy of the weights (bench engine)")
		batching       = fs.Bool("batching", false, "profile: one batching host decoding up to -concurrency lines at once (bench engine)")
		beams          = fs.Int("beams", tts.DefaultBeams, "profile: rows a line decodes with on a batching host")
		kvCache        = fs.Float64("kv-cache-gib", 0, "profile: a batching host's KV cache in GiB (0: the host's own share)")
		s2mel          = fs.String("s2mel-precision", gpu.S2melFP32, "profile: a batching host's s2mel DiT precision (fp32 or bf16)")
		runs           = fs.Int("runs", 3, "runs per length bucket (at least 3)")
		buckets        = fs.String("buckets", "", "bucket lengths in seconds, e.g. 2,6,12 (default: 2, 6, 12 and the profile's longest)")
		perStep        = fs.Int("lines-per-step", 8, "lines per load-test step (at least two per synthesis at once)")
		maxConcurrency = fs.Int("max-concurrency", 0, "highest load-test step (default: the concurrency the budget fits)")
		useDB          = fs.Bool("db", true, "store the result in the database (false: no database needed)")
		apply          = fs.Bool("apply", false, "apply the recommendation to the GPU (needs the database)")
		out            = fs.String("out", "", "write the result as JSON to this file")
		samples        = fs.String("samples-out", "", "write the NVML samples taken during the run (every second) as JSON to this file")
		timeout        = fs.Duration("timeout", 0, "give up after this long (0: never)")
	)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if *apply && !*useDB {
		return errors.New("-apply needs the database (-db=true)")
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	eng := *engine
	if eng == "" {
		switch {
		case cfg.Engine == engineIndexTTS || cfg.Engine == engineBench || cfg.Engine == engineSimulator:
			eng = cfg.Engine
		case cfg.IndexTTSModelDir != "":
			eng = engineIndexTTS
		default:
			eng = engineBench
		}
	}
	if eng != engineIndexTTS && eng != engineBench && eng != engineSimulator {
		return fmt.Errorf("-engine %q: want indextts, bench or simulator", eng)
	}
	if eng == engineIndexTTS && cfg.IndexTTSModelDir == "" {
		return errors.New("the indextts engine needs INDEXTTS_MODEL_DIR")
	}

	var store *studio.Store
	if *useDB {
		s, err := open(ctx, cfg, logger)
		if err != nil {
			return fmt.Errorf("%w (run with -db=false to calibrate without a database)", err)
		}
		defer s.Pool().Close()
		store = s
	}
	profile := gpu.Profile{Name: "calibration", Concurrency: *concur, ReservePct: *reserve, LongTextThresholdSec: *threshold,
		LongLaneLimit: *lane, MaxGenSeconds: *maxGen, SegmentTokens: *segment, FP16: *fp16, EmotionTextModel: *emoText,
		ShareWeights: *share, Batching: *batching, Beams: *beams, KVCacheGiB: *kvCache, S2melPrecision: *s2mel}
	var stored *studio.GPUProfile
	if *profName != "" {
		if store == nil {
			return errors.New("-profile needs the database")
		}
		ps, err := store.GPUProfiles(ctx)
		if err != nil {
			return err
		}
		for i := range ps {
			if ps[i].Name == *profName {
				stored = &ps[i]
			}
		}
		if stored == nil {
			return fmt.Errorf("no GPU profile is named %q", *profName)
		}
		profile = fleet.ProfileOf(*stored)
	}
	if err := profile.Validate(); err != nil {
		return err
	}
	if profile.Batching && !batches(eng) {
		return fmt.Errorf("the %s engine's hosts cannot batch: calibrate a batching profile with -engine bench", eng)
	}

	setup := openGPUs(ctx, eng, logger)
	m := setup.monitor
	defer m.Close()
	if !m.Available() {
		return fmt.Errorf("no GPU to calibrate: %w", m.Err())
	}
	devs := m.Devices()
	dev := devs[0]
	if *gpuSel != "" {
		sel := selectGPUs(devs, []string{*gpuSel})
		if len(sel) == 0 {
			return fmt.Errorf("no GPU %q (found %d)", *gpuSel, len(devs))
		}
		dev = sel[0]
	}
	for _, s := range m.SampleNow(ctx) {
		if s.UUID == dev.UUID {
			fmt.Fprintf(os.Stderr, "GPU %d %s (%s): %.1f GB of %.1f GB used, %d%%, %d°C, %.0f W, %d processes\n",
				dev.Index, dev.Name, dev.UUID, float64(s.UsedBytes)/1e9, float64(s.TotalBytes)/1e9, s.GPUPercent,
				s.TemperatureC, s.PowerWatts, len(s.Processes))
		}
	}

	// The NVML samples of the whole run, for the record.
	var rec *sampleRecorder
	if *samples != "" {
		rec = &sampleRecorder{}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); rec.run(rctx, m, dev.UUID) }()
		defer func() { stop(); <-done }()
	}

	// The monitor runs for the load test's executor (foreign memory, the hosts').
	mctx, stopMonitor := context.WithCancel(ctx)
	monitorDone := make(chan struct{})
	go func() { defer close(monitorDone); _ = m.Run(mctx) }()
	defer func() { stopMonitor(); <-monitorDone }()

	l := setup.launcher(cfg, eng, func(string) gpu.Profile { return profile }, logger)
	scfg := fleet.GPUsConfig{Engine: eng, Monitor: m, GPUs: []gpu.Device{dev}, Launcher: l,
		TokensPerSecond: tokensPerSecond(cfg, eng), Logger: logger, ShareWeights: sharesWeights(eng), Pool: hostPool(cfg)}
	if sd := setup.simulated[dev.UUID]; sd != nil {
		scfg.Memory = func(string) calibrate.DeviceMemory { return simulatedMemory{sd} }
	}
	adm := fleet.NewCalibrationHosts(scfg, dev)
	defer adm.Stop()
	ccfg := calibrate.Config{Admission: adm,
		GPU: dev, Profile: profile, Runs: *runs, LinesPerStep: *perStep, MaxConcurrency: *maxConcurrency, Logger: logger,
		Launch: func(ctx context.Context, i int) (ttshost.EngineHost, error) {
			h, err := gpu.LaunchPinned(ctx, l, gpu.LaunchOpts{GPU: dev.UUID, GPUIndex: dev.Index, ID: fmt.Sprintf("%s/cal%d", dev.UUID, i),
				Weights: profile.WeightsRole(i)}, cfg.HostStartTimeout)
			if err != nil {
				return nil, err
			}
			return h.(ttshost.EngineHost), nil
		},
		Progress: func(key string, a ...any) {
			fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), i18n.T(i18n.EN, key, a...))
		},
	}
	if sd := setup.simulated[dev.UUID]; sd != nil {
		ccfg.Device = simulatedMemory{sd}
	} else {
		ccfg.Device = monitorMemory{m: m, uuid: dev.UUID}
	}
	if *buckets != "" {
		for i, f := range strings.Split(*buckets, ",") {
			sec, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || sec <= 0 {
				return fmt.Errorf("-buckets: %q is not a length in seconds", f)
			}
			ccfg.Buckets = append(ccfg.Buckets, gpu.CalibrationBucket{Name: bucketName(i, sec), Seconds: sec})
		}
	}

	res, runErr := calibrate.Run(ctx, ccfg)
	if res != nil {
		printCalibration(os.Stdout, res)
		if *out != "" {
			if err := writeJSON(*out, res); err != nil {
				return err
			}
		}
	}
	if rec != nil {
		if err := writeJSON(*samples, rec.points()); err != nil {
			return err
		}
	}
	if store != nil && res != nil {
		host, _ := os.Hostname()
		c, err := fleet.SaveCalibration(context.WithoutCancel(ctx), store, "calibrate@"+host, dev, profile, stored, res, runErr)
		if err != nil {
			return fmt.Errorf("storing the result: %w", err)
		}
		fmt.Printf("stored as calibration %d\n", c.ID)
		if *apply && runErr == nil && res.Recommended > 0 {
			if err := store.ApplyGPUCalibration(ctx, 0, c.ID, res.Recommended, res.RecommendedProfile.LongLaneLimit); err != nil {
				return fmt.Errorf("applying the result: %w", err)
			}
			fmt.Printf("applied: GPU %s runs concurrency %d\n", dev.UUID, res.Recommended)
		}
	}
	return runErr
}

func bucketName(i int, sec float64) string {
	if i < 4 {
		return []string{"short", "medium", "long", "longest"}[i]
	}
	return fmt.Sprintf("%.0fs", sec)
}

// monitorMemory reads a GPU's used memory from NVML.
type monitorMemory struct {
	m    *gpu.Monitor
	uuid string
}

func (d monitorMemory) Used() (int64, bool) {
	for _, s := range d.m.SampleNow(context.Background()) {
		if s.UUID == d.uuid && s.Has(gpu.MetricMemory) {
			return s.UsedBytes, true
		}
	}
	return 0, false
}

// simulatedMemory reads a simulated card, with exact peaks.
type simulatedMemory struct{ *simdev.Device }

func (s simulatedMemory) Used() (int64, bool) { return s.Device.Used(), true }

// sampleRecorder keeps one sample a second of a GPU.
type sampleRecorder struct {
	mu  sync.Mutex
	pts []recordedSample
}

type recordedSample struct {
	gpu.Point
	Processes []gpu.ProcessMemory `json:"processes,omitempty"`
}

func (r *sampleRecorder) run(ctx context.Context, m *gpu.Monitor, uuid string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		for _, s := range m.SampleNow(ctx) {
			if s.UUID == uuid {
				r.mu.Lock()
				r.pts = append(r.pts, recordedSample{Point: gpu.PointOf(s), Processes: s.Processes})
				r.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *sampleRecorder) points() []recordedSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedSample(nil), r.pts...)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// printCalibration writes a calibration's tables for a person.
func printCalibration(w io.Writer, r *gpu.CalibrationResult) {
	gb := func(b int64) string { return fmt.Sprintf("%.2f GB", float64(b)/1e9) }
	fmt.Fprintf(w, "\nGPU %d %s (%s), %s total; engine %s, model %s %s\n", r.GPU.Index, r.GPU.Name, r.GPU.UUID,
		gb(r.GPU.TotalBytes), r.Engine, r.Model, r.ModelVersion)
	fmt.Fprintf(w, "profile %q: concurrency %d, %.0f%% reserve, long lane from %.0f s (%d at once), at most %.0f s, %d tokens a segment, fp16 %v, shared weights %v\n",
		r.Profile.Name, r.Profile.Concurrency, r.Profile.ReservePct, r.Profile.LongTextThresholdSec, r.Profile.LongLaneLimit,
		r.Profile.MaxGenSeconds, r.Profile.SegmentTokens, r.Profile.FP16, r.Profile.ShareWeights)
	fmt.Fprintf(w, "\n(1) memory after load: allocator %s; process %s (%s); after warm-up and cache release %s; others held %s before\n",
		gb(r.LoadedAllocatedBytes), gb(r.LoadedBytes), r.MemoryCounter, gb(r.ResidentBytes), gb(r.BaselineUsedBytes))
	if r.BorrowerBytes > 0 {
		fmt.Fprintf(w, "    a second host borrowing the weights: %s after warm-up and cache release\n", gb(r.BorrowerBytes))
	}
	if b := r.Batch; b != nil {
		fmt.Fprintf(w, "    batching host: reports %s (its KV pool %s); %d beams, %d KV bytes a token, %d prefix tokens, at most %d lines at once\n",
			gb(b.HostResidentBytes), gb(b.KVCacheBytes), b.Beams, b.KVBytesPerToken, b.PrefixTokens, b.MaxSequences)
		fmt.Fprintf(w, "    a mean line of the mix: %s KV, %s activations: %d fit at once; load test up to %d\n",
			gb(b.MixKVBytes), gb(b.MixActivationBytes), b.SequencesThatFit, b.Limit)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\n(2) peaks per bucket (%s, worst of the runs) and (3) fall-back after the runs\n", r.PeakCounter)
	fmt.Fprintln(tw, "bucket\truns\taudio s\tchars\tpeak\tKV\tmean time\tmax time\t")
	for _, b := range r.Analysis {
		fmt.Fprintf(tw, "%s\t%d\t%.1f-%.1f\t%d\t%s\t%s\t%.2f s\t%.2f s\t\n", b.Bucket, b.Runs, b.MinAudioSeconds, b.MaxAudioSeconds,
			b.MaxCharacters, gb(b.PeakBytes), gb(b.KVBytes), b.MeanDuration.Seconds(), b.MaxDuration.Seconds())
	}
	tw.Flush()
	var falls []string
	for _, run := range r.Runs {
		falls = append(falls, fmt.Sprintf("%.2f", float64(run.FallbackBytes)/1e9))
	}
	fmt.Fprintf(w, "fall-back after each run (GB): %s\n", strings.Join(falls, " "))
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn.In(i18n.EN))
	}
	if r.DoesNotFit != nil {
		fmt.Fprintf(w, "\n%s\n", r.DoesNotFit.In(i18n.EN))
		return
	}
	if r.Batch != nil {
		fmt.Fprintf(w, "\n(4) load test: lines at once on the batching host\n")
	} else {
		fmt.Fprintf(w, "\n(4) load test through the executor (the budget fits concurrency %d in the worst case)\n", r.ConcurrencyThatFits)
	}
	fmt.Fprintln(tw, "concurrency\tlines\tok\tfailed\tOOM\tkilled\tavg\tp95\tpeak VRAM\taudio s/s\ts per audio s\t")
	for _, s := range r.Verdict.Steps {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%.2f s\t%.2f s\t%s\t%.2f\t%.3f\t\n", s.Concurrency, s.Tasks, s.Successes, s.Failures,
			s.OOMs, s.Killed, s.AvgLatency.Seconds(), s.P95Latency.Seconds(), gb(s.PeakVRAMBytes), s.Throughput, s.LatencyPerAudioSecond)
	}
	tw.Flush()
	for _, f := range r.Failures {
		fmt.Fprintf(w, "failure at concurrency %d (%s, %s): %s\n", f.Concurrency, f.Bucket, f.Kind, f.Error)
	}
	fmt.Fprintf(w, "crash point: %s; slowdown point: %s; recommended: concurrency %d, long lane %d (%s)\n",
		point(r.Verdict.CrashAt), point(r.Verdict.SlowdownAt), r.Recommended, r.RecommendedProfile.LongLaneLimit,
		r.Verdict.Why)
	if r.Batch != nil {
		fmt.Fprintf(w, "latency point (over %.0fx alone per audio second): %s; recommended: at most %d lines at once on the one host\n",
			gpu.MaxLatencyGrowth, point(r.Verdict.LatencyAt), r.Recommended)
	}
}

func point(n int) string {
	if n == 0 {
		return "not reached"
	}
	return fmt.Sprintf("concurrency %d", n)
}
