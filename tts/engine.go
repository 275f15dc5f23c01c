// Package tts holds dubstudio's speech engines behind one interface, Engine, and the small
// model-host protocol (JSON over HTTP on a unix socket or loopback TCP) that the GPU
// engines speak.
//
// Engines:
//   - HostClient talks to a model host over the protocol: the real IndexTTS-2 / 2.5 host
//     (hosts/indextts_host.py) or the random-weight benchmark host (hosts/bench_host.py).
//   - Espeak is the CPU preview engine on espeak-ng: real speech without a GPU.
//   - Simulator is for tests and CPU benchmarks: latency proportional to tokens, memory
//     through a simulated device, injectable faults.
//   - VLLM talks to an external index-tts-vllm server (POST /tts_url).
//
// Every engine fails with *Error, whose Code says what went wrong; errors.Is matches the
// category sentinels ErrOutOfMemory, ErrInvalidInput, ErrInternal and ErrUnavailable.
// The protocol is documented in docs/engines.md.
package tts

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Engine synthesizes speech for one line at a time per unit of its declared concurrency.
// Implementations are safe for concurrent use; an engine whose backend serves one request
// at a time (an IndexTTS-2 host) declares Concurrency 1 in Info and the caller does not
// send it more.
type Engine interface {
	// Name is the engine kind: "indextts", "bench", "espeak", "simulator", "vllm".
	Name() string
	// Info describes the loaded model and what the engine can do.
	Info(ctx context.Context) (HostInfo, error)
	// PrepareSpeaker computes a speaker's conditioning from a reference recording, or
	// loads it from the cache file that an earlier call wrote.
	PrepareSpeaker(ctx context.Context, req PrepareRequest) (PrepareResult, error)
	// Synthesize renders req.Text to req.OutputPath as a WAV file.
	Synthesize(ctx context.Context, req Request) (Result, error)
	// Close releases the engine's resources; it does not stop a host process it did not
	// start.
	Close() error
}

// HostInfo describes an engine's model and capabilities; a model host reports it from
// GET /health.
type HostInfo struct {
	// Model is the model family, e.g. "IndexTTS-2", "IndexTTS-2.5", "espeak-ng".
	Model string `json:"model"`
	// Version identifies the weights; speaker conditioning caches are keyed by it.
	Version string `json:"version"`
	// ResidentBytes is the accelerator memory the process holds while idle (0 on CPU).
	ResidentBytes int64 `json:"resident_bytes"`
	// Concurrency is how many requests the engine serves at once.
	Concurrency int `json:"concurrency"`
	// Busy is how many requests are in flight right now.
	Busy int `json:"busy"`
	// SampleRate of the audio the engine writes.
	SampleRate int `json:"sample_rate,omitempty"`
	// DurationControl reports that the engine honours Request.DurationFactor.
	DurationControl bool `json:"duration_control"`
	// EmotionText reports that the engine accepts EmotionText (a Qwen emotion model is
	// loaded).
	EmotionText bool `json:"emotion_text"`
	// Deterministic reports that Request.Seed changes nothing: the same request gives
	// the same audio, byte for byte (espeak-ng). A new take of an unchanged line then
	// cannot differ, and the review view does not offer one.
	Deterministic bool `json:"deterministic,omitempty"`
}

// PrepareRequest asks an engine to compute (or load) a speaker's conditioning.
type PrepareRequest struct {
	// ReferenceAudioPath is the speaker's reference recording (IndexTTS uses its first
	// 15 s).
	ReferenceAudioPath string `json:"reference_audio_path"`
	// ReferenceSHA256 is the hex SHA-256 of the reference file; with the model version it
	// names the cache file. Empty means the engine hashes the file itself.
	ReferenceSHA256 string `json:"reference_sha256,omitempty"`
	// CacheDir is where conditioning cache files live; empty means no cache file.
	CacheDir string `json:"cache_dir,omitempty"`
}

