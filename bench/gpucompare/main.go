// Command gpucompare measures what dubstudio's VRAM-budgeted executor gets out of
// one NVIDIA GPU against the method of the source documents, on one workload:
//
//   - fixed: N model-host processes (N = 1, 2, 3, 4, 6, 8, ...), each fed by its
//     own worker from a bounded queue, one retry after an out-of-memory error; each
//     N until one fails (a failed line, an OOM, a lost host) or, with -stop-flat,
//     until the throughput has not improved for that many steps;
//   - executor: the worker's GPUs calibrate the card with the default profile,
//     apply what the calibration recommends, and render the same lines through the
//     executor, no hand tuning.
//
// The workload is a script of dubbing lines whose lengths come from a real film's
// subtitles (testdata/film_cues.tsv; consecutive cues of one speaker merged into
// one line, at most 25 s), spoken by three characters in turn. With -leave-gib the
// card is shrunk first by a process that holds all but that much memory (a 24 GiB
// studio card on a bigger one).
//
// Run it from the repository root on the GPU machine with the benchmark host
// (tts/hosts/bench_host.py, PyTorch) — bench/gpu/compare.sh does — or anywhere with
// -sim, which runs simulator hosts on a simulated card (a rehearsal of the code
// path, not a measurement). Results: -out/results.json and the calibration as
// JSON; the summary (a Markdown table) on standard output.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
	"dubstudio/tts"
)

// The default workload: 150 lines from the film's 373rd turn on (764 s of speech,
// lines of 0.97 to 24.2 s).
const (
	defaultMaxGapMs  = 300
	defaultMaxLineMs = 25000
	defaultFrom      = 372
	defaultLines     = 150
)

func main() {
	log.SetFlags(log.Ltime)
	o := parseFlags()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	err := compare(ctx, o, os.Stdout)
	stop()
	if err != nil {
		log.Fatal(err) //nolint:gocritic // stop has run; the timeout's cancel only frees a timer
	}
}

type options struct {
	cues, out, methods, steps, host, python string
	from, lines, characters, gpuIndex, stop int
	leaveGiB                                float64
	sim, shareWeights                       bool
	timeout                                 time.Duration
	batch                                   batchOptions
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.cues, "cues", "bench/gpucompare/testdata/film_cues.tsv", "subtitle timings: start_ms, end_ms, dialogue_dash")
	flag.IntVar(&o.from, "from", defaultFrom, "first line (0-based) of the merged script")
	flag.IntVar(&o.lines, "lines", defaultLines, "lines in the workload")
	flag.IntVar(&o.characters, "characters", 3, "characters speaking the lines in turn")
	flag.IntVar(&o.gpuIndex, "gpu", 0, "GPU index")
	flag.Float64Var(&o.leaveGiB, "leave-gib", 0, "shrink the card to this many GiB with a process holding the rest (0: the whole card)")
	flag.StringVar(&o.methods, "methods", "fixed,executor", "methods to run, in order: fixed, executor, batched")
	flag.StringVar(&o.steps, "n", "1,2,3,4,6,8,12,16", "host counts for the fixed method")
	flag.IntVar(&o.stop, "stop-flat", 0, "stop the fixed method after this many steps in a row without a new best throughput (0: only at a failure)")
	flag.StringVar(&o.host, "host", "tts/hosts/bench_host.py --gpt-dtype fp16", "model host script and flags, run with -python")
	flag.StringVar(&o.python, "python", "python3", "Python for the hosts and the memory holder")
	flag.StringVar(&o.out, "out", "gpucompare-results", "directory for the results")
	flag.BoolVar(&o.sim, "sim", false, "simulator hosts on a simulated card (a rehearsal, not a measurement)")
	flag.DurationVar(&o.timeout, "timeout", 0, "stop after this long (0: no limit); the runs so far are written")
	flag.BoolVar(&o.shareWeights, "share-weights", false, "the hosts of the GPU share one copy of the weights (both methods; bench_host.py --share-weights)")
	flag.IntVar(&o.batch.maxSequences, "max-sequences", 64, "batched method: lines the one batching host decodes at once (the profile's concurrency)")
	flag.IntVar(&o.batch.beams, "beams", tts.DefaultBeams, "batched method: beams per line (1: sampling, one row)")
	flag.Float64Var(&o.batch.kvCacheGiB, "kv-cache-gib", 0, "batched method: the host's KV cache in GiB (0: the host's own size)")
	flag.StringVar(&o.batch.s2melPrecision, "s2mel", gpu.S2melFP32, "batched method: the profile's s2mel precision, fp32 or bf16 "+
		"(the worker passes it to the host as --s2mel-dtype, after -host's flags: put it here, not in -host)")
	flag.Parse()
	return o
}

