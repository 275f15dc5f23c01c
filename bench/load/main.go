// Command load puts one dubstudio server under the load of many browser-like clients
// while a render runs, on the loopback interface only, and reports the status codes
// and latencies they saw. It stops by itself after -duration.
//
// Each client logs in through the login form (with its CSRF token), opens the project
// page, keeps the page's live-status stream (Server-Sent Events) open, and then, with
// a pause between actions, reloads the page, fetches the line list and the progress
// bar as htmx does, and edits lines inline (the edit form, then the save with the CSRF
// header): mostly notes, sometimes the text, which re-queues the line's render.
//
// By default it starts the server in this process on 127.0.0.1 with a fresh database
// (TEST_DATABASE_URL's server, or -db), an embedded worker on the simulator engine and
// a project being rendered:
//
//	go run ./bench/load
//	go run ./bench/load -clients 100 -duration 60s
//
// or it loads a running server (the project's render is then up to you):
//
//	go run ./bench/load -url http://127.0.0.1:8080 -user alice -password ... -project 3
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/PuerkitoBio/goquery"

	"dubstudio/bench/internal/benchdb"
	"dubstudio/config"
	"dubstudio/internal/simdev"
	"dubstudio/live"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/web"
	"dubstudio/workflow"
)

type options struct {
	url, user, password string
	project             int64
	db                  string
	clients             int
	duration            time.Duration
	think               time.Duration
	lines               int
	permits             int
	jsonOut             bool
	verbose             bool
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "", "load this server (loopback only) instead of starting one")
	flag.StringVar(&o.user, "user", "", "with -url: the user the clients log in as")
	flag.StringVar(&o.password, "password", "", "with -url: that user's password")
	flag.Int64Var(&o.project, "project", 0, "with -url: the project the clients work on")
	flag.StringVar(&o.db, "db", benchdb.Server(), "PostgreSQL server for the fresh database")
	flag.IntVar(&o.clients, "clients", 100, "concurrent browser-like clients")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "how long the clients work; the run stops by itself")
	flag.DurationVar(&o.think, "think", 500*time.Millisecond, "mean pause between a client's actions")
	flag.IntVar(&o.lines, "lines", 400, "lines of the project rendered meanwhile")
	flag.IntVar(&o.permits, "permits", 2, "syntheses the embedded worker runs at once")
	flag.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	flag.BoolVar(&o.verbose, "v", false, "log the server's warnings")
	flag.Parse()
	if o.clients < 1 || o.clients > 1000 || o.duration <= 0 || o.duration > 30*time.Minute {
		fmt.Fprintln(os.Stderr, "load: -clients must be 1..1000 and -duration at most 30m")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	rep, err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	if o.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.print()
	}
	if rep.ServerErrors > 0 || rep.TransportErrors > 0 {
		os.Exit(1)
	}
}

// target is the server under load.
type target struct {
	base       string
	project    int64
	lineIDs    []int64
	user       func(i int) (string, string)
	renderInfo func(ctx context.Context) string
}

func run(ctx context.Context, o options) (*Report, error) {
	level := slog.LevelError + 1
	if o.verbose {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var tg *target
	if o.url != "" {
		var err error
		if tg, err = remoteTarget(ctx, o); err != nil {
			return nil, err
		}
	} else {
		t, stopServer, err := startServer(ctx, o, logger)
		if err != nil {
			return nil, err
		}
		defer stopServer()
		tg = t
	}
	rep := newReport(o)
	runCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := newClient(tg, i, rep, o.think)
			if err != nil {
				rep.fail(fmt.Sprintf("client %d: %v", i, err))
				return
			}
			// Browsers do not all arrive in the same millisecond: spread the logins
			// over the first second.
			sleep(runCtx, time.Duration(rand.Int64N(int64(time.Second))))
			c.run(runCtx)
		}()
	}
	wg.Wait()
	rep.Seconds = time.Since(start).Seconds()
	if tg.renderInfo != nil {
		rep.Render = tg.renderInfo(context.WithoutCancel(ctx))
	}
	rep.finish()
	return rep, nil
}

func remoteTarget(ctx context.Context, o options) (*target, error) {
	u, err := url.Parse(o.url)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return nil, fmt.Errorf("%s is not a loopback address: this load test runs against this machine only", host)
		}
	}
	if o.user == "" || o.password == "" || o.project == 0 {
		return nil, errors.New("with -url, -user, -password and -project are required")
	}
	// The lines to edit are read from the project page by each client.
	return &target{base: strings.TrimRight(o.url, "/"), project: o.project,
		user: func(int) (string, string) { return o.user, o.password }}, nil
}

