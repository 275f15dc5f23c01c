package tts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// The model-host protocol: JSON over HTTP, on a unix socket or loopback TCP. It is
// documented for host authors in docs/engines.md; hosts/protocol.py is the Python side.
const (
	// ProtocolVersion is the newest protocol hosts report in GET /health as "protocol":
	// version 2 is the batching host (one process per GPU, many sequences at once,
	// HealthResponse.Batch); version-1 hosts (MinProtocolVersion) keep working.
	ProtocolVersion = 2
	// MinProtocolVersion is the oldest protocol a client accepts.
	MinProtocolVersion = 1

	PathHealth       = "/health"
	PathPrepare      = "/prepare"
	PathSynthesize   = "/synthesize"
	PathReleaseCache = "/release_cache"

	// maxResponseBytes bounds what a client reads from a host: responses are small JSON
	// documents (a traceback is the largest part).
	maxResponseBytes = 1 << 20
)

// StatusOf is the HTTP status a host answers with for an error code.
func StatusOf(code ErrorCode) int {
	switch code {
	case CodeInvalidInput, CodeTextTooLong, CodeUnsupported:
		return http.StatusBadRequest
	case CodeOutOfMemory:
		return http.StatusInsufficientStorage // 507
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// codeOfStatus maps an HTTP status to an error code when the body carries none.
func codeOfStatus(status int) ErrorCode {
	switch {
	case status == http.StatusInsufficientStorage:
		return CodeOutOfMemory
	case status == http.StatusServiceUnavailable, status == http.StatusBadGateway,
		status == http.StatusGatewayTimeout, status == http.StatusTooManyRequests:
		return CodeUnavailable
	case status == http.StatusNotFound, status == http.StatusMethodNotAllowed:
		return CodeInternal // a protocol mismatch, not the request's fault
	case status >= 400 && status < 500:
		return CodeInvalidInput
	default:
		return CodeInternal
	}
}

// WireError is the body of every error response: {"error": {...}}.
type WireError struct {
	Error WireErrorBody `json:"error"`
}

// WireErrorBody is the error's content.
type WireErrorBody struct {
	Code      ErrorCode `json:"code"`
	Message   string    `json:"message"`
	Traceback string    `json:"traceback,omitempty"`
}

// HealthResponse is the body of GET /health.
type HealthResponse struct {
	Protocol int `json:"protocol"`
	HostInfo
	// ReservedBytes is what the caching allocator holds now (torch.cuda.memory_reserved):
	// NVML's figure for the process minus the CUDA context. It ratchets up to the largest
	// request seen until POST /release_cache.
	ReservedBytes int64 `json:"reserved_bytes"`
	// Queued is how many requests wait behind the one running.
	Queued int `json:"queued"`
	// Counters are the host's running totals: "requests", "ooms",
	// "conditioning_computed", "conditioning_loaded".
	Counters map[string]int64 `json:"counters,omitempty"`
	// Batch describes a batching host (protocol 2); nil for a version-1 host.
	Batch *BatchInfo `json:"batch,omitempty"`
}

// IsBatching reports whether the host batches many sequences in one process.
func (h HealthResponse) IsBatching() bool { return h.Batch != nil }

// BatchInfo is a batching host's state in GET /health (protocol 2). Its KV cache is
// preallocated at load, so ResidentBytes holds the weights and KVCacheBytes; a line
// costs activations beyond that (ActivationBytesPerSecond per audio second).
type BatchInfo struct {
	// MaxSequences is the most sequences (lines) decoding at once (= Concurrency).
	MaxSequences int `json:"max_sequences"`
	// Beams is the rows per sequence (1 = sampling, one row; DefaultBeams unless
	// the host was told otherwise).
	Beams int `json:"beams"`
	// Decode is how a sequence chooses its tokens: DecodeBeamSearch (more than one
	// beam), DecodeSample (one beam, the host's default) or DecodeGreedy (one beam,
	// the host's --greedy); empty from hosts made before it.
	Decode string `json:"decode,omitempty"`
	// BlockTokens is the KV cache's block size in tokens.
	BlockTokens int `json:"block_tokens"`
	// KVBytesPerToken is one row's KV bytes per token, all layers, K and V.
	KVBytesPerToken int64 `json:"kv_bytes_per_token"`
	// KVCacheBytes is the preallocated KV pool; KVFreeBytes what of it is free now.
	KVCacheBytes int64 `json:"kv_cache_bytes"`
	KVFreeBytes  int64 `json:"kv_free_bytes"`
	// PrefixTokens is the conditioning latents ahead of the text.
	PrefixTokens int `json:"prefix_tokens"`
	// TokensPerSecond is mel tokens per audio second.
	TokensPerSecond float64 `json:"tokens_per_second"`
	// ActivationBytesPerSecond is the predicted activation bytes per audio second of
	// one line (s2mel, vocoder, GPT step), beyond the KV pool.
	ActivationBytesPerSecond float64 `json:"activation_bytes_per_second"`
	// Decoding, InS2Mel and Waiting count sequences by stage now.
	Decoding int `json:"decoding"`
	InS2Mel  int `json:"in_s2mel"`
	Waiting  int `json:"waiting"`
	// DecodeTokensPerSecond is the recent GPT rate, all sequences, one row each.
	DecodeTokensPerSecond float64 `json:"decode_tokens_per_second"`
	// BatchRowsMax is the most rows decoded in one step so far; Steps the decode steps.
	BatchRowsMax int   `json:"batch_rows_max"`
	Steps        int64 `json:"steps"`
	// DecodeGraphs is the CUDA graphs of the decode step the host captured at load
	// (0: it launches kernel by kernel); GraphSteps the steps that replayed one;
	// GraphPoolBytes the graphs' shared memory pool (part of resident_bytes).
	DecodeGraphs   int   `json:"decode_graphs,omitempty"`
	GraphSteps     int64 `json:"graph_steps,omitempty"`
	GraphPoolBytes int64 `json:"graph_pool_bytes,omitempty"`
	// PagedAttention is whether the decode step's attention reads the KV pool in
	// place (the host's Triton kernel); PagedAttentionOff why not, where the host
	// wanted it and its start-up check failed (it gathers each row's blocks instead).
	PagedAttention    bool   `json:"paged_attention,omitempty"`
	PagedAttentionOff string `json:"paged_attention_off,omitempty"`
	// VocoderKernel is how the vocoder's anti-aliased activations run: "fused" (the
	// benchmark host's kernel) or "cuda" (BigVGAN's) as one kernel each, "torch" in
	// plain steps; VocoderKernelOff why not as one kernel, where it was asked for.
	VocoderKernel    string `json:"vocoder_kernel,omitempty"`
	VocoderKernelOff string `json:"vocoder_kernel_off,omitempty"`
}

// DefaultBeams is a batching host's rows per sequence when it is not told (its
// --beams): IndexTTS's num_beams, searched.
const DefaultBeams = 3

// Batching hosts' decoding modes (BatchInfo.Decode).
const (
	DecodeBeamSearch = "beam_search"
	DecodeSample     = "sample"
	DecodeGreedy     = "greedy"
)

// ReleaseCacheResult is the body of POST /release_cache: accelerator memory reserved by
// the caching allocator before and after torch.cuda.empty_cache.
type ReleaseCacheResult struct {
	ReservedBefore int64 `json:"reserved_before"`
	ReservedAfter  int64 `json:"reserved_after"`
	Allocated      int64 `json:"allocated"`
}

// decodeResponse turns a host's HTTP response into out (on 2xx) or an *Error. It never
// panics, whatever the bytes; out must be a non-nil pointer.
func decodeResponse(status int, contentType string, body []byte, out any) error {
	if status >= 200 && status < 300 {
		if !isJSON(contentType) {
			return &Error{Code: CodeInternal, Message: fmt.Sprintf("host answered %d with content type %q, want JSON", status, contentType)}
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(out); err != nil {
			return &Error{Code: CodeInternal, Message: "decoding host response", Err: err}
		}
		if dec.More() {
			return &Error{Code: CodeInternal, Message: "host response has data after the JSON document"}
		}
		return nil
	}
	var we WireError
	if isJSON(contentType) && json.Unmarshal(body, &we) == nil && we.Error.Code != "" {
		code := we.Error.Code
		switch code {
		case CodeOutOfMemory, CodeInvalidInput, CodeInternal, CodeUnavailable, CodeTextTooLong, CodeUnsupported:
		default:
			code = CodeInternal
		}
		msg := we.Error.Message
		if msg == "" {
			msg = http.StatusText(status)
		}
		return &Error{Code: code, Message: msg, Traceback: we.Error.Traceback}
	}
	return &Error{Code: codeOfStatus(status), Message: fmt.Sprintf("host answered %d: %s", status, snippet(body))}
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// snippet returns the start of a body, as valid UTF-8 on one line, for error messages.
func snippet(body []byte) string {
	const limit = 200
	if len(body) > limit {
		body = body[:limit]
	}
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "(empty body)"
	}
	if !utf8.ValidString(s) {
		return "(binary body)"
	}
	return s
}
