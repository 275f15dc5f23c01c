// Command pipeline measures what the render pipeline itself costs, with an engine
// that costs nothing: how many lines per second go through the whole pipeline (the
// synthesize job, the engine's output stored as a blob, the fit and its take, every
// state change and its notification), how many plain River no-op jobs per second the
// same database runs in the same run, and how long a render request waits before its
// synthesis starts when a slot is free.
//
// It creates a fresh database on the server (TEST_DATABASE_URL, or -db), migrates it
// and drops it at the end:
//
//	go run ./bench/pipeline
//	go run ./bench/pipeline -lines 5000 -cpuprofile cpu.out
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"dubstudio/audio"
	"dubstudio/bench/internal/benchdb"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/workflow"
)

type options struct {
	db          string
	lines       int
	noop        int
	samples     int
	gap         time.Duration
	slots       int
	fitWorkers  int
	cooldown    time.Duration
	rate        int
	cpuProfile  string
	jsonOut     bool
	keep        bool
	verbose     bool
	apart       bool
	lineSeconds float64
}

func main() {
	var o options
	flag.StringVar(&o.db, "db", benchdb.Server(), "PostgreSQL server to create the benchmark database on")
	flag.IntVar(&o.lines, "lines", 2000, "lines rendered in the throughput run")
	flag.IntVar(&o.noop, "noop", 5000, "River no-op jobs in the comparison run")
	flag.IntVar(&o.samples, "samples", 200, "single-line renders timed for the start latency")
	flag.DurationVar(&o.gap, "gap", 200*time.Millisecond, "mean pause between latency samples (an editor's clicks are not back to back)")
	flag.IntVar(&o.slots, "slots", 8, "engine slots of the worker")
	flag.IntVar(&o.fitWorkers, "fit-workers", 0, "fits at once (0: the worker's default, workflow.DefaultFitWorkers)")
	flag.DurationVar(&o.cooldown, "fetch-cooldown", 0, "River fetch cooldown of the worker's queues (0: the worker's default)")
	flag.IntVar(&o.rate, "rate", 48000, "sample rate of the engine's output (48000 needs no resampling in the fit)")
	flag.Float64Var(&o.lineSeconds, "line-seconds", 1.5, "length of each line's slot")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the throughput run to this file")
	flag.BoolVar(&o.jsonOut, "json", false, "print the results as JSON")
	flag.BoolVar(&o.keep, "keep", false, "keep the benchmark database")
	flag.BoolVar(&o.verbose, "v", false, "log the worker's warnings")
	flag.BoolVar(&o.apart, "apart", true, "place the worker's data directories apart from recently freed inodes (ext4's chattr +T; see apart_linux.go)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pipeline benchmark:", err)
		os.Exit(1)
	}
	if o.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
		return
	}
	res.print()
}