const benchPassword = "load-test-password-1"

// startServer runs the web app with an embedded worker on a fresh database, as
// `dubstudio serve` does, and starts rendering a project.
func startServer(ctx context.Context, o options, logger *slog.Logger) (*target, func(), error) {
	db, err := benchdb.Fresh(ctx, o.db, "dubstudio_load", false, logger)
	if err != nil {
		return nil, nil, err
	}
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	stops = append(stops, db.Close)
	fail := func(err error) (*target, func(), error) { stopAll(); return nil, nil, err }

	dataDir, err := os.MkdirTemp("", "dubload")
	if err != nil {
		return fail(err)
	}
	stops = append(stops, func() { os.RemoveAll(dataDir) })
	cfg, err := config.LoadFrom(func(k string) (string, bool) {
		switch k {
		case "DATA_DIR":
			return dataDir, true
		case "HTTP_ADDR":
			return "127.0.0.1:0", true
		}
		return "", false
	})
	if err != nil {
		return fail(err)
	}
	cfg.SessionSecret = strings.Repeat("s", 32)
	store, err := studio.NewStore(db.Pool)
	if err != nil {
		return fail(err)
	}

	// Users, and a project whose lines are rendered while the clients work.
	var owner *studio.User
	for i := range o.clients {
		u, err := store.CreateUser(ctx, studio.CreateUserParams{Username: fmt.Sprintf("editor%d", i), Role: studio.RoleEditor, Password: benchPassword})
		if err != nil {
			return fail(err)
		}
		if owner == nil {
			owner = u
		}
	}
	project, err := store.CreateProject(ctx, "Load test", &owner.ID)
	if err != nil {
		return fail(err)
	}
	nl := make([]studio.NewLine, o.lines)
	for i := range nl {
		who := []string{"Alice", "Bob", "Carol"}[i%3]
		nl[i] = studio.NewLine{SourceLine: i + 1, StartMs: i * 2500, EndMs: i*2500 + 1500 + (i%7)*100, CharacterName: who,
			Text: fmt.Sprintf("Line %d: \"quotes\", <tags> & an ampersand, said by %s.", i+1, who)}
	}
	if _, err := store.ImportLines(ctx, owner.ID, project.ID, nl); err != nil {
		return fail(err)
	}
	lines, err := store.AllLines(ctx, project.ID)
	if err != nil {
		return fail(err)
	}
	ids := make([]int64, len(lines))
	for i, l := range lines {
		ids[i] = l.ID
	}

	// Live status, as serve wires it: one LISTEN connection feeding the broker.
	broker := live.NewBroker(live.BrokerConfig{})
	listenCtx, stopListening := context.WithCancel(context.Background())
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		_ = live.NewListener(db.Pool, broker, live.ListenerConfig{Logger: logger}).Run(listenCtx)
	}()
	stops = append(stops, func() { stopListening(); <-listening })

	pipeline, err := workflow.NewPipeline(store, logger)
	if err != nil {
		return fail(err)
	}
	// The simulator at about the pace of a warm IndexTTS-2 host: lines take a few
	// hundred milliseconds each, so states change all through the run.
	sim, err := tts.NewSimulator(tts.SimulatorConfig{Device: simdev.New(24 << 30), TokensPerSecond: 150, FollowTarget: true, Tone: true})
	if err != nil {
		return fail(err)
	}
	worker, err := workflow.NewWorker(pipeline, workflow.NewLocalPermits(sim, o.permits), workflow.WorkerConfig{Name: "load-worker", DataDir: dataDir}, logger)
	if err != nil {
		return fail(err)
	}
	if err := worker.Start(ctx); err != nil {
		return fail(err)
	}
	stops = append(stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = worker.Stop(sctx)
	})

	srv := web.New(web.Deps{Config: cfg, Store: store, Logger: logger, Live: broker, Renderer: pipeline, Exporter: pipeline})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	stops = append(stops, func() {
		srv.StopStreams()
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		<-served
	})

	if _, err := pipeline.RenderPending(ctx, project.ID); err != nil {
		return fail(err)
	}
	return &target{
		base: "http://" + ln.Addr().String(), project: project.ID, lineIDs: ids,
		user: func(i int) (string, string) { return fmt.Sprintf("editor%d", i), benchPassword },
		renderInfo: func(ctx context.Context) string {
			counts, err := store.ProjectStateCounts(ctx, []int64{project.ID})
			if err != nil {
				return err.Error()
			}
			c := counts[project.ID]
			keys := make([]string, 0, len(c))
			for st := range c {
				keys = append(keys, string(st))
			}
			slices.Sort(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = fmt.Sprintf("%s %d", k, c[studio.LineState(k)])
			}
			return strings.Join(parts, ", ")
		},
	}, stopAll, nil
}

