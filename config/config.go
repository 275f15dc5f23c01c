// Package config reads dubstudio's configuration from environment variables.
//
// Every option lives in one table (options) with its default, its parser and its
// validation, so that `dubstudio help` and the error messages always agree with the
// code. Secrets also accept a NAME_FILE variant that names a file holding the value.
package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config is the typed, validated configuration of one dubstudio process.
type Config struct {
	DatabaseURL     string
	HTTPAddr        string
	BaseURL         string
	DataDir         string
	SessionSecret   string
	SessionTTL      time.Duration
	Worker          bool
	WorkerName      string
	Engine          string
	EngineURL       string
	MaxUploadBytes  int64
	LogLevel        string
	DemoProject     bool
	OOMRetries      int
	LoginMaxFails   int
	LoginFailWindow time.Duration

	// GPU engines (ENGINE=indextts, bench, or auto on a machine with a GPU).
	HostsDir             string   // directory of the Python model hosts
	HostPython           string   // interpreter that runs them
	IndexTTSDir          string   // index-tts checkout, added to the hosts' PYTHONPATH
	IndexTTSModelDir     string   // checkpoints; auto picks IndexTTS only when set
	IndexTTSVariant      string   // "2" or "2.5"
	IndexTTSModelVersion string   // cache key of the weights
	GPUs                 []string // GPU indices or UUIDs to use; empty: all
	MetricsToken         string   // bearer token for /metrics; empty: admins only
	// HostStartTimeout bounds a model host's start to its model loaded,
	// HostHealthTimeout one health check, HostStopTimeout a graceful stop.
	HostStartTimeout, HostHealthTimeout, HostStopTimeout time.Duration

	// SourceMaxUploadBytes bounds a project's source upload (a video of the whole
	// programme is much larger than a voice reference).
	SourceMaxUploadBytes int64

	// MaxLineMs is the longest a line may last (MAX_LINE_SECONDS), on import, edit
	// and render; MaxExportMs the longest programme an export accepts
	// (MAX_EXPORT_SECONDS).
	MaxLineMs   int
	MaxExportMs int

	// RenderFirstLines is the most lines a render request may have and still go
	// ahead of bulk renders in the queue (RENDER_FIRST_LINES; 0: none does).
	RenderFirstLines int

	// WorkerConcurrency is how many syntheses a worker runs at once on a CPU or HTTP
	// engine (WORKER_CONCURRENCY; 0: the engine's default).
	WorkerConcurrency int

	// TrustedProxies are the proxies whose X-Forwarded-For names the client
	// (TRUSTED_PROXIES); without them the client is the connection's address.
	TrustedProxies []*net.IPNet

	// Upload checks: a reference voice's length (REFERENCE_MIN_SECONDS,
	// REFERENCE_MAX_SECONDS), a source's (SOURCE_MAX_SECONDS) and the free space an
	// extraction must leave (MIN_FREE_MB).
	ReferenceMinMs, ReferenceMaxMs, SourceMaxMs int
	MinFreeBytes                                int64

	// MaxFormBytes bounds the body of every request that uploads no file (MAX_FORM_KB).
	MaxFormBytes int64

	// MaxScriptBytes bounds an imported script file (MAX_SCRIPT_MB).
	MaxScriptBytes int64

	// A source video's proxy: its largest height (PROXY_HEIGHT), x264's quality
	// (PROXY_CRF), ffmpeg's threads (PROXY_THREADS, 0: one per core) and how long one
	// transcoding may run (PROXY_TIMEOUT_SECONDS).
	ProxyHeight, ProxyCRF, ProxyThreads int
	ProxyTimeout                        time.Duration

	// TimelineMaxLines is the most lines the editor's timeline draws
	// (TIMELINE_MAX_LINES): the first ones, with a notice for the rest.
	TimelineMaxLines int
	// The blob collector: how often it runs (BLOB_GC_INTERVAL) and how old a blob
	// nothing refers to must be before it goes (BLOB_GC_GRACE).
	BlobGCInterval, BlobGCGrace time.Duration
	// BedMixLUFS is the integrated loudness (EBU R128) an export's mix over the M&E
	// bed is brought to (BED_MIX_LUFS).
	BedMixLUFS int
	// The ducking of the bed under the dialogue, in the export's mix over the bed and
	// in the preview (audio.DuckParams): the dialogue's level above which the bed
	// goes down (BED_DUCK_THRESHOLD_DB), how hard (BED_DUCK_RATIO), how fast
	// (BED_DUCK_ATTACK_MS) and how slowly it comes back (BED_DUCK_RELEASE_MS).
	BedDuckThresholdDB, BedDuckRatio, BedDuckAttackMs, BedDuckReleaseMs float64
}