// Result holds the figures of one run.
type Result struct {
	CPUs        int     `json:"cpus"`
	Lines       int     `json:"lines"`
	LineSeconds float64 `json:"line_seconds"`
	EngineRate  int     `json:"engine_sample_rate"`
	Slots       int     `json:"slots"`
	FitWorkers  int     `json:"fit_workers"`
	// DataDirApart says whether the worker's data directories were placed apart
	// from recently freed inodes (placeApart).
	DataDirApart   bool    `json:"data_dir_apart"`
	LinesPerSecond float64 `json:"lines_per_second"`
	PipelineWall   float64 `json:"pipeline_seconds"`
	Notifications  int     `json:"notifications"`
	// FitJobs is how many lines were handed to a fit job because the worker's fits
	// were backed up (the others were fitted by their synthesis).
	FitJobs       int     `json:"fit_jobs"`
	NoopJobs      int     `json:"noop_jobs"`
	NoopPerSecond float64 `json:"noop_jobs_per_second"`
	NoopWorkers   int     `json:"noop_workers"`
	// NoopDefaultPerSecond is River with its default queue settings (100 workers,
	// 100 ms fetch cooldown).
	NoopDefaultPerSecond float64 `json:"noop_default_jobs_per_second"`
	// Ratio is lines per second over no-op jobs per second. A line is one job (the
	// synthesis fits its own take) unless the worker's fits back up, so 1 would mean
	// the pipeline adds nothing to River.
	Ratio float64 `json:"ratio"`
	// Start latency of single renders with a free slot: from the render request's
	// commit to River starting the synthesize job (DB clock, created_at ->
	// attempted_at), and to the first notification of the line's start arriving
	// (waiting for GPU, or synthesizing; client clock).
	Samples      int       `json:"samples"`
	StartDBMs    Quantiles `json:"start_db_ms"`
	StartSeenMs  Quantiles `json:"start_seen_ms"`
	DoneSeenMs   Quantiles `json:"done_seen_ms"`
	TakesChecked int       `json:"takes_checked"`
	// CPU time per line of this process (worker and benchmark) and of the database
	// server's backends for this database (read from /proc where the server runs
	// here), and the rate that all CPUs of this machine would sustain at that cost:
	// figures that other load on the machine disturbs less than wall time.
	GoCPUPerLineMs         float64 `json:"go_cpu_per_line_ms"`
	DBCPUPerLineMs         float64 `json:"db_cpu_per_line_ms,omitempty"`
	CPUBoundLinesPerSecond float64 `json:"cpu_bound_lines_per_second,omitempty"`
}

// Quantiles of a latency sample, in milliseconds.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	Max float64 `json:"max"`
}

func quantiles(ms []float64) Quantiles {
	if len(ms) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	at := func(q float64) float64 { return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)] }
	return Quantiles{P50: at(0.50), P95: at(0.95), Max: s[len(s)-1]}
}