// Report is what the clients saw.
type Report struct {
	Clients         int                  `json:"clients"`
	CPUs            int                  `json:"cpus"`
	Seconds         float64              `json:"seconds"`
	Requests        int                  `json:"requests"`
	PerSecond       float64              `json:"requests_per_second"`
	Status          map[int]int          `json:"status"`
	ServerErrors    int                  `json:"server_errors"`
	TransportErrors int                  `json:"transport_errors"`
	All             Quantiles            `json:"all_ms"`
	ByKind          map[string]Quantiles `json:"by_kind_ms"`
	SSE             SSEStats             `json:"sse"`
	Render          string               `json:"render,omitempty"`
	Failures        []string             `json:"failures,omitempty"`

	mu        sync.Mutex
	latencies map[string][]float64
}

// SSEStats describes the live-status streams.
type SSEStats struct {
	Opened int `json:"opened"`
	// FirstByteMs is how long a stream took to answer.
	FirstByteMs Quantiles `json:"first_byte_ms"`
	Events      int64     `json:"events"`
	// Dropped counts streams that ended before the run did (the client reconnects).
	Dropped int `json:"dropped"`
}

// Quantiles of latencies in milliseconds.
type Quantiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func quantiles(ms []float64) Quantiles {
	if len(ms) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	at := func(q float64) float64 { return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)] }
	return Quantiles{N: len(s), P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: s[len(s)-1]}
}

func newReport(o options) *Report {
	return &Report{Clients: o.clients, CPUs: runtime.NumCPU(), Status: map[int]int{}, ByKind: map[string]Quantiles{},
		latencies: map[string][]float64{}}
}

func (r *Report) record(kind string, status int, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.TransportErrors++
		if len(r.Failures) < 20 {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: %v", kind, err))
		}
		return
	}
	r.Requests++
	r.Status[status]++
	if status >= 500 {
		r.ServerErrors++
		if len(r.Failures) < 20 {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: HTTP %d", kind, status))
		}
	}
	r.latencies[kind] = append(r.latencies[kind], float64(d.Microseconds())/1000)
}

func (r *Report) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.TransportErrors++
	if len(r.Failures) < 20 {
		r.Failures = append(r.Failures, msg)
	}
}

func (r *Report) sseOpened(firstByte time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.SSE.Opened++
	r.latencies["sse first byte"] = append(r.latencies["sse first byte"], float64(firstByte.Microseconds())/1000)
}

func (r *Report) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []float64
	for k, v := range r.latencies {
		if k == "sse first byte" {
			r.SSE.FirstByteMs = quantiles(v)
			continue
		}
		r.ByKind[k] = quantiles(v)
		all = append(all, v...)
	}
	r.All = quantiles(all)
	if r.Seconds > 0 {
		r.PerSecond = float64(r.Requests) / r.Seconds
	}
}

func (r *Report) print() {
	fmt.Printf("%d clients for %.0f s on %d CPUs: %d requests (%.0f/s), status %v, %d server errors, %d transport errors\n",
		r.Clients, r.Seconds, r.CPUs, r.Requests, r.PerSecond, r.Status, r.ServerErrors, r.TransportErrors)
	fmt.Printf("all requests: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms\n", r.All.P50, r.All.P95, r.All.P99, r.All.Max)
	kinds := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		q := r.ByKind[k]
		fmt.Printf("  %-14s n=%-6d p50 %7.1f ms  p95 %7.1f ms  p99 %7.1f ms  max %7.1f ms\n", k, q.N, q.P50, q.P95, q.P99, q.Max)
	}
	fmt.Printf("SSE: %d streams opened (first byte p50 %.1f ms, p95 %.1f ms), %d events received, %d dropped\n",
		r.SSE.Opened, r.SSE.FirstByteMs.P50, r.SSE.FirstByteMs.P95, r.SSE.Events, r.SSE.Dropped)
	if r.Render != "" {
		fmt.Printf("render at the end: %s\n", r.Render)
	}
	for _, f := range r.Failures {
		fmt.Println("  failure:", f)
	}
}