type option struct {
	name string
	def  string
	// defHelp describes the default where def alone would not say it: a value computed
	// at start-up, or what an empty value means. Help shows it instead of def.
	defHelp string
	secret  bool
	help    string
	setFunc func(c *Config, v string) error
}

var options = []option{
	{name: "DATABASE_URL", def: "postgres://root@127.0.0.1:5432/dubstudio?sslmode=disable", help: "PostgreSQL connection URL",
		setFunc: func(c *Config, v string) error {
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
				return errors.New("must be a postgres:// URL")
			}
			c.DatabaseURL = v
			return nil
		}},
	{name: "HTTP_ADDR", def: "127.0.0.1:8080", help: "address the web server listens on",
		setFunc: func(c *Config, v string) error {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("must be host:port: %w", err)
			}
			c.HTTPAddr = v
			return nil
		}},
	{name: "BASE_URL", def: "", defHelp: "http://HTTP_ADDR", help: "public URL of the web app, for links printed on the console",
		setFunc: func(c *Config, v string) error { c.BaseURL = strings.TrimRight(v, "/"); return nil }},
	{name: "DATA_DIR", def: "./data", help: "directory for audio, caches and the private Postgres cluster",
		setFunc: func(c *Config, v string) error {
			if v == "" {
				return errors.New("must not be empty")
			}
			abs, err := filepath.Abs(v)
			if err != nil {
				return err
			}
			c.DataDir = abs
			return nil
		}},
	{name: "SESSION_SECRET", def: "", secret: true, defHelp: "generated once into DATA_DIR/session.secret", help: "secret mixed into session and CSRF tokens (at least 32 characters)",
		setFunc: func(c *Config, v string) error {
			if v != "" && len(v) < 32 {
				return errors.New("must be at least 32 characters")
			}
			c.SessionSecret = v
			return nil
		}},
	{name: "SESSION_TTL", def: "168h", help: "how long a login lasts without activity",
		setFunc: func(c *Config, v string) error { return setDuration(&c.SessionTTL, v, time.Minute) }},
	{name: "WORKER", def: "true", help: "run an embedded worker inside `serve`",
		setFunc: func(c *Config, v string) error { return setBool(&c.Worker, v) }},
	{name: "WORKER_NAME", def: "", defHelp: "host name-process id", help: "name this worker registers under",
		setFunc: func(c *Config, v string) error { c.WorkerName = v; return nil }},
	{name: "ENGINE", def: "auto", help: "speech engine of the worker: auto (IndexTTS on a machine with an NVIDIA GPU when INDEXTTS_MODEL_DIR is set, else the CPU preview engine), indextts, bench (random weights, for GPU benchmarks), espeak, simulator (a simulated GPU), http",
		setFunc: func(c *Config, v string) error {
			switch v {
			case "auto", "espeak", "simulator", "http", "indextts", "bench":
				c.Engine = v
				return nil
			}
			return errors.New("must be one of auto, indextts, bench, espeak, simulator, http")
		}},
	{name: "DUBSTUDIO_HOSTS_DIR", def: "tts/hosts", help: "directory of the Python model hosts (indextts_host.py, bench_host.py)",
		setFunc: func(c *Config, v string) error {
			if v == "" {
				return errors.New("must not be empty")
			}
			c.HostsDir = v
			return nil
		}},
	{name: "HOST_PYTHON", def: "python3", help: "Python interpreter that runs the GPU model hosts (for IndexTTS, its virtual environment's python)",
		setFunc: func(c *Config, v string) error {
			if v == "" {
				return errors.New("must not be empty")
			}
			c.HostPython = v
			return nil
		}},
	{name: "HOST_START_TIMEOUT", def: "10m", help: "how long a GPU model host (a pool's or a calibration's) may take from its start to its model loaded before it is killed; a pool starts it again",
		setFunc: func(c *Config, v string) error { return setDuration(&c.HostStartTimeout, v, 10*time.Second) }},
	{name: "HOST_HEALTH_TIMEOUT", def: "5s", help: "how long one health check of a model host may take; three failures in a row restart the host",
		setFunc: func(c *Config, v string) error { return setDuration(&c.HostHealthTimeout, v, time.Second) }},
	{name: "HOST_STOP_TIMEOUT", def: "30s", help: "how long a model host may take to exit once asked to stop (SIGTERM, after its lines are done) before it is killed",
		setFunc: func(c *Config, v string) error { return setDuration(&c.HostStopTimeout, v, time.Second) }},
	{name: "INDEXTTS_DIR", def: "", defHelp: "none (index-tts is installed in HOST_PYTHON)", help: "index-tts checkout, put on the model hosts' PYTHONPATH",
		setFunc: func(c *Config, v string) error { c.IndexTTSDir = v; return nil }},
	{name: "INDEXTTS_MODEL_DIR", def: "", defHelp: "none", help: "IndexTTS checkpoint directory (ENGINE=indextts; ENGINE=auto uses IndexTTS on a GPU only when it is set)",
		setFunc: func(c *Config, v string) error { c.IndexTTSModelDir = v; return nil }},
	{name: "INDEXTTS_VARIANT", def: "2", help: "IndexTTS release: 2 or 2.5",
		setFunc: func(c *Config, v string) error {
			if v != "2" && v != "2.5" {
				return errors.New("must be 2 or 2.5")
			}
			c.IndexTTSVariant = v
			return nil
		}},
	{name: "INDEXTTS_MODEL_VERSION", def: "", defHelp: "IndexTTS-INDEXTTS_VARIANT", help: "version string of the weights, used in speaker cache keys: change it when the weights change",
		setFunc: func(c *Config, v string) error { c.IndexTTSModelVersion = v; return nil }},
	{name: "GPUS", def: "all", help: "GPUs a worker uses: all, or indices and UUIDs separated by commas",
		setFunc: func(c *Config, v string) error {
			c.GPUs = nil
			if v == "all" || v == "" {
				return nil
			}
			for _, g := range strings.Split(v, ",") {
				if g = strings.TrimSpace(g); g != "" {
					c.GPUs = append(c.GPUs, g)
				}
			}
			return nil
		}},
	{name: "METRICS_TOKEN", def: "", secret: true, defHelp: "none (only an admin's session can read /metrics)", help: "bearer token Prometheus sends to read /metrics",
		setFunc: func(c *Config, v string) error {
			if v != "" && len(v) < 16 {
				return errors.New("must be at least 16 characters")
			}
			c.MetricsToken = v
			return nil
		}},
	{name: "ENGINE_URL", def: "", defHelp: "none", help: "URL of an external index-tts-vllm server (ENGINE=http)",
		setFunc: func(c *Config, v string) error {
			if v != "" {
				u, err := url.Parse(v)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return errors.New("must be an http:// or https:// URL")
				}
			}
			c.EngineURL = v
			return nil
		}},
	{name: "WORKER_CONCURRENCY", def: "0", defHelp: "0 (the number of CPUs, or 8 on an HTTP engine)", help: "syntheses a worker runs at once on a CPU or HTTP engine",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 256 {
				return errors.New("must be a whole number between 0 and 256")
			}
			c.WorkerConcurrency = n
			return nil
		}},
	{name: "MAX_UPLOAD_MB", def: "50", help: "largest accepted upload in MiB",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 4096 {
				return errors.New("must be a whole number of MiB between 1 and 4096")
			}
			c.MaxUploadBytes = int64(n) << 20
			return nil
		}},
	{name: "SOURCE_MAX_UPLOAD_MB", def: "2048", help: "largest accepted source audio or video of a project in MiB (its sound track is extracted; a video is kept too, for its proxy)",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65536 {
				return errors.New("must be a whole number of MiB between 1 and 65536")
			}
			c.SourceMaxUploadBytes = int64(n) << 20
			return nil
		}},
	{name: "TRUSTED_PROXIES", def: "", defHelp: "none (the client is the connection's address; X-Forwarded-For is ignored)", help: "addresses or CIDR ranges of reverse proxies whose X-Forwarded-For is believed, separated by commas",
		setFunc: func(c *Config, v string) error {
			c.TrustedProxies = nil
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f == "" {
					continue
				}
				if !strings.Contains(f, "/") {
					if ip := net.ParseIP(f); ip != nil && ip.To4() != nil {
						f += "/32"
					} else {
						f += "/128"
					}
				}
				_, n, err := net.ParseCIDR(f)
				if err != nil {
					return fmt.Errorf("%q is not an address or CIDR range", f)
				}
				c.TrustedProxies = append(c.TrustedProxies, n)
			}
			return nil
		}},
	{name: "REFERENCE_MIN_SECONDS", def: "3", help: "shortest accepted reference voice or emotion reference, in seconds",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 60 {
				return errors.New("must be a whole number between 1 and 60")
			}
			c.ReferenceMinMs = n * 1000
			return nil
		}},
	{name: "REFERENCE_MAX_SECONDS", def: "30", help: "longest accepted reference voice or emotion reference, in seconds (IndexTTS uses the first 15 s)",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 600 {
				return errors.New("must be a whole number between 1 and 600")
			}
			c.ReferenceMaxMs = n * 1000
			return nil
		}},
	{name: "SOURCE_MAX_SECONDS", def: "14400", help: "longest accepted project source (audio or video), in seconds: its sound track is stored as a 48 kHz WAV",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 60 || n > 86400 {
				return errors.New("must be a whole number between 60 and 86400")
			}
			c.SourceMaxMs = n * 1000
			return nil
		}},
	{name: "MIN_FREE_MB", def: "1024", help: "free space in MiB the data directory must keep after a source's extraction; one that would leave less is refused",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1048576 {
				return errors.New("must be a whole number between 1 and 1048576")
			}
			c.MinFreeBytes = int64(n) << 20
			return nil
		}},
	{name: "PROXY_HEIGHT", def: "480", help: "largest height in pixels of a source video's browser proxy (H.264/AAC MP4; a smaller video keeps its own)",
		setFunc: func(c *Config, v string) error { return setInt(&c.ProxyHeight, v, 144, 1080) }},
	{name: "PROXY_CRF", def: "28", help: "x264 quality of the video proxy (constant rate factor: higher is smaller and blurrier)",
		setFunc: func(c *Config, v string) error { return setInt(&c.ProxyCRF, v, 18, 40) }},
	{name: "PROXY_THREADS", def: "0", help: "ffmpeg threads of one proxy transcoding (0: about one per core)",
		setFunc: func(c *Config, v string) error { return setInt(&c.ProxyThreads, v, 0, 64) }},
	{name: "PROXY_TIMEOUT_SECONDS", def: "7200", help: "longest one proxy transcoding may run before it is retried",
		setFunc: func(c *Config, v string) error {
			var n int
			if err := setInt(&n, v, 60, 86400); err != nil {
				return err
			}
			c.ProxyTimeout = time.Duration(n) * time.Second
			return nil
		}},
	{name: "MAX_SCRIPT_MB", def: "16", help: "largest script file an import accepts, in MiB (20,000 cues take about 2 MiB)",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1024 {
				return errors.New("must be a whole number of MiB between 1 and 1024")
			}
			c.MaxScriptBytes = int64(n) << 20
			return nil
		}},
	{name: "MAX_FORM_KB", def: "1024", help: "largest accepted body of a request that uploads no file, in KiB (uploads have MAX_UPLOAD_MB and SOURCE_MAX_UPLOAD_MB)",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 16 || n > 65536 {
				return errors.New("must be a whole number of KiB between 16 and 65536")
			}
			c.MaxFormBytes = int64(n) << 10
			return nil
		}},
	{name: "MAX_LINE_SECONDS", def: "60", help: "longest a line may last (end - start), refused on import, edit and render; at most 600",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 600 {
				return errors.New("must be a whole number of seconds between 1 and 600")
			}
			c.MaxLineMs = n * 1000
			return nil
		}},
	{name: "RENDER_FIRST_LINES", def: "3", help: "a render request of at most this many lines (a retake, an edited line) goes ahead of the bulk renders waiting; 0: every request waits its turn",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 1000 {
				return errors.New("must be a whole number of lines between 0 and 1000")
			}
			c.RenderFirstLines = n
			return nil
		}},
	{name: "MAX_EXPORT_SECONDS", def: "14400", help: "longest programme an export accepts (the last line's end or the source's, whichever is later)",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 60 || n > 86400 {
				return errors.New("must be a whole number of seconds between 60 and 86400")
			}
			c.MaxExportMs = n * 1000
			return nil
		}},
	{name: "LOG_LEVEL", def: "info", help: "debug, info, warn or error",
		setFunc: func(c *Config, v string) error {
			switch v {
			case "debug", "info", "warn", "error":
				c.LogLevel = v
				return nil
			}
			return errors.New("must be debug, info, warn or error")
		}},
	{name: "DEMO_PROJECT", def: "true", help: "create a demo project on first run",
		setFunc: func(c *Config, v string) error { return setBool(&c.DemoProject, v) }},
	{name: "OOM_RETRIES", def: "1", help: "times a line is retried after CUDA out-of-memory",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 10 {
				return errors.New("must be a whole number between 0 and 10")
			}
			c.OOMRetries = n
			return nil
		}},
	{name: "LOGIN_MAX_FAILS", def: "5", help: "failed logins per user name and address before a pause",
		setFunc: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return errors.New("must be a whole number of at least 1")
			}
			c.LoginMaxFails = n
			return nil
		}},
	{name: "LOGIN_FAIL_WINDOW", def: "15m", help: "window in which failed logins are counted",
		setFunc: func(c *Config, v string) error { return setDuration(&c.LoginFailWindow, v, time.Second) }},
	{name: "TIMELINE_MAX_LINES", def: "2000", help: "most lines the editor's timeline under the picture draws, each with its take's waveform (the first ones; the script lists them all)",
		setFunc: func(c *Config, v string) error { return setInt(&c.TimelineMaxLines, v, 10, 20000) }},
	{name: "BLOB_GC_INTERVAL", def: "6h", help: "how often the collector of unreferenced blobs runs",
		setFunc: func(c *Config, v string) error { return setDuration(&c.BlobGCInterval, v, time.Minute) }},
	{name: "BLOB_GC_GRACE", def: "24h", help: "how old a blob nothing refers to must be (its row and its file) before the collector removes it; longer than any upload or render",
		setFunc: func(c *Config, v string) error { return setDuration(&c.BlobGCGrace, v, time.Hour) }},
	{name: "BED_MIX_LUFS", def: "-23", help: "integrated loudness (LUFS, EBU R128) of an export's mix of the dialogue over the M&E bed; -23 is EBU R128 broadcast, -24 ATSC A/85, -16 streaming",
		setFunc: func(c *Config, v string) error { return setInt(&c.BedMixLUFS, v, -31, -10) }},
	{name: "BED_DUCK_THRESHOLD_DB", def: "-34", help: "the dialogue's level (dBFS, RMS) above which the M&E bed is ducked under it, in the export's mix over the bed and the preview; lower ducks quieter speech too",
		setFunc: func(c *Config, v string) error { return setFloat(&c.BedDuckThresholdDB, v, -60, -1) }},
	{name: "BED_DUCK_RATIO", def: "4", help: "how hard the bed is ducked: N dB of dialogue over the threshold turn the bed down by N-N/ratio dB (1: not at all, 20: nearly to the threshold)",
		setFunc: func(c *Config, v string) error { return setFloat(&c.BedDuckRatio, v, 1, 20) }},
	{name: "BED_DUCK_ATTACK_MS", def: "20", help: "how fast (ms) the bed goes down when a line starts",
		setFunc: func(c *Config, v string) error { return setFloat(&c.BedDuckAttackMs, v, 1, 2000) }},
	{name: "BED_DUCK_RELEASE_MS", def: "400", help: "how slowly (ms) the bed comes back after a line (or a pause in one)",
		setFunc: func(c *Config, v string) error { return setFloat(&c.BedDuckReleaseMs, v, 10, 9000) }},
}

