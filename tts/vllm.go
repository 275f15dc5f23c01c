package tts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"dubstudio/internal/perm"
)

// VLLMConfig configures an engine for an external index-tts-vllm server.
type VLLMConfig struct {
	// URL of the server, e.g. "http://127.0.0.1:6006".
	URL string
	// Concurrency is how many requests the server takes at once (it batches the GPT);
	// declared in Info. Default 8.
	Concurrency int
	// Model and Version are reported in Info and Result; defaults "IndexTTS-2-vLLM" and
	// "unknown". Set Version when the server's weights change.
	Model   string
	Version string
	// HTTPClient overrides the default client.
	HTTPClient *http.Client
	// MaxAudioBytes bounds a response; default 256 MiB (about 100 minutes at 22 kHz).
	MaxAudioBytes int64
}

// VLLM is an Engine backed by index-tts-vllm's POST /tts_url. The server reads the
// reference audio paths itself, so it must share the worker's filesystem. It has no
// duration control and reports no per-request memory (vLLM pre-allocates its memory).
//
// The server runs IndexTTS-2 but forces the emotion weight to 1 in vector and text modes
// (indextts/infer_vllm_v2.py), where IndexTTS-2 itself scales the vector by it. In vector
// mode the engine scales the vector itself, which is the same computation, so both
// engines give the same take for the same settings; in text mode the vector is made on
// the server, so a weight other than 1 is refused (CodeUnsupported).
type VLLM struct {
	cfg  VLLMConfig
	hc   *http.Client
	busy atomic.Int64
}

var _ Engine = (*VLLM)(nil)

// NewVLLM returns the engine; it does not connect.
func NewVLLM(cfg VLLMConfig) (*VLLM, error) {
	cfg.URL = strings.TrimRight(strings.TrimSpace(cfg.URL), "/")
	if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return nil, fmt.Errorf("vllm engine: URL %q must start with http:// or https://", cfg.URL)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Model == "" {
		cfg.Model = "IndexTTS-2-vLLM"
	}
	if cfg.Version == "" {
		cfg.Version = "unknown"
	}
	if cfg.MaxAudioBytes <= 0 {
		cfg.MaxAudioBytes = 256 << 20
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency, IdleConnTimeout: time.Minute}}
	}
	return &VLLM{cfg: cfg, hc: hc}, nil
}

// Name returns "vllm".
func (v *VLLM) Name() string { return "vllm" }

// Info checks GET /health and describes the server.
func (v *VLLM) Info(ctx context.Context) (HostInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.URL+"/health", nil)
	if err != nil {
		return HostInfo{}, &Error{Code: CodeInternal, Message: "building request", Err: err}
	}
	resp, err := v.hc.Do(req)
	if err != nil {
		return HostInfo{}, v.transportError(ctx, "/health", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return HostInfo{}, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("vllm server health: %d %s", resp.StatusCode, snippet(body))}
	}
	return HostInfo{
		Model: v.cfg.Model, Version: v.cfg.Version, Concurrency: v.cfg.Concurrency, Busy: int(v.busy.Load()),
		SampleRate: 22050, EmotionText: true,
	}, nil
}

// PrepareSpeaker has nothing to do: the server conditions on the reference path itself.
func (v *VLLM) PrepareSpeaker(context.Context, PrepareRequest) (PrepareResult, error) {
	return PrepareResult{}, nil
}

// Close releases idle connections.
func (v *VLLM) Close() error {
	v.hc.CloseIdleConnections()
	return nil
}

// vllmRequest is index-tts-vllm's /tts_url body.
type vllmRequest struct {
	Text                     string     `json:"text"`
	SpkAudioPath             string     `json:"spk_audio_path"`
	EmoControlMethod         int        `json:"emo_control_method"`
	EmoRefPath               *string    `json:"emo_ref_path"`
	EmoWeight                float64    `json:"emo_weight"`
	EmoVec                   [8]float64 `json:"emo_vec"`
	EmoText                  *string    `json:"emo_text"`
	EmoRandom                bool       `json:"emo_random"`
	MaxTextTokensPerSentence int        `json:"max_text_tokens_per_sentence"`
}

// vllmLanguages are what the server's IndexTTS-2 has a text front end for (its BPE
// vocabulary is Chinese and English).
var vllmLanguages = []string{"zh", "en"}

// vllmCheck refuses what the server would silently do otherwise: a weight it ignores, a
// language it does not know.
func vllmCheck(req Request) error {
	if req.Emotion.Mode == EmotionText && req.Emotion.Weight != 1 {
		return newError(CodeUnsupported, "the vllm engine ignores the emotion weight with emotion from text (index-tts-vllm forces 1): set it to 1, or use a vector or another engine")
	}
	lang := strings.ToLower(strings.ReplaceAll(req.Language, "_", "-"))
	if i := strings.IndexByte(lang, '-'); i >= 0 {
		lang = lang[:i]
	}
	switch lang {
	case "cmn", "zho", "chi":
		lang = "zh"
	case "eng":
		lang = "en"
	}
	if !slices.Contains(vllmLanguages, lang) {
		return newError(CodeUnsupported, "the vllm engine (IndexTTS-2) does not speak language %q; it knows %s", req.Language, strings.Join(vllmLanguages, ", "))
	}
	return nil
}