// client is one browser: its own connections and cookies.
type client struct {
	i      int
	tg     *target
	rep    *Report
	think  time.Duration
	hc     *http.Client
	csrf   string
	lines  []int64
	events atomic.Int64
}

func newClient(tg *target, i int, rep *Report, think time.Duration) (*client, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 6, IdleConnTimeout: time.Minute, DisableCompression: true}
	c := &client{i: i, tg: tg, rep: rep, think: think, hc: &http.Client{Jar: jar, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	// Each client edits its own lines, as editors split a script between them.
	for j := i; j < len(tg.lineIDs); j += max(rep.Clients, 1) {
		c.lines = append(c.lines, tg.lineIDs[j])
	}
	return c, nil
}

var (
	csrfHeadersRe = regexp.MustCompile(`hx-headers="([^"]*)"`)
	lineRowRe     = regexp.MustCompile(`/projects/\d+/lines/(\d+)/edit`)
)

// do sends one request and records it under kind; the body is read whole, as a
// browser does, and returned for requests that need it.
func (c *client) do(ctx context.Context, kind, method, path string, form url.Values, htmx bool) (int, []byte, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.tg.base+path, body)
	if err != nil {
		return 0, nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "text/html")
	if htmx {
		req.Header.Set("HX-Request", "true")
		if c.csrf != "" {
			req.Header.Set("X-CSRF-Token", c.csrf)
		}
	}
	t0 := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err() // the run ended: not the server's fault
		}
		c.rep.record(kind, 0, 0, err)
		return 0, nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil && ctx.Err() != nil {
		return 0, nil, ctx.Err()
	}
	c.rep.record(kind, resp.StatusCode, time.Since(t0), err)
	return resp.StatusCode, data, err
}

// visit makes a request whose outcome only the report needs: do records it there.
func (c *client) visit(ctx context.Context, kind, method, path string, form url.Values, htmx bool) {
	_, _, _ = c.do(ctx, kind, method, path, form, htmx)
}

func (c *client) run(ctx context.Context) {
	if err := c.login(ctx); err != nil {
		if ctx.Err() == nil {
			c.rep.fail(fmt.Sprintf("client %d login: %v", c.i, err))
		}
		return
	}
	project := fmt.Sprintf("/projects/%d", c.tg.project)
	status, page, err := c.do(ctx, "project page", "GET", project, nil, false)
	if err != nil || status != http.StatusOK {
		if ctx.Err() == nil {
			c.rep.fail(fmt.Sprintf("client %d: project page: %d %v", c.i, status, err))
		}
		return
	}
	if err := c.readCSRF(page); err != nil {
		c.rep.fail(fmt.Sprintf("client %d: %v", c.i, err))
		return
	}
	if len(c.lines) == 0 {
		for _, m := range lineRowRe.FindAllSubmatch(page, -1) {
			id, err := strconv.ParseInt(string(m[1]), 10, 64)
			if err != nil {
				c.rep.fail(fmt.Sprintf("client %d: line id %q: %v", c.i, m[1], err))
				return
			}
			c.lines = append(c.lines, id)
		}
	}
	var sse sync.WaitGroup
	sse.Add(1)
	go func() { defer sse.Done(); c.stream(ctx, project+"/events") }()
	defer func() {
		sse.Wait()
		c.rep.mu.Lock()
		c.rep.SSE.Events += c.events.Load()
		c.rep.mu.Unlock()
	}()

	for ctx.Err() == nil {
		sleep(ctx, time.Duration(rand.ExpFloat64()*float64(c.think)))
		if ctx.Err() != nil {
			return
		}
		switch x := rand.IntN(100); {
		case x < 25:
			c.visit(ctx, "project page", "GET", project, nil, false)
		case x < 40:
			c.visit(ctx, "line list", "GET", fmt.Sprintf("%s/lines?page=%d", project, 1+rand.IntN(4)), nil, true)
		case x < 55:
			c.visit(ctx, "progress", "GET", project+"/progress", nil, true)
		default:
			c.edit(ctx, project)
		}
	}
}