// checkS2mel refuses a batched run whose -host asks for an s2mel precision other than
// the profile's (-s2mel): the worker starts the batching host with the profile's
// --s2mel-dtype after the -host flags, so the host would silently run the profile's
// (the 24 GiB runs of 2026-12-02 evening ran s2mel in fp32 so).
func checkS2mel(methods, host, precision string) error {
	if !slices.Contains(strings.Split(methods, ","), "batched") {
		return nil
	}
	f := strings.Fields(host)
	for i, a := range f {
		v, ok := strings.CutPrefix(a, "--s2mel-dtype=")
		if !ok && a == "--s2mel-dtype" && i+1 < len(f) {
			v, ok = f[i+1], true
		}
		if ok && v != precision {
			return fmt.Errorf("-host asks for --s2mel-dtype %s but the batched method's profile has %s (-s2mel), "+
				"which the worker passes last: set -s2mel %s", v, precision, v)
		}
	}
	return nil
}

// compare runs the methods o asks for and writes the summary to stdout.
func compare(ctx context.Context, o options, stdout io.Writer) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	cues, err := readCues(o.cues)
	if err != nil {
		return err
	}
	lines, err := script(turns(cues, defaultMaxGapMs, defaultMaxLineMs), o.from, o.lines, o.characters)
	if err != nil {
		return err
	}
	if err := checkS2mel(o.methods, o.host, o.batch.s2melPrecision); err != nil {
		return err
	}
	steps, err := parseSteps(o.steps)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "gpucompare")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	r := &rig{lines: lines, work: work, profile: gpu.DefaultProfile(), tps: 50, situation: "whole card",
		log: func(f string, a ...any) { log.Printf(f, a...) }}
	if o.leaveGiB > 0 {
		r.situation = fmt.Sprintf("%g GiB", o.leaveGiB)
	}
	r.profile.ShareWeights = o.shareWeights
	if o.shareWeights {
		r.situation += " shared weights"
	}
	var memory func(string) calibrate.DeviceMemory
	if o.sim {
		dev := simdev.New(141 * gpu.GiB)
		if o.leaveGiB > 0 {
			dev.SetForeign(dev.Total() - int64(o.leaveGiB*float64(gpu.GiB)))
		}
		const uuid = "GPU-simulated-0"
		r.newMonitor = func(ctx context.Context) *gpu.Monitor {
			return gpu.NewMonitor(ctx, gpu.MonitorConfig{Interval: 200 * time.Millisecond,
				Driver: ttshost.NewSimDriver(ttshost.SimDevice{UUID: uuid, Name: "Simulated GPU", Device: dev})})
		}
		r.launcher = &ttshost.SimLauncher{Devices: map[string]*simdev.Device{uuid: dev},
			Config: tts.SimulatorConfig{ResidentBytes: 5 * gpu.GiB, PeakBaseBytes: 100 << 20, PeakPerSecondBytes: 40 << 20,
				TokensPerAudioSecond: 50, TokensPerSecond: 20000, FollowTarget: true,
				Batch: &tts.SimBatch{Slowdown: 0.02}}, // used only by batching hosts (Profile)
			Profile: func(string) gpu.Profile { return r.batchOf() }}
		memory = func(string) calibrate.DeviceMemory { return simMemory{dev} }
	} else {
		hostsLog, err := os.OpenFile(filepath.Join(o.out, "hosts.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer hostsLog.Close()
		r.newMonitor = func(ctx context.Context) *gpu.Monitor {
			return gpu.NewMonitor(ctx, gpu.MonitorConfig{Interval: 200 * time.Millisecond})
		}
		m := r.newMonitor(ctx) // the launcher's own, for the hosts' memory
		defer m.Close()
		argv := append([]string{o.python}, strings.Fields(o.host)...)
		r.launcher = ttshost.NewLauncher(ttshost.LauncherConfig{Name: "bench",
			Command: func(gpu.LaunchOpts) ([]string, error) {
				return append(argv[:len(argv):len(argv)], ttshost.BatchArgs(r.batchOf())...), nil
			},
			Env: []string{"PYTHONUNBUFFERED=1"},
			ProcessBytes: func(uuid string, pid int) (int64, bool) {
				for _, s := range m.SampleNow(context.Background()) {
					if s.UUID == uuid {
						return s.ProcessBytes(pid)
					}
				}
				return 0, false
			},
			Stderr: func(opts gpu.LaunchOpts) io.Writer { return &taggedWriter{w: hostsLog, tag: opts.ID} },
		})
	}
	r.monitor = r.newMonitor(ctx)
	defer r.monitor.Close()
	if !r.monitor.Available() {
		return fmt.Errorf("no GPU: %w", r.monitor.Err())
	}
	devs := r.monitor.Devices()
	if o.gpuIndex < 0 || o.gpuIndex >= len(devs) {
		return fmt.Errorf("GPU %d: the machine has %d", o.gpuIndex, len(devs))
	}
	r.dev = devs[o.gpuIndex]
	if o.leaveGiB > 0 && !o.sim {
		release, err := holdMemory(ctx, o.python, r.dev, o.leaveGiB)
		if err != nil {
			return err
		}
		defer release()
	}
	r.speakers = &speakers{}
	for i := range o.characters {
		p := filepath.Join(work, fmt.Sprintf("character%d.wav", i+1))
		if err := calibrate.WriteVoice(p, 110+45*float64(i)); err != nil { // a pitch per character
			return err
		}
		r.speakers.refs = append(r.speakers.refs, p)
	}
	log.Printf("%s, %s: %d lines, %.0f s of speech", r.dev.Name, r.situation, len(lines), audioSeconds(lines))

	var results []*result
	save := func() error {
		b, err := json.MarshalIndent(map[string]any{"gpu": r.dev, "situation": r.situation, "lines": len(lines),
			"speech_seconds": audioSeconds(lines), "runs": results}, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(o.out, "results.json"), b, 0o644)
	}
	slug := strings.ReplaceAll(r.situation, " ", "-")
	for _, method := range strings.Split(o.methods, ",") {
		switch strings.TrimSpace(method) {
		case "fixed":
			best, flat := 0.0, 0
			for _, n := range steps {
				if ctx.Err() != nil {
					break
				}
				log.Printf("fixed N=%d", n)
				res := r.fixed(ctx, n)
				results = append(results, res)
				log.Print(res.line())
				if err := save(); err != nil {
					return err
				}
				if !res.healthy() {
					break
				}
				if res.Throughput > best*1.01 {
					best, flat = res.Throughput, 0
				} else if flat++; o.stop > 0 && flat >= o.stop {
					break
				}
			}
		case "executor":
			if ctx.Err() != nil {
				break
			}
			log.Print("executor: calibrating")
			res := r.executor(ctx, memory, filepath.Join(o.out, "calibration-"+slug+".json"))
			results = append(results, res)
			log.Print(res.line())
		case "batched":
			if ctx.Err() != nil {
				break
			}
			log.Printf("batched: one host, %d sequences, %d beams", o.batch.maxSequences, o.batch.beams)
			res := r.batched(ctx, o.batch)
			results = append(results, res)
			log.Print(res.line())
		default:
			return fmt.Errorf("unknown method %q", method)
		}
		if err := save(); err != nil {
			return err
		}
	}
	fmt.Fprint(stdout, summary(r, results))
	for _, x := range results {
		if x.Method == "executor" && !x.healthy() {
			return errors.New("the executor's run was not clean")
		}
	}
	return nil
}

// parseSteps reads the fixed method's host counts.
func parseSteps(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("-n %q: want rising positive counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func (r *result) line() string {
	s := fmt.Sprintf("%s %s N=%d: %.2f audio s/s (%.0f s of %d lines in %.0f s), failed %d, OOMs %d, hosts lost %d, peak %.1f GB, p50 %.1f s, p95 %.1f s",
		r.Situation, r.Method, r.Hosts, r.Throughput, r.AudioSeconds, r.Done, r.WallSeconds, r.Failed, r.OOMs, r.HostsKilled,
		float64(r.PeakUsedBytes)/1e9, r.P50Seconds, r.P95Seconds)
	s += fmt.Sprintf(", p95 of lines up to %d s %.1f s", shortLineSeconds, r.P95ShortSeconds)
	if r.Sequences > 0 {
		s += fmt.Sprintf(", %d sequences, mean rows per step %.1f (most %.0f)", r.Sequences, r.BatchRowsMean, r.BatchRowsMost)
	}
	if r.StartError != "" {
		s += "; did not start: " + r.StartError
	}
	return s
}

// summary is the runs as a Markdown table, with the comparison the targets ask for.
func summary(r *rig, results []*result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%.1f GB), %s, %d lines, %.0f s of speech\n\n", r.dev.Name, float64(r.dev.TotalBytes)/1e9,
		r.situation, len(r.lines), audioSeconds(r.lines))
	b.WriteString("| method | hosts | audio s / wall s | wall s | lines failed | not run | OOMs | hosts lost | peak VRAM (card) | p50 | p95 |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var best, rule, exec *result
	var firstFail *result
	for _, x := range results {
		note := ""
		if x.StartError != "" {
			note = " (did not start)"
		}
		fmt.Fprintf(&b, "| %s | %d%s | %.2f | %.0f | %d | %d | %d | %d | %.1f GB | %.1f s | %.1f s |\n", x.Method, x.Hosts, note,
			x.Throughput, x.WallSeconds, x.Failed, x.Lines-x.Done-x.Failed, x.OOMs, x.HostsKilled,
			float64(x.PeakUsedBytes)/1e9, x.P50Seconds, x.P95Seconds)
		switch {
		case x.Method == "batched":
		case x.Method == "executor":
			exec = x
		case !x.healthy():
			if firstFail == nil {
				firstFail = x
			}
		case firstFail == nil:
			if best == nil || x.Throughput > best.Throughput {
				best = x
			}
			rule = x // the last healthy step below the first failure
		}
	}
	b.WriteString("\n")
	for _, x := range results {
		if x.Method != "batched" {
			continue
		}
		fmt.Fprintf(&b, "Batched (one host, %d sequences", x.Sequences)
		if x.Profile != nil {
			fmt.Fprintf(&b, ", %d beams", x.Profile.BeamsOrDefault())
		}
		fmt.Fprintf(&b, "): p95 of lines up to %d s %.1f s; mean rows per decode step %.1f (most %.0f); stage sums:",
			shortLineSeconds, x.P95ShortSeconds, x.BatchRowsMean, x.BatchRowsMost)
		for _, k := range []string{"queue", "conditioning", "gpt", "s2mel", "vocoder", "total"} {
			fmt.Fprintf(&b, " %s %.0f s", k, x.StageSeconds[k])
		}
		b.WriteString("\n")
		if best != nil && best.Throughput > 0 && x.healthy() {
			fmt.Fprintf(&b, "Batched: %.2fx the best fixed N (N=%d)", x.Throughput/best.Throughput, best.Hosts)
			if exec != nil && exec.healthy() && exec.Throughput > 0 {
				fmt.Fprintf(&b, ", %.2fx the executor", x.Throughput/exec.Throughput)
			}
			b.WriteString(".\n")
		}
	}
	switch {
	case firstFail != nil:
		fmt.Fprintf(&b, "Fixed method: first failure at N=%d; the source documents' rule picks N=%d.\n", firstFail.Hosts, hostsOf(rule))
	case rule != nil:
		fmt.Fprintf(&b, "Fixed method: no failure up to N=%d.\n", rule.Hosts)
	}
	if exec != nil && exec.healthy() {
		if best != nil && best.Throughput > 0 {
			fmt.Fprintf(&b, "Executor (concurrency %d after its calibration): %.0f%% of the best fixed N (N=%d).\n", exec.Hosts,
				100*exec.Throughput/best.Throughput, best.Hosts)
		}
		if rule != nil && rule.Throughput > 0 {
			fmt.Fprintf(&b, "Executor: %.2fx the fixed N the rule picks (N=%d).\n", exec.Throughput/rule.Throughput, rule.Hosts)
		}
	} else if exec != nil {
		b.WriteString("Executor: the run was not clean (see the table).\n")
	}
	return b.String()
}

func hostsOf(r *result) int {
	if r == nil {
		return 0
	}
	return r.Hosts
}

// holdMemory starts bench/gpucompare/hold.py on dev, which takes all the card's
// free memory but leaveGiB and holds it until release.
func holdMemory(ctx context.Context, python string, dev gpu.Device, leaveGiB float64) (func(), error) {
	cmd := exec.CommandContext(ctx, python, "bench/gpucompare/hold.py", strconv.FormatFloat(leaveGiB, 'f', -1, 64))
	cmd.Env = append(os.Environ(), "CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES="+dev.UUID, "PYTHONUNBUFFERED=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the memory holder: %w", err)
	}
	release := func() {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				log.Printf("the memory holder exited: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			log.Printf("the memory holder was killed: %v", <-done)
		}
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		release()
		return nil, errors.New("the memory holder exited before holding anything")
	}
	log.Printf("memory holder: %s", sc.Text())
	time.Sleep(time.Second) // let NVML see it
	return release, nil
}

// simMemory reads a simulated card.
type simMemory struct{ d *simdev.Device }

func (m simMemory) Used() (int64, bool) { return m.d.Used(), true }

// taggedWriter writes a host's output to the shared log (one write a call, which
// an append-only file keeps whole), tagged with the host.
type taggedWriter struct {
	w   io.Writer
	tag string
}

func (t *taggedWriter) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(t.w, "[%s] %s", t.tag, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