// PrepareResult says where the conditioning is and whether it was computed now.
type PrepareResult struct {
	// CachePath is the conditioning cache file, to pass as Speaker.ConditioningPath.
	// Empty for engines without conditioning (espeak, vllm).
	CachePath string `json:"cache_path"`
	// Computed is true when the conditioning was computed by this call, false when it was
	// loaded from CachePath (or there is nothing to compute).
	Computed bool `json:"computed"`
	// Seconds spent.
	Seconds float64 `json:"seconds"`
}

// Speaker is who speaks a line.
type Speaker struct {
	// ReferenceAudioPath is the reference recording (IndexTTS: spk_audio_prompt).
	ReferenceAudioPath string `json:"reference_audio_path,omitempty"`
	// ConditioningPath is the cache file from PrepareSpeaker; when set the host restores
	// the conditioning from it instead of recomputing.
	ConditioningPath string `json:"conditioning_path,omitempty"`
	// Voice is the espeak-ng voice for the CPU engine ("en", "en-us", "cmn").
	Voice string `json:"voice,omitempty"`
}

// EmotionMode selects where a line's emotion comes from.
type EmotionMode string

// Emotion modes, as IndexTTS-2 offers them (index-tts-vllm's emo_control_method 0-3).
const (
	// EmotionSpeaker takes the emotion from the speaker's reference audio (the default).
	EmotionSpeaker EmotionMode = "speaker"
	// EmotionAudio takes it from a separate emotion reference recording.
	EmotionAudio EmotionMode = "audio"
	// EmotionVector takes it from eight weights.
	EmotionVector EmotionMode = "vector"
	// EmotionText derives the vector from a description (needs the Qwen emotion model).
	EmotionText EmotionMode = "text"
)

// EmotionNames are the dimensions of Emotion.Vector, in IndexTTS-2's order.
var EmotionNames = [8]string{"happy", "angry", "sad", "afraid", "disgusted", "melancholic", "surprised", "calm"}

// MaxEmotionSum is IndexTTS-2's cap on the sum of an emotion vector.
const MaxEmotionSum = 0.8

// Emotion is a line's emotion control.
type Emotion struct {
	// Mode; empty means EmotionSpeaker.
	Mode EmotionMode `json:"mode,omitempty"`
	// AudioPath is the emotion reference recording for EmotionAudio.
	AudioPath string `json:"audio_path,omitempty"`
	// Weight is IndexTTS's emo_alpha, 0..1: how strongly the emotion audio (or the
	// vector) applies. 0 means 1.
	Weight float64 `json:"weight,omitempty"`
	// Vector for EmotionVector: each weight 0..1, see EmotionNames. A vector summing to
	// more than MaxEmotionSum is scaled down proportionally by Normalize.
	Vector [8]float64 `json:"vector"`
	// Text for EmotionText: a description of the emotion; empty means the line's text.
	Text string `json:"text,omitempty"`
}

// Request is one line to synthesize.
type Request struct {
	// Text to speak, after glossary replacement (ApplyGlossary).
	Text string `json:"text"`
	// Language of Text: "zh", "en", "ja", "es", ... IndexTTS-2.5 requires it; the others
	// use it only for duration prediction. Empty means guess from the text.
	Language string  `json:"language,omitempty"`
	Speaker  Speaker `json:"speaker"`
	Emotion  Emotion `json:"emotion"`
	// DurationFactor scales the length of the speech (IndexTTS-2.5 duration_factor, espeak
	// rate): 0 means the engine's natural pace, otherwise MinDurationFactor..
	// MaxDurationFactor. Engines without duration control (DurationControl false) ignore it.
	DurationFactor float64 `json:"duration_factor,omitempty"`
	// TargetSeconds is the line's slot length, a hint for engines and simulators.
	TargetSeconds float64 `json:"target_seconds,omitempty"`
	// MaxMelTokens bounds the GPT's output per segment; 0 means 1500 (about 30 s).
	// Normalize caps it at MaxMelTokensCap.
	MaxMelTokens int `json:"max_mel_tokens,omitempty"`
	// MaxTextTokensPerSegment splits long text; 0 means 120. Normalize caps it at
	// MaxTextTokensPerSegmentCap.
	MaxTextTokensPerSegment int `json:"max_text_tokens_per_segment,omitempty"`
	// Seed makes sampling repeatable; 0 means unseeded.
	Seed int64 `json:"seed,omitempty"`
	// First marks an editor's retake (a render of a few lines, workflow.PriorityFirst):
	// a batching host admits it, and runs its s2mel, ahead of the other lines it holds.
	// Engines that run one line at a time ignore it.
	First bool `json:"first,omitempty"`
	// OutputPath is the WAV file to write.
	OutputPath string `json:"output_path"`
}