func (c *client) login(ctx context.Context) error {
	status, page, err := c.do(ctx, "login form", "GET", "/login", nil, false)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("login form: HTTP %d", status)
	}
	d, err := goquery.NewDocumentFromReader(strings.NewReader(string(page)))
	if err != nil {
		return err
	}
	token, _ := d.Find(`form input[name=_csrf]`).Attr("value")
	user, password := c.tg.user(c.i)
	status, _, err = c.do(ctx, "login", "POST", "/login", url.Values{"_csrf": {token}, "username": {user}, "password": {password}}, false)
	if err != nil {
		return err
	}
	if status != http.StatusSeeOther {
		return fmt.Errorf("login: HTTP %d", status)
	}
	return nil
}

func (c *client) readCSRF(page []byte) error {
	m := csrfHeadersRe.FindSubmatch(page)
	if m == nil {
		return errors.New("no hx-headers on the project page")
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(htmlUnescape(string(m[1]))), &h); err != nil {
		return fmt.Errorf("hx-headers: %w", err)
	}
	c.csrf = h["X-CSRF-Token"]
	if c.csrf == "" {
		return errors.New("no CSRF token in hx-headers")
	}
	return nil
}

func htmlUnescape(s string) string {
	d, err := goquery.NewDocumentFromReader(strings.NewReader("<p>" + s + "</p>"))
	if err != nil {
		return s
	}
	return d.Find("p").Text()
}

// edit opens a line's inline form and saves it: usually a new note, sometimes new
// text (which re-queues the line's render).
func (c *client) edit(ctx context.Context, project string) {
	if len(c.lines) == 0 {
		return
	}
	id := c.lines[rand.IntN(len(c.lines))]
	path := fmt.Sprintf("%s/lines/%d", project, id)
	status, form, err := c.do(ctx, "edit form", "GET", path+"/edit", nil, true)
	if err != nil || status != http.StatusOK {
		return
	}
	d, err := goquery.NewDocumentFromReader(strings.NewReader(string(form)))
	if err != nil {
		return
	}
	v := url.Values{}
	d.Find("form input[name], form textarea[name], form select[name]").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		switch {
		case goquery.NodeName(s) == "textarea":
			v.Set(name, s.Text())
		case goquery.NodeName(s) == "select":
			val, _ := s.Find("option[selected]").Attr("value")
			v.Set(name, val)
		default:
			typ, _ := s.Attr("type")
			if typ == "checkbox" {
				if _, on := s.Attr("checked"); !on {
					return
				}
			}
			val, _ := s.Attr("value")
			v.Set(name, val)
		}
	})
	if v.Get("base_revision") == "" {
		return
	}
	if rand.IntN(10) < 8 {
		v.Set("notes", fmt.Sprintf("note %d from client %d", rand.IntN(1000), c.i))
	} else {
		v.Set("text", fmt.Sprintf("Edited by client %d <again> & again, \"take %d\".", c.i, rand.IntN(1000)))
	}
	c.visit(ctx, "save line", "POST", path, v, true)
}

// stream keeps the project's live-status stream open until ctx ends, counting events,
// and reconnects with Last-Event-ID if the server ends it, as a browser does.
func (c *client) stream(ctx context.Context, path string) {
	last := ""
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.tg.base+path, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		t0 := time.Now()
		resp, err := c.hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				c.rep.record("sse", 0, 0, err)
			}
			return
		}
		if resp.StatusCode != http.StatusOK {
			c.rep.record("sse", resp.StatusCode, time.Since(t0), nil)
			resp.Body.Close()
			return
		}
		c.rep.sseOpened(time.Since(t0))
		buf := make([]byte, 32<<10)
		var pending string
		for {
			n, err := resp.Body.Read(buf)
			pending += string(buf[:n])
			for {
				i := strings.Index(pending, "\n\n")
				if i < 0 {
					break
				}
				ev := pending[:i]
				pending = pending[i+2:]
				for l := range strings.SplitSeq(ev, "\n") {
					if id, ok := strings.CutPrefix(l, "id: "); ok {
						last = id
						c.events.Add(1)
					}
				}
			}
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		if ctx.Err() != nil {
			return
		}
		c.rep.mu.Lock()
		c.rep.SSE.Dropped++
		c.rep.mu.Unlock()
		sleep(ctx, 2*time.Second) // the server's retry hint
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