func (r Result) print() {
	fmt.Printf("machine: %d CPUs (%s/%s), Go %s\n", r.CPUs, runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Printf("pipeline: %d lines of %.1f s, engine output at %d Hz, %d slots, %d fit workers, data directories placed apart: %t\n",
		r.Lines, r.LineSeconds, r.EngineRate, r.Slots, r.FitWorkers, r.DataDirApart)
	fmt.Printf("  %.0f lines/s (%.2f s), %d line notifications, %d lines fitted by a fit job\n",
		r.LinesPerSecond, r.PipelineWall, r.Notifications, r.FitJobs)
	if r.DBCPUPerLineMs > 0 {
		fmt.Printf("  CPU per line: %.2f ms here + %.2f ms in PostgreSQL = at most %.0f lines/s on %d CPUs\n",
			r.GoCPUPerLineMs, r.DBCPUPerLineMs, r.CPUBoundLinesPerSecond, r.CPUs)
	} else {
		fmt.Printf("  CPU per line: %.2f ms here (PostgreSQL's not readable)\n", r.GoCPUPerLineMs)
	}
	fmt.Printf("river no-op: %d jobs, %d workers as the worker's queues: %.0f jobs/s; River's defaults (100 workers): %.0f jobs/s\n",
		r.NoopJobs, r.NoopWorkers, r.NoopPerSecond, r.NoopDefaultPerSecond)
	fmt.Printf("ratio lines/s : no-op jobs/s = %.3f (a line is 1 job: 1 would be River's own cost)\n", r.Ratio)
	fmt.Printf("start latency, %d single renders with a free slot:\n", r.Samples)
	fmt.Printf("  insert -> job started (DB clock):     p50 %.1f ms, p95 %.1f ms, max %.1f ms\n", r.StartDBMs.P50, r.StartDBMs.P95, r.StartDBMs.Max)
	fmt.Printf("  request -> started notification:      p50 %.1f ms, p95 %.1f ms, max %.1f ms\n", r.StartSeenMs.P50, r.StartSeenMs.P95, r.StartSeenMs.Max)
	fmt.Printf("  request -> done notification:         p50 %.1f ms, p95 %.1f ms, max %.1f ms\n", r.DoneSeenMs.P50, r.DoneSeenMs.P95, r.DoneSeenMs.Max)
}

func run(ctx context.Context, o options) (*Result, error) {
	logLevel := slog.LevelError + 1
	if o.verbose {
		logLevel = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
	db, err := benchdb.Fresh(ctx, o.db, "dubstudio_bench", o.keep, logger)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	pool, dbURL := db.Pool, db.URL
	store, err := studio.NewStore(pool)
	if err != nil {
		return nil, err
	}
	res := &Result{CPUs: runtime.NumCPU(), Lines: o.lines, LineSeconds: o.lineSeconds, EngineRate: o.rate, Slots: o.slots,
		FitWorkers: o.fitWorkers, Samples: o.samples, NoopJobs: o.noop}
	if res.FitWorkers == 0 {
		res.FitWorkers = workflow.DefaultFitWorkers()
	}

	// River alone, with as many workers as the pipeline's two queues together.
	res.NoopWorkers = o.slots + 1 + res.FitWorkers
	cooldown := o.cooldown
	if cooldown == 0 {
		cooldown = workflow.DefaultFetchCooldown
	}
	res.NoopPerSecond, err = noopRun(ctx, pool, o.noop, res.NoopWorkers, cooldown, logger)
	if err != nil {
		return nil, fmt.Errorf("no-op run: %w", err)
	}
	// And River as it comes (100 workers, 100 ms cooldown), for its ceiling here.
	res.NoopDefaultPerSecond, err = noopRun(ctx, pool, o.noop, 100, river.FetchCooldownDefault, logger)
	if err != nil {
		return nil, fmt.Errorf("no-op run: %w", err)
	}

	// The pipeline.
	listener, err := listen(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer listener.close()
	owner, err := store.CreateUser(ctx, studio.CreateUserParams{Username: "bench", Role: studio.RoleEditor, Password: "bench-password-1"})
	if err != nil {
		return nil, err
	}
	project, err := store.CreateProject(ctx, "Pipeline benchmark", &owner.ID)
	if err != nil {
		return nil, err
	}
	slotMs := int(o.lineSeconds * 1000)
	nl := make([]studio.NewLine, o.lines)
	for i := range nl {
		who := "Alice"
		if i%2 == 1 {
			who = "Bob"
		}
		nl[i] = studio.NewLine{SourceLine: i + 1, StartMs: i * (slotMs + 500), EndMs: i*(slotMs+500) + slotMs,
			CharacterName: who, Text: fmt.Sprintf("Line number %d of the benchmark.", i+1)}
	}
	if _, err := store.ImportLines(ctx, owner.ID, project.ID, nl); err != nil {
		return nil, err
	}
	pipeline, err := workflow.NewPipeline(store, logger)
	if err != nil {
		return nil, err
	}
	dataDir, err := os.MkdirTemp("", "dubbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	if o.apart {
		res.DataDirApart = placeApart(dataDir)
	}
	// Voice-cloning engines need a reference voice per character; its conditioning is
	// prepared once, by a prepare job, before the first line.
	if err := addReferences(ctx, store, project.ID, dataDir); err != nil {
		return nil, err
	}
	worker, err := workflow.NewWorker(pipeline, workflow.NewLocalPermits(&zeroEngine{rate: o.rate}, o.slots), workflow.WorkerConfig{
		Name: "bench", DataDir: dataDir, FitWorkers: o.fitWorkers, FetchCooldown: o.cooldown,
	}, logger)
	if err != nil {
		return nil, err
	}
	if err := worker.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.Stop(sctx)
	}()

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
	}
	listener.reset()
	cpu0, err := cpuNow(ctx, pool)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	n, err := pipeline.RenderPending(ctx, project.ID)
	if err != nil {
		return nil, err
	}
	if n != o.lines {
		return nil, fmt.Errorf("queued %d lines, want %d", n, o.lines)
	}
	if err := listener.waitDone(ctx, o.lines, 10*time.Minute); err != nil {
		return nil, err
	}
	res.PipelineWall = time.Since(start).Seconds()
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	cpu1, err := cpuNow(ctx, pool)
	if err != nil {
		return nil, err
	}
	res.GoCPUPerLineMs = ms(cpu1.self-cpu0.self) / float64(o.lines)
	if cpu0.dbOK && cpu1.dbOK {
		res.DBCPUPerLineMs = ms(cpu1.db(cpu0)) / float64(o.lines)
		res.CPUBoundLinesPerSecond = float64(runtime.NumCPU()) * 1000 / (res.GoCPUPerLineMs + res.DBCPUPerLineMs)
	}
	res.LinesPerSecond = float64(o.lines) / res.PipelineWall
	res.Notifications = listener.total()
	res.Ratio = res.LinesPerSecond / res.NoopPerSecond
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT t.line_id) FROM takes t JOIN lines l ON l.current_take_id = t.id
		WHERE t.project_id = $1 AND l.state = 'done'`, project.ID).Scan(&res.TakesChecked); err != nil {
		return nil, err
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, workflow.FitArgs{}.Kind()).Scan(&res.FitJobs); err != nil {
		return nil, err
	}
	if res.TakesChecked != o.lines {
		return nil, fmt.Errorf("%d lines are done with their take, want %d", res.TakesChecked, o.lines)
	}

	// Start latency: one line at a time on an idle worker.
	lines, err := store.AllLines(ctx, project.ID)
	if err != nil {
		return nil, err
	}
	var seen, done []float64
	var jobIDs []int64
	for i := range o.samples {
		l := lines[i%len(lines)]
		if o.gap > 0 {
			time.Sleep(time.Duration(rand.Int64N(int64(2 * o.gap))))
		}
		w := listener.watch(l.ID)
		t0 := time.Now()
		if _, err := pipeline.RenderLines(ctx, project.ID, []int64{l.ID}); err != nil {
			return nil, err
		}
		ts, err := w.wait(ctx, time.Minute)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.ID, err)
		}
		seen = append(seen, ms(ts.waiting.Sub(t0)))
		done = append(done, ms(ts.done.Sub(t0)))
		var id int64
		if err := pool.QueryRow(ctx, `SELECT job_id FROM lines WHERE id = $1`, l.ID).Scan(&id); err != nil {
			return nil, err
		}
		jobIDs = append(jobIDs, id)
	}
	var dbMs []float64
	rows, err := pool.Query(ctx, `SELECT extract(epoch FROM attempted_at - created_at) * 1000 FROM river_job WHERE id = ANY($1)`, jobIDs)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var v float64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		dbMs = append(dbMs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	res.StartDBMs, res.StartSeenMs, res.DoneSeenMs = quantiles(dbMs), quantiles(seen), quantiles(done)
	return res, nil
}

// addReferences gives every character of the project a reference recording.
func addReferences(ctx context.Context, store *studio.Store, projectID int64, dataDir string) error {
	chars, err := store.Characters(ctx, projectID)
	if err != nil {
		return err
	}
	blobs := studio.BlobStore{Dir: filepath.Join(dataDir, "blobs")}
	for i, c := range chars {
		ref := filepath.Join(dataDir, fmt.Sprintf("ref-%d.wav", i))
		s := make([]int16, 16000)
		for j := range s {
			s[j] = int16(4000 * math.Sin(float64(j)/float64(8+i)))
		}
		if err := tts.WriteWAV(ref, 16000, s); err != nil {
			return err
		}
		b, err := store.PutBlob(ctx, blobs, ref, studio.Blob{Format: "wav", DurationMs: 1000, SampleRate: 16000, Channels: 1})
		if err != nil {
			return err
		}
		if err := store.SetCharacterReference(ctx, projectID, c.ID, b.SHA256, "ref.wav"); err != nil {
			return err
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuSample is CPU time used so far by this process and by the database's backends.
type cpuSample struct {
	self     time.Duration
	backends map[int]time.Duration
	dbOK     bool
}

// db returns the backends' CPU time since an earlier sample.
func (c cpuSample) db(earlier cpuSample) time.Duration {
	var d time.Duration
	for pid, t := range c.backends {
		d += t - earlier.backends[pid]
	}
	return d
}

func cpuNow(ctx context.Context, pool *pgxpool.Pool) (cpuSample, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuSample{}, err
	}
	s := cpuSample{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), backends: map[int]time.Duration{}, dbOK: true}
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return s, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return s, err
	}
	for _, pid := range pids {
		t, err := procCPU(int(pid))
		if err != nil {
			s.dbOK = false // a server elsewhere, or not ours to read
			break
		}
		s.backends[int(pid)] = t
	}
	return s, nil
}

// procCPU reads a process's user and system time from /proc.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command (which may hold spaces) in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unexpected /proc stat format")
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks, nil
}

// noopArgs is a job that does nothing.
type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "bench_noop" }

// noopRun runs n no-op jobs on a River client of its own with workers workers and
// returns jobs per second, from the insert to the last completion.
func noopRun(ctx context.Context, pool *pgxpool.Pool, n, workers int, cooldown time.Duration, logger *slog.Logger) (float64, error) {
	ws := river.NewWorkers()
	river.AddWorker(ws, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error { return nil }))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:      "bench-noop",
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers: ws, Logger: logger,
		// As the render worker: notifications plus a poll, the same fetch cooldown.
		FetchPollInterval: time.Second, FetchCooldown: cooldown,
	})
	if err != nil {
		return 0, err
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = client.Stop(sctx)
	}()
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{N: i}}
	}
	start := time.Now()
	if _, err := client.InsertMany(ctx, params); err != nil {
		return 0, err
	}
	timeout := time.After(5 * time.Minute)
	for got := 0; got < n; {
		select {
		case <-events:
			got++
		case <-timeout:
			return 0, fmt.Errorf("only %d of %d no-op jobs completed", got, n)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// zeroEngine is an engine that takes no time: it writes a tone of the line's slot
// length at its sample rate, a little different for every request so that no two
// takes share a blob. The WAV bytes are made once per length and each request's
// copy goes into a recycled buffer, so that the engine costs about one file write
// (a new 144 KB copy per line was garbage that the worker's collector paid for).
type zeroEngine struct {
	rate  int
	mu    sync.Mutex
	files map[int][]byte
	bufs  sync.Pool // *[]byte
}

func (e *zeroEngine) Name() string { return "bench" }

func (e *zeroEngine) Info(context.Context) (tts.HostInfo, error) {
	return tts.HostInfo{Model: "zero-latency", Version: "zero-1", Concurrency: 64, SampleRate: e.rate, DurationControl: true}, nil
}

func (e *zeroEngine) PrepareSpeaker(context.Context, tts.PrepareRequest) (tts.PrepareResult, error) {
	return tts.PrepareResult{}, nil
}

// wav returns a copy of the WAV file of n samples of the tone, in a buffer that
// release gives back.
func (e *zeroEngine) wav(n int) (b []byte, release func(), err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.files == nil {
		e.files = map[int][]byte{}
	}
	f, ok := e.files[n]
	if !ok {
		s := make([]int16, n)
		for i := range s {
			s[i] = int16(3000 * math.Sin(2*math.Pi*220*float64(i)/float64(e.rate)))
		}
		var buf bytes.Buffer
		if err := audio.WriteWAV(&buf, audio.PCM{SampleRate: e.rate, Channels: 1, Samples: s}); err != nil {
			return nil, nil, err
		}
		f = buf.Bytes()
		e.files[n] = f
	}
	p, _ := e.bufs.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	*p = append((*p)[:0], f...)
	return *p, func() { e.bufs.Put(p) }, nil
}

func (e *zeroEngine) Synthesize(_ context.Context, req tts.Request) (tts.Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return tts.Result{}, err
	}
	n := int(req.TargetSeconds*float64(e.rate) + 0.5)
	f, release, err := e.wav(n)
	if err != nil {
		return tts.Result{}, err
	}
	defer release()
	// Every take differs from every other, as real takes do, and so is a blob of its
	// own: 32 samples in the middle carry the seed's bits, 4 LSB each (still apart
	// after the fit's gain and rounding). One byte of the seed, as before, made 256
	// takes and blobs in all: most stores were then of a blob already there.
	if n > 64 {
		for b := range 32 {
			if req.Seed>>b&1 == 1 {
				f[44+2*(n/2+b)] ^= 4
			}
		}
	}
	if err := os.WriteFile(req.OutputPath, f, 0o644); err != nil {
		return tts.Result{}, err
	}
	return tts.Result{Engine: e.Name(), ModelVersion: "zero-1", OutputPath: req.OutputPath, SampleRate: e.rate,
		AudioSeconds: float64(n) / float64(e.rate), DurationFactor: 1}, nil
}

func (e *zeroEngine) Close() error { return nil }

// listener follows the line notifications the web server would get.
type listener struct {
	conn   *pgx.Conn
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	count    int
	doneN    int
	failedN  int
	changed  chan struct{}
	watchers map[int64]*watcher
}

type watcher struct {
	ch      chan struct{}
	waiting time.Time
	done    time.Time
}

type notification struct {
	P int64  `json:"p"`
	L int64  `json:"l"`
	S string `json:"s"`
}

func listen(ctx context.Context, dbURL string) (*listener, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN dubstudio_lines"); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	l := &listener{conn: conn, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{}), watchers: map[int64]*watcher{}}
	go l.loop(lctx)
	return l, nil
}

func (l *listener) loop(ctx context.Context) {
	defer close(l.done)
	for {
		n, err := l.conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		var m notification
		if json.Unmarshal([]byte(n.Payload), &m) != nil {
			continue
		}
		l.mu.Lock()
		l.count++
		switch m.S {
		case string(studio.StateDone):
			l.doneN++
		case string(studio.StateFailed), string(studio.StateNeedsReview):
			l.failedN++
		}
		if w := l.watchers[m.L]; w != nil {
			switch m.S {
			case string(studio.StateWaitingGPU), string(studio.StateSynthesizing):
				// A line with a free slot goes straight to synthesizing.
				if w.waiting.IsZero() {
					w.waiting = now
				}
			case string(studio.StateDone):
				w.done = now
				delete(l.watchers, m.L)
				close(w.ch)
			}
		}
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
}

func (l *listener) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count, l.doneN, l.failedN = 0, 0, 0
}

func (l *listener) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

func (l *listener) waitDone(ctx context.Context, n int, limit time.Duration) error {
	deadline := time.After(limit)
	for {
		l.mu.Lock()
		got, failed, ch := l.doneN, l.failedN, l.changed
		l.mu.Unlock()
		if got >= n {
			return nil
		}
		if failed > 0 {
			return fmt.Errorf("%d lines failed or need review (run with -v to see why)", failed)
		}
		select {
		case <-ch:
		case <-deadline:
			return fmt.Errorf("only %d of %d lines done after %s", got, n, limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *listener) watch(lineID int64) *watcher {
	w := &watcher{ch: make(chan struct{})}
	l.mu.Lock()
	l.watchers[lineID] = w
	l.mu.Unlock()
	return w
}

func (w *watcher) wait(ctx context.Context, limit time.Duration) (*watcher, error) {
	select {
	case <-w.ch:
		if w.waiting.IsZero() {
			return nil, errors.New("no waiting_gpu or synthesizing notification")
		}
		return w, nil
	case <-time.After(limit):
		return nil, fmt.Errorf("not done after %s", limit)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *listener) close() {
	l.cancel()
	<-l.done
	l.conn.Close(context.Background())
}
