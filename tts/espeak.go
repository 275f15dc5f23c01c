package tts

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Espeak is the CPU preview engine: real speech from espeak-ng, a voice per
// character, no GPU and no voice cloning. It is the default on a machine without an
// NVIDIA driver, so the whole product works on a laptop.
type Espeak struct {
	bin         string
	concurrency int
	once        sync.Once
	version     string
	versionErr  error
}

// EspeakConfig configures the espeak-ng engine.
type EspeakConfig struct {
	// Binary is the espeak-ng executable (default "espeak-ng" on PATH).
	Binary string
	// Concurrency is how many syntheses run at once (default: the number of CPUs).
	Concurrency int
}

// NewEspeak makes the espeak-ng engine.
func NewEspeak(cfg EspeakConfig) *Espeak {
	if cfg.Binary == "" {
		cfg.Binary = "espeak-ng"
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = runtime.NumCPU()
	}
	return &Espeak{bin: cfg.Binary, concurrency: cfg.Concurrency}
}

// espeakWPM is espeak-ng's default speed in words per minute.
const espeakWPM = 175

var voiceRe = regexp.MustCompile(`^[a-z]{2,3}(-[a-z0-9]+)*$`)

// Name implements Engine.
func (e *Espeak) Name() string { return "espeak" }

// Info implements Engine.
func (e *Espeak) Info(ctx context.Context) (HostInfo, error) {
	e.once.Do(func() {
		out, err := exec.CommandContext(ctx, e.bin, "--version").Output()
		if err != nil {
			e.versionErr = &Error{Code: CodeUnavailable, Message: "espeak-ng is not installed", Err: err}
			return
		}
		e.version = strings.TrimSpace(string(out))
	})
	if e.versionErr != nil {
		e.once = sync.Once{}
		return HostInfo{}, e.versionErr
	}
	return HostInfo{Model: "espeak-ng", Version: versionWord(e.version), Concurrency: e.concurrency,
		SampleRate: 22050, DurationControl: true, Deterministic: true}, nil
}

func versionWord(s string) string {
	for _, f := range strings.Fields(s) {
		if len(f) > 0 && f[0] >= '0' && f[0] <= '9' {
			return "espeak-ng-" + f
		}
	}
	return "espeak-ng"
}

// PrepareSpeaker implements Engine: espeak-ng has no speaker conditioning.
func (e *Espeak) PrepareSpeaker(context.Context, PrepareRequest) (PrepareResult, error) {
	return PrepareResult{}, nil
}

// Synthesize implements Engine. The text goes to espeak-ng on standard input, never on
// its command line; DurationFactor sets the speaking rate.
func (e *Espeak) Synthesize(ctx context.Context, req Request) (Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return Result{}, err
	}
	voice := req.Speaker.Voice
	if voice == "" {
		voice = "en"
		if GuessLanguage(req.Text) == "zh" {
			voice = "cmn"
		}
	}
	if !voiceRe.MatchString(voice) {
		return Result{}, invalidf("unknown espeak-ng voice %q", voice)
	}
	wpm := espeakWPM
	factor := 1.0
	if req.DurationFactor > 0 {
		factor = req.DurationFactor
		wpm = int(float64(espeakWPM)/factor + 0.5)
	}
	wpm = min(max(wpm, 80), 450)
	start := time.Now()
	cmd := exec.CommandContext(ctx, e.bin, "-v", voice, "-s", fmt.Sprint(wpm), "-w", req.OutputPath, "--stdin")
	cmd.Stdin = strings.NewReader(req.Text)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "voice does not exist") {
			return Result{}, invalidf("unknown espeak-ng voice %q", voice)
		}
		return Result{}, &Error{Code: CodeInternal, Message: msg, Err: err}
	}
	info, err := ReadWAVInfo(req.OutputPath)
	if err != nil {
		return Result{}, &Error{Code: CodeInternal, Message: "espeak-ng wrote no audio", Err: err}
	}
	total := time.Since(start).Seconds()
	return Result{Engine: e.Name(), ModelVersion: versionWord(e.version), OutputPath: req.OutputPath,
		SampleRate: info.SampleRate, AudioSeconds: info.Seconds, Stages: map[string]float64{"total": total},
		DurationFactor: factor, Deterministic: true}, nil
}

// Close implements Engine.
func (e *Espeak) Close() error { return nil }
