package tts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// EspeakConfig configures the CPU preview engine.
type EspeakConfig struct {
	// Binary is the espeak-ng executable; empty means espeak-ng, then espeak, from PATH.
	Binary string
	// DefaultVoice is used when a request names none; empty means a voice for the
	// request's language (VoiceForLanguage).
	DefaultVoice string
	// WordsPerMinute at DurationFactor 1; default 175, espeak's own.
	WordsPerMinute int
	// Concurrency is how many espeak processes run at once; default the number of CPUs.
	Concurrency int
}

// Espeak is the CPU preview engine: real (robotic) speech from espeak-ng, without a GPU,
// so the whole product works on a laptop. DurationFactor scales the speaking rate.
type Espeak struct {
	bin     string
	version string
	voice   string
	wpm     int
	slots   chan struct{}
}

var _ Engine = (*Espeak)(nil)

// espeak-ng's speaking-rate limits, in words per minute.
const (
	espeakMinWPM = 80
	espeakMaxWPM = 450
)

// NewEspeak finds espeak-ng and returns the engine; CodeUnavailable when it is not
// installed.
func NewEspeak(ctx context.Context, cfg EspeakConfig) (*Espeak, error) {
	bin := cfg.Binary
	if bin == "" {
		for _, name := range []string{"espeak-ng", "espeak"} {
			if p, err := exec.LookPath(name); err == nil {
				bin = p
				break
			}
		}
	}
	if bin == "" {
		return nil, &Error{Code: CodeUnavailable, Message: "espeak-ng is not installed"}
	}
	if cfg.DefaultVoice != "" && !validVoice(cfg.DefaultVoice) {
		return nil, fmt.Errorf("espeak default voice %q is not a voice name", cfg.DefaultVoice)
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return nil, &Error{Code: CodeUnavailable, Message: "running " + bin + " --version", Err: err}
	}
	e := &Espeak{
		bin:     bin,
		version: strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]),
		voice:   cfg.DefaultVoice,
		wpm:     orDefault(cfg.WordsPerMinute, 175),
		slots:   make(chan struct{}, orDefault(cfg.Concurrency, runtime.NumCPU())),
	}
	return e, nil
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Name returns "espeak".
func (e *Espeak) Name() string { return "espeak" }

// Info describes espeak-ng.
func (e *Espeak) Info(context.Context) (HostInfo, error) {
	return HostInfo{
		Model: "espeak-ng", Version: e.version, Concurrency: cap(e.slots), Busy: len(e.slots),
		SampleRate: 22050, DurationControl: true,
	}, nil
}

// PrepareSpeaker has nothing to compute: espeak voices are built in.
func (e *Espeak) PrepareSpeaker(context.Context, PrepareRequest) (PrepareResult, error) {
	return PrepareResult{}, nil
}

// Close does nothing.
func (e *Espeak) Close() error { return nil }

// voicePattern is what espeak-ng voice names look like ("en-us", "cmn", "zh-yue",
// "mb/mb-en1", "en+f3"). Anything else is refused, and never starts with "-".
var voicePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_+/-]{0,63}$`)

func validVoice(v string) bool { return voicePattern.MatchString(v) && !strings.Contains(v, "..") }

// VoiceForLanguage is the espeak-ng voice used for a language when a character has
// none: "cmn" for Chinese, "en-us" for English, the code itself for others espeak knows.
func VoiceForLanguage(lang string) string {
	switch baseLanguage(lang) {
	case "zh":
		return "cmn"
	case "en", "":
		return "en-us"
	case "ja", "ko", "es", "fr", "de", "it", "pt", "ru":
		return baseLanguage(lang)
	}
	return "en-us"
}

// Synthesize runs espeak-ng with the text on stdin (never as an argument, so text that
// starts with "-" is just text) and writes its WAV to req.OutputPath.
func (e *Espeak) Synthesize(ctx context.Context, req Request) (Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return Result{}, err
	}
	voice := req.Speaker.Voice
	if voice == "" {
		voice = e.voice
	}
	if voice == "" {
		voice = VoiceForLanguage(req.Language)
	}
	if !validVoice(voice) {
		return Result{}, invalidf("espeak voice %q is not a voice name", voice)
	}
	factor := req.DurationFactor
	if factor == 0 {
		factor = 1
	}
	wpm := int(math.Round(float64(e.wpm) / factor))
	wpm = min(max(wpm, espeakMinWPM), espeakMaxWPM)

	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-ctx.Done():
		return Result{}, fmt.Errorf("waiting for an espeak slot: %w", ctx.Err())
	}

	dir := filepath.Dir(req.OutputPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, &Error{Code: CodeInternal, Message: "creating the output directory", Err: err}
	}
	tmp, err := os.CreateTemp(dir, ".espeak-*.wav")
	if err != nil {
		return Result{}, &Error{Code: CodeInternal, Message: "creating the output file", Err: err}
	}
	tmpName := tmp.Name()
	_ = tmp.Close()
	defer os.Remove(tmpName)

	start := time.Now()
	// -b 1: the input is UTF-8. --stdin: read all of stdin as the text.
	cmd := exec.CommandContext(ctx, e.bin, "-b", "1", "-v", voice, "-s", strconv.Itoa(wpm), "-w", tmpName, "--stdin")
	cmd.Stdin = strings.NewReader(req.Text)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Result{}, fmt.Errorf("espeak-ng: %w", ctxErr)
		}
		msg := strings.TrimSpace(stderr.String())
		var exit *exec.ExitError
		if errors.As(err, &exit) && strings.Contains(strings.ToLower(msg), "voice") {
			return Result{}, &Error{Code: CodeInvalidInput, Message: fmt.Sprintf("espeak-ng voice %q: %s", voice, msg)}
		}
		return Result{}, &Error{Code: CodeInternal, Message: "espeak-ng failed: " + msg, Err: err}
	}
	info, err := ReadWAVInfo(tmpName)
	if err != nil {
		return Result{}, &Error{Code: CodeInternal, Message: "espeak-ng wrote no WAV", Err: err}
	}
	if err := os.Rename(tmpName, req.OutputPath); err != nil {
		return Result{}, &Error{Code: CodeInternal, Message: "moving the take into place", Err: err}
	}
	return Result{
		Engine: e.Name(), ModelVersion: e.version, OutputPath: req.OutputPath,
		SampleRate: info.SampleRate, AudioSeconds: info.Seconds,
		Stages:         map[string]float64{"total": time.Since(start).Seconds()},
		DurationFactor: float64(e.wpm) / float64(wpm),
	}, nil
}