// Load reads the configuration from the process environment.
func Load() (*Config, error) { return LoadFrom(os.LookupEnv) }

// LoadFrom reads the configuration through lookup, which is os.LookupEnv outside tests.
// All problems are reported together, one per line.
func LoadFrom(lookup func(string) (string, bool)) (*Config, error) {
	c := &Config{}
	var problems []string
	for _, o := range options {
		v, ok := lookup(o.name)
		if o.secret {
			if path, okFile := lookup(o.name + "_FILE"); okFile && path != "" {
				if ok {
					problems = append(problems, fmt.Sprintf("%s and %s_FILE are both set: use one", o.name, o.name))
					continue
				}
				b, err := os.ReadFile(path)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s_FILE: %v", o.name, err))
					continue
				}
				v, ok = strings.TrimSpace(string(b)), true
			}
		}
		if !ok {
			v = o.def
		}
		if err := o.setFunc(c, strings.TrimSpace(v)); err != nil {
			problems = append(problems, fmt.Sprintf("%s=%q: %v", o.name, shown(o, v), err))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("invalid configuration:\n  %s", strings.Join(problems, "\n  "))
	}
	if c.Engine == "http" && c.EngineURL == "" {
		return nil, errors.New("invalid configuration:\n  ENGINE=http needs ENGINE_URL")
	}
	if c.Engine == "indextts" && c.IndexTTSModelDir == "" {
		return nil, errors.New("invalid configuration:\n  ENGINE=indextts needs INDEXTTS_MODEL_DIR")
	}
	if c.IndexTTSModelVersion == "" {
		c.IndexTTSModelVersion = "IndexTTS-" + c.IndexTTSVariant
	}
	if c.ReferenceMinMs > c.ReferenceMaxMs {
		return nil, errors.New("invalid configuration:\n  REFERENCE_MIN_SECONDS must not be above REFERENCE_MAX_SECONDS")
	}
	if c.BaseURL == "" {
		c.BaseURL = "http://" + c.HTTPAddr
	}
	if c.WorkerName == "" {
		host, _ := os.Hostname()
		c.WorkerName = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return c, nil
}

// Help describes every option once, with its default, for `dubstudio help`.
func Help() string {
	var b strings.Builder
	sorted := append([]option(nil), options...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	for _, o := range sorted {
		def := o.def
		if o.defHelp != "" {
			def = o.defHelp
		}
		fmt.Fprintf(&b, "  %-23s %s [default: %s]\n", o.name, o.help, def)
	}
	return b.String()
}

func shown(o option, v string) string {
	if o.secret {
		return "***"
	}
	return v
}

// setInt parses a whole number between lo and hi into dst.
func setInt(dst *int, v string, lo, hi int) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return fmt.Errorf("must be a whole number between %d and %d", lo, hi)
	}
	*dst = n
	return nil
}

func setFloat(dst *float64, v string, lo, hi float64) error {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(n) || n < lo || n > hi {
		return fmt.Errorf("must be a number between %g and %g", lo, hi)
	}
	*dst = n
	return nil
}

func setBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("must be true or false")
	}
	*dst = b
	return nil
}

func setDuration(dst *time.Duration, v string, least time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < least {
		return fmt.Errorf("must be a duration of at least %s, like 15m or 24h", least)
	}
	*dst = d
	return nil
}

// EnsureSessionSecret fills SessionSecret from DATA_DIR/session.secret when the
// environment gave none, generating that file (mode 0600) on first run.
func (c *Config) EnsureSessionSecret() error {
	if c.SessionSecret != "" {
		return nil
	}
	path := filepath.Join(c.DataDir, "session.secret")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		c.SessionSecret = strings.TrimSpace(string(b))
		return nil
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("error creating DATA_DIR: %w", err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	c.SessionSecret = hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(c.SessionSecret+"\n"), 0o600); err != nil {
		return fmt.Errorf("error writing %s: %w", path, err)
	}
	return nil
}