// vllmBody builds the /tts_url body from a normalized request. In vector mode the vector
// is scaled by the weight here (as IndexTTS-2's infer() does, to 4 decimals) and sent with
// emo_weight 1, which is what the server uses anyway.
func vllmBody(req Request) vllmRequest {
	b := vllmRequest{
		Text:                     req.Text,
		SpkAudioPath:             req.Speaker.ReferenceAudioPath,
		EmoWeight:                req.Emotion.Weight,
		MaxTextTokensPerSentence: req.MaxTextTokensPerSegment,
	}
	switch req.Emotion.Mode {
	case EmotionAudio:
		b.EmoControlMethod = 1
		p := req.Emotion.AudioPath
		b.EmoRefPath = &p
	case EmotionVector:
		b.EmoControlMethod = 2
		b.EmoWeight = 1
		b.EmoVec = req.Emotion.Vector
		if w := req.Emotion.Weight; w != 1 {
			for i, v := range b.EmoVec {
				b.EmoVec[i] = math.Trunc(v*w*10000) / 10000
			}
		}
	case EmotionText:
		b.EmoControlMethod = 3
		if req.Emotion.Text != "" {
			t := req.Emotion.Text
			b.EmoText = &t
		}
	default:
		b.EmoWeight = 1
	}
	return b
}

// vllmError is the server's error body.
type vllmError struct {
	Status string `json:"status"`
	Error  string `json:"error"`
}

// Synthesize posts the line to /tts_url and writes the returned WAV to req.OutputPath.
func (v *VLLM) Synthesize(ctx context.Context, req Request) (Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return Result{}, err
	}
	if req.Speaker.ReferenceAudioPath == "" {
		return Result{}, invalidf("the vllm engine needs a reference audio path")
	}
	if err := vllmCheck(req); err != nil {
		return Result{}, err
	}
	v.busy.Add(1)
	defer v.busy.Add(-1)
	start := time.Now()
	payload, err := json.Marshal(vllmBody(req))
	if err != nil {
		return Result{}, &Error{Code: CodeInternal, Message: "encoding request", Err: err}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, v.cfg.URL+"/tts_url", bytes.NewReader(payload))
	if err != nil {
		return Result{}, &Error{Code: CodeInternal, Message: "building request", Err: err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := v.hc.Do(hreq)
	if err != nil {
		return Result{}, v.transportError(ctx, "/tts_url", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		return Result{}, vllmFailure(resp.StatusCode, body)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "audio/wav" && mt != "audio/x-wav" &&
		mt != "audio/wave" && mt != "application/octet-stream" {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return Result{}, &Error{Code: CodeInternal, Message: fmt.Sprintf("vllm server answered %q, want audio/wav: %s", mt, snippet(body))}
	}
	if err := v.saveAudio(resp.Body, req.OutputPath); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Result{}, fmt.Errorf("receiving audio: %w", ctxErr)
		}
		return Result{}, err
	}
	info, err := ReadWAVInfo(req.OutputPath)
	if err != nil {
		_ = os.Remove(req.OutputPath)
		return Result{}, &Error{Code: CodeInternal, Message: "the vllm server sent no valid WAV", Err: err}
	}
	return Result{
		Engine: v.Name(), ModelVersion: v.cfg.Version, OutputPath: req.OutputPath,
		SampleRate: info.SampleRate, AudioSeconds: info.Seconds,
		Stages: map[string]float64{"total": time.Since(start).Seconds()}, DurationFactor: 1,
	}, nil
}

// saveAudio streams the body into place through a temporary file.
func (v *VLLM) saveAudio(body io.Reader, path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, perm.Dir); err != nil {
		return &Error{Code: CodeInternal, Message: "creating the output directory", Err: err}
	}
	tmp, err := os.CreateTemp(dir, ".vllm-*.wav")
	if err != nil {
		return &Error{Code: CodeInternal, Message: "creating the output file", Err: err}
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(body, v.cfg.MaxAudioBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &Error{Code: CodeUnavailable, Message: "receiving audio from the vllm server", Err: err}
	}
	if n > v.cfg.MaxAudioBytes {
		return &Error{Code: CodeInternal, Message: fmt.Sprintf("the vllm server sent more than %d bytes", v.cfg.MaxAudioBytes)}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return &Error{Code: CodeInternal, Message: "moving the take into place", Err: err}
	}
	return nil
}

// vllmFailure maps an error answer. The server answers every exception with 500 and
// the traceback as text, so out-of-memory is recognised in it.
func vllmFailure(status int, body []byte) error {
	var ve vllmError
	msg := snippet(body)
	tb := ""
	if json.Unmarshal(body, &ve) == nil && ve.Error != "" {
		tb = ve.Error
		msg = lastLine(ve.Error)
	}
	lower := strings.ToLower(string(body))
	switch {
	case strings.Contains(lower, "out of memory") || strings.Contains(lower, "outofmemoryerror"):
		return &Error{Code: CodeOutOfMemory, Message: msg, Traceback: tb}
	case strings.Contains(lower, "no such file") || strings.Contains(lower, "filenotfounderror"):
		return &Error{Code: CodeInvalidInput, Message: msg, Traceback: tb}
	case status == http.StatusUnprocessableEntity || status == http.StatusBadRequest:
		return &Error{Code: CodeInvalidInput, Message: msg}
	default:
		return &Error{Code: codeOfStatus(status), Message: fmt.Sprintf("vllm server answered %d: %s", status, msg), Traceback: tb}
	}
}

// lastLine is the last non-empty line of a traceback: the exception.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

func (v *VLLM) transportError(ctx context.Context, path string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("vllm server %s: %w", path, ctxErr)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("vllm server %s: %w", path, err)
	}
	return &Error{Code: CodeUnavailable, Message: "vllm server " + path, Err: err}
}
