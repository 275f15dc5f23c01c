package gpu

import "time"

// LiveState is what a worker publishes about its GPUs every few seconds (as JSON,
// through the store), so that the web app on any machine can show every GPU of every
// worker host and export them to /metrics.
type LiveState struct {
	Worker string    `json:"worker"`
	Host   string    `json:"host"`
	At     time.Time `json:"at"`
	// Engine is the worker's speech engine ("indextts", "bench", "simulator", ...).
	Engine string `json:"engine"`
	// NoGPU says why the worker schedules no GPU ("" when it does): no driver, no
	// device, or a CPU engine chosen.
	NoGPU string `json:"no_gpu,omitempty"`
	// Simulated: the GPUs are simulated devices (the simulator engine).
	Simulated bool `json:"simulated,omitempty"`
	// Waiting is how many requests wait for a seat; NeverFits how many were refused
	// since the worker started.
	Waiting   int       `json:"waiting"`
	NeverFits uint64    `json:"never_fits"`
	GPUs      []LiveGPU `json:"gpus"`
}

// LiveGPU is one GPU of a LiveState.
type LiveGPU struct {
	Device
	// Latest is the newest sample; Recent the samples of the last minutes, oldest
	// first (the latest included).
	Latest    *Point          `json:"latest,omitempty"`
	Recent    []Point         `json:"recent,omitempty"`
	Processes []ProcessMemory `json:"processes,omitempty"`
	// Snapshot is the executor's view: profile, budget, commitments, hosts and
	// seats with what each runs.
	Snapshot GPUSnapshot  `json:"snapshot"`
	Counters GPUCounters  `json:"counters"`
	Pool     []HostStatus `json:"pool,omitempty"`
	// ProfileID is the stored profile the GPU runs (0: the default profile);
	// CalibrationID the calibration whose curve it predicts with (0: defaults).
	ProfileID     int64 `json:"profile_id,omitempty"`
	CalibrationID int64 `json:"calibration_id,omitempty"`
	// ProfileProblem says why the assigned profile is not applied (it cannot fit one
	// synthesis, or is invalid), as a catalog message.
	ProfileProblem *Warning `json:"profile_problem,omitempty"`
	// Calibrating is the calibration running on the GPU now (0: none); its hosts
	// replace the pool's meanwhile.
	Calibrating int64 `json:"calibrating,omitempty"`
	// Batch is the GPU's batching host's batch now (nil: no batching host serves);
	// BatchRecent its readings of the last minutes, oldest first.
	Batch       *LiveBatch   `json:"batch,omitempty"`
	BatchRecent []BatchPoint `json:"batch_recent,omitempty"`
}

// LiveBatch is a batching host's batch as its health reports it (protocol 2,
// tts.BatchInfo; docs/engines.md): the sequences by stage, the decode rate, and what
// a sequence costs in memory.
type LiveBatch struct {
	// MaxSequences is the most lines decoding at once; Beams the rows per line.
	MaxSequences int `json:"max_sequences"`
	Beams        int `json:"beams"`
	// Decode is how a line chooses its tokens (tts.BatchInfo.Decode: "beam_search",
	// "sample", "greedy"); empty from hosts that do not say.
	Decode string `json:"decode,omitempty"`
	// Decoding, InS2Mel and Waiting count the lines by stage now.
	Decoding int `json:"decoding"`
	InS2Mel  int `json:"in_s2mel"`
	Waiting  int `json:"waiting"`
	// DecodeTokensPerSecond is the GPT's recent rate, all lines, one row each.
	DecodeTokensPerSecond float64 `json:"decode_tokens_per_second"`
	// KVBytesPerToken is one row's KV bytes per token; TokensPerAudioSecond the mel
	// tokens per second of audio; PrefixTokens the conditioning ahead of the text.
	KVBytesPerToken      int64   `json:"kv_bytes_per_token"`
	TokensPerAudioSecond float64 `json:"tokens_per_audio_second"`
	PrefixTokens         int     `json:"prefix_tokens"`
	// ActivationBytesPerSecond is a line's activations per audio second, beyond the
	// KV pool.
	ActivationBytesPerSecond float64 `json:"activation_bytes_per_second"`
	// KVCacheBytes is the preallocated KV pool; KVFreeBytes what of it is free.
	KVCacheBytes int64 `json:"kv_cache_bytes"`
	KVFreeBytes  int64 `json:"kv_free_bytes"`
	// BatchRowsMax is the most rows decoded in one step so far; Steps the steps.
	BatchRowsMax int   `json:"batch_rows_max"`
	Steps        int64 `json:"steps"`
	// DecodeGraphs is the decode step's CUDA graphs (0: none); GraphSteps the steps
	// that replayed one; GraphPoolBytes their shared memory pool.
	DecodeGraphs   int   `json:"decode_graphs,omitempty"`
	GraphSteps     int64 `json:"graph_steps,omitempty"`
	GraphPoolBytes int64 `json:"graph_pool_bytes,omitempty"`
	// PagedAttention is whether attention reads the KV pool in place;
	// PagedAttentionOff why not, where the host wanted it.
	PagedAttention    bool   `json:"paged_attention,omitempty"`
	PagedAttentionOff string `json:"paged_attention_off,omitempty"`
	// VocoderKernel is how the vocoder's activations run ("fused", "cuda": one
	// kernel each; "torch"); VocoderKernelOff why not one kernel, where asked for.
	VocoderKernel    string `json:"vocoder_kernel,omitempty"`
	VocoderKernelOff string `json:"vocoder_kernel_off,omitempty"`
}