// Result describes a rendered take.
type Result struct {
	// Engine and ModelVersion that made the take.
	Engine       string `json:"engine"`
	ModelVersion string `json:"model_version"`
	// OutputPath of the WAV file.
	OutputPath string `json:"output_path"`
	// SampleRate and AudioSeconds of the written file.
	SampleRate   int     `json:"sample_rate"`
	AudioSeconds float64 `json:"audio_seconds"`
	// Tokens is the number of acoustic (mel) tokens the GPT generated, 0 where there is
	// no such thing.
	Tokens int `json:"tokens"`
	// Stages holds seconds per stage ("prepare", "queue", "conditioning", "gpt",
	// "gpt_forward", "s2mel", "vocoder", "total", ...).
	Stages map[string]float64 `json:"stages,omitempty"`
	// PeakAllocatedBytes and PeakReservedBytes are the accelerator memory peaks of this
	// request (torch.cuda.max_memory_allocated / max_memory_reserved after a reset).
	PeakAllocatedBytes int64 `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64 `json:"peak_reserved_bytes"`
	// DurationFactor actually applied (1 where the engine has no control).
	DurationFactor float64 `json:"duration_factor,omitempty"`
	// Deterministic says that this audio did not depend on Request.Seed: the same
	// request again gives the same bytes (HostInfo.Deterministic). The take records it.
	Deterministic bool `json:"deterministic,omitempty"`
	// Sequence is a batching host's account of this line (protocol 2); nil otherwise.
	// There PeakAllocatedBytes is the line's own share (its KV blocks at their most and
	// its share of its s2mel/vocoder group), not the process's peak.
	Sequence *SequenceInfo `json:"sequence,omitempty"`
}

// LineVRAMBytes is the accelerator memory this line itself used: on a batching host
// its own share (its KV blocks and its part of its s2mel group's activations), on a
// one-request host the process's peak reserve (it served this line alone). A take
// records it; the batching host's process figures belong to every line at once.
func (r Result) LineVRAMBytes() int64 {
	if r.Sequence != nil {
		return r.PeakAllocatedBytes
	}
	return r.PeakReservedBytes
}

// SequenceInfo is one line's resources on a batching host (protocol 2).
type SequenceInfo struct {
	// KVBytes is the line's KV blocks at their most; ActivationBytes its share of the
	// activations of its s2mel/vocoder group.
	KVBytes         int64 `json:"kv_bytes"`
	ActivationBytes int64 `json:"activation_bytes"`
	// Seconds the line waited in the host and spent in each stage.
	QueueSeconds float64 `json:"queue_seconds"`
	GPTSeconds   float64 `json:"gpt_seconds"`
	// S2MelWaitSeconds is the wait from the line's last token to its s2mel group.
	S2MelWaitSeconds float64 `json:"s2mel_wait_seconds"`
	S2MelSeconds     float64 `json:"s2mel_seconds"`
	VocoderSeconds   float64 `json:"vocoder_seconds"`
	// BatchRowsMean is the mean rows per decode step while the line decoded.
	BatchRowsMean float64 `json:"batch_rows_mean"`
	// S2MelGroup is the number of lines in its s2mel batch.
	S2MelGroup int `json:"s2mel_group"`
}

// Defaults and limits shared by the engines.
const (
	DefaultMaxMelTokens            = 1500
	DefaultMaxTextTokensPerSegment = 120
	MinDurationFactor              = 0.5
	MaxDurationFactor              = 2.0
	// MaxTextRunes bounds one line; longer text is a script problem, not a line.
	MaxTextRunes = 5000
	// MaxMelTokensCap and MaxTextTokensPerSegmentCap keep requests below IndexTTS's GPT
	// position tables (config.yaml: 1,815 mel and 600 text positions), past which CUDA
	// raises a device-side assert that leaves a host unusable: 1,500 is IndexTTS's own
	// default, 200 the top of the segment length upstream recommends (80-200). A host
	// lowers them further where its config's tables are smaller.
	MaxMelTokensCap            = 1500
	MaxTextTokensPerSegmentCap = 200
)

// ErrorCode is the category of an engine failure, as carried on the wire.
type ErrorCode string

// Error codes.
const (
	// CodeOutOfMemory: the accelerator ran out of memory; the request may succeed later
	// or with a smaller budget.
	CodeOutOfMemory ErrorCode = "out_of_memory"
	// CodeInvalidInput: the request cannot succeed as it is.
	CodeInvalidInput ErrorCode = "invalid_input"
	// CodeInternal: the engine failed; retrying may help.
	CodeInternal ErrorCode = "internal"
	// CodeUnavailable: the engine cannot be reached (host down, connection refused).
	CodeUnavailable ErrorCode = "unavailable"
	// CodeTextTooLong: the line cannot be spoken within the caps (a segment longer than
	// the model's text positions, or speech that reaches MaxMelTokens without ending).
	// An invalid input: errors.Is matches ErrInvalidInput and it is not retried.
	CodeTextTooLong ErrorCode = "text_too_long"
	// CodeUnsupported: the line asks for what this engine or model does not do (a
	// language it does not know, an emotion weight it ignores). An invalid input too.
	CodeUnsupported ErrorCode = "unsupported"
)

// Category sentinels; *Error matches the one for its Code under errors.Is.
var (
	ErrOutOfMemory  = errors.New("tts: out of memory")
	ErrInvalidInput = errors.New("tts: invalid input")
	ErrInternal     = errors.New("tts: internal error")
	ErrUnavailable  = errors.New("tts: engine unavailable")
)

// Error is an engine failure.
type Error struct {
	Code    ErrorCode
	Message string
	// Traceback is the host's Python traceback, for logs; never shown to users.
	Traceback string
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("tts ")
	b.WriteString(string(e.Code))
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the category sentinel of e.Code; an unknown code counts as internal.
func (e *Error) Is(target error) bool {
	return target == e.Code.Sentinel()
}

// Sentinel returns the category sentinel of c; unknown codes map to ErrInternal.
func (c ErrorCode) Sentinel() error {
	switch c {
	case CodeOutOfMemory:
		return ErrOutOfMemory
	case CodeInvalidInput, CodeTextTooLong, CodeUnsupported:
		return ErrInvalidInput
	case CodeUnavailable:
		return ErrUnavailable
	default:
		return ErrInternal
	}
}

// MessageKey is the i18n catalog key of the user-facing text for c.
func (c ErrorCode) MessageKey() string {
	switch c {
	case CodeOutOfMemory, CodeInvalidInput, CodeUnavailable, CodeTextTooLong, CodeUnsupported:
		return "tts.error." + string(c)
	default:
		return "tts.error.internal"
	}
}

// Retryable reports whether the same request may succeed later.
func (c ErrorCode) Retryable() bool { return !errors.Is(c.Sentinel(), ErrInvalidInput) }

// CodeOf returns the code of the *Error in err's chain: CodeInternal for any other non-nil
// error, "" for nil.
func CodeOf(err error) ErrorCode {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

func newError(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalidf(format string, args ...any) *Error {
	return newError(CodeInvalidInput, format, args...)
}

// Validate reports the first problem with r as an *Error with CodeInvalidInput.
func (r Request) Validate() error {
	if strings.TrimSpace(r.Text) == "" {
		return invalidf("text is empty")
	}
	if !utf8.ValidString(r.Text) {
		return invalidf("text is not valid UTF-8")
	}
	if strings.ContainsRune(r.Text, 0) {
		return invalidf("text contains a NUL character")
	}
	if n := utf8.RuneCountInString(r.Text); n > MaxTextRunes {
		return invalidf("text has %d characters, more than %d", n, MaxTextRunes)
	}
	if r.OutputPath == "" {
		return invalidf("output path is empty")
	}
	if r.DurationFactor != 0 && !(r.DurationFactor >= MinDurationFactor && r.DurationFactor <= MaxDurationFactor) {
		return invalidf("duration factor %g is outside %g..%g", r.DurationFactor, MinDurationFactor, MaxDurationFactor)
	}
	if r.TargetSeconds < 0 || math.IsNaN(r.TargetSeconds) || math.IsInf(r.TargetSeconds, 0) {
		return invalidf("target seconds %g is invalid", r.TargetSeconds)
	}
	if r.MaxMelTokens < 0 {
		return invalidf("max mel tokens %d is negative", r.MaxMelTokens)
	}
	if r.MaxTextTokensPerSegment < 0 {
		return invalidf("max text tokens per segment %d is negative", r.MaxTextTokensPerSegment)
	}
	return r.Emotion.Validate()
}

// Validate reports the first problem with e as an *Error with CodeInvalidInput. A vector
// whose sum exceeds MaxEmotionSum is valid: Normalize scales it.
func (e Emotion) Validate() error {
	if !(e.Weight >= 0 && e.Weight <= 1) {
		return invalidf("emotion weight %g is outside 0..1", e.Weight)
	}
	switch e.Mode {
	case "", EmotionSpeaker, EmotionText:
	case EmotionAudio:
		if e.AudioPath == "" {
			return invalidf("emotion mode audio needs an emotion reference recording")
		}
	case EmotionVector:
		sum := 0.0
		for i, v := range e.Vector {
			if !(v >= 0 && v <= 1) {
				return invalidf("emotion %s weight %g is outside 0..1", EmotionNames[i], v)
			}
			sum += v
		}
		if sum == 0 {
			return invalidf("emotion vector is all zero")
		}
	default:
		return invalidf("unknown emotion mode %q", e.Mode)
	}
	return nil
}

// Normalize returns e with defaults filled in (Mode speaker, Weight 1) and, in vector
// mode, the vector scaled down proportionally so that it sums to at most MaxEmotionSum,
// the rule IndexTTS-2's own UI applies (its per-emotion bias is not applied). Scaling
// rather than rejecting lets a UI offer eight independent 0..1 sliders; the take records
// the normalized vector. Fields that the mode does not use are cleared.
func (e Emotion) Normalize() Emotion {
	if e.Mode == "" {
		e.Mode = EmotionSpeaker
	}
	if e.Weight == 0 {
		e.Weight = 1
	}
	if e.Mode != EmotionAudio {
		e.AudioPath = ""
	}
	if e.Mode != EmotionText {
		e.Text = ""
	}
	if e.Mode != EmotionVector {
		e.Vector = [8]float64{}
		return e
	}
	sum := 0.0
	for _, v := range e.Vector {
		sum += v
	}
	if sum > MaxEmotionSum {
		k := MaxEmotionSum / sum
		for i := range e.Vector {
			e.Vector[i] *= k
		}
	}
	return e
}

// Normalize validates r and returns it with defaults filled in: emotion normalized,
// MaxMelTokens and MaxTextTokensPerSegment defaulted and capped (MaxMelTokensCap,
// MaxTextTokensPerSegmentCap), Language guessed from the text when empty. Engines call it
// first; the returned request is what was actually asked for.
func (r Request) Normalize() (Request, error) {
	if err := r.Validate(); err != nil {
		return r, err
	}
	r.Emotion = r.Emotion.Normalize()
	if r.MaxMelTokens == 0 {
		r.MaxMelTokens = DefaultMaxMelTokens
	}
	if r.MaxTextTokensPerSegment == 0 {
		r.MaxTextTokensPerSegment = DefaultMaxTextTokensPerSegment
	}
	r.MaxMelTokens = min(r.MaxMelTokens, MaxMelTokensCap)
	r.MaxTextTokensPerSegment = min(r.MaxTextTokensPerSegment, MaxTextTokensPerSegmentCap)
	if r.Language == "" {
		r.Language = GuessLanguage(r.Text)
	}
	return r, nil
}