// GraphStepPercent is the share of decode steps that replayed a CUDA graph.
func (b LiveBatch) GraphStepPercent() float64 {
	if b.Steps == 0 {
		return 0
	}
	return 100 * float64(b.GraphSteps) / float64(b.Steps)
}

// KVUsedBytes is the KV pool in use now.
func (b LiveBatch) KVUsedBytes() int64 { return max(b.KVCacheBytes-b.KVFreeBytes, 0) }

// KVBytesPerAudioSecond is one line's KV per second of audio: KV bytes per token x
// beams x tokens per audio second.
func (b LiveBatch) KVBytesPerAudioSecond() int64 {
	return int64(float64(b.KVBytesPerToken) * float64(max(b.Beams, 1)) * b.TokensPerAudioSecond)
}

// KVBytesPerSequence is the KV in use per decoding line now (0 when none decodes).
func (b LiveBatch) KVBytesPerSequence() int64 {
	if b.Decoding == 0 {
		return 0
	}
	return b.KVUsedBytes() / int64(b.Decoding)
}

// BatchPoint is one reading of a batch, compact for charts and JSON.
type BatchPoint struct {
	// T is the reading's time in Unix milliseconds.
	T                     int64   `json:"t"`
	Decoding              int     `json:"decoding"`
	InS2Mel               int     `json:"in_s2mel"`
	Waiting               int     `json:"waiting"`
	DecodeTokensPerSecond float64 `json:"tokens_per_second"`
	KVUsedBytes           int64   `json:"kv_used"`
}

// PointOf makes a BatchPoint of the batch read at t.
func (b LiveBatch) PointOf(t time.Time) BatchPoint {
	return BatchPoint{T: t.UnixMilli(), Decoding: b.Decoding, InS2Mel: b.InS2Mel, Waiting: b.Waiting,
		DecodeTokensPerSecond: b.DecodeTokensPerSecond, KVUsedBytes: b.KVUsedBytes()}
}

// Point is one sample, compact for charts and JSON.
type Point struct {
	// T is the sample's time in Unix milliseconds.
	T          int64   `json:"t"`
	UsedBytes  int64   `json:"used"`
	TotalBytes int64   `json:"total"`
	GPUPercent int     `json:"util"`
	TempC      int     `json:"temp"`
	PowerWatts float64 `json:"power"`
	Lost       bool    `json:"lost,omitempty"`
	// Missing has a bit set for every reading the device could not give.
	Missing Metric `json:"missing,omitempty"`
}

// PointOf makes a Point of a Sample.
func PointOf(s Sample) Point {
	return Point{T: s.Time.UnixMilli(), UsedBytes: s.UsedBytes, TotalBytes: s.TotalBytes, GPUPercent: s.GPUPercent,
		TempC: s.TemperatureC, PowerWatts: s.PowerWatts, Lost: s.Lost, Missing: s.Missing}
}

// Has reports whether the point carries metric m.
func (p Point) Has(m Metric) bool { return !p.Lost && p.Missing&m == 0 }
