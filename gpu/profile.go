package gpu

import (
	"math"

	"dubstudio/i18n"
	"dubstudio/tts"
)

// Profile is an admin's concurrency setting for one GPU. It applies live: the
// executor and the host pool resize when it changes.
type Profile struct {
	Name string
	// Concurrency is the most syntheses that run at once on the GPU.
	Concurrency int
	// ReservePct is the share of the card's memory never budgeted (0–90); the method
	// recommends 15.
	ReservePct float64
	// LongTextThresholdSec: a request predicted at least this long goes to the long
	// lane.
	LongTextThresholdSec float64
	// LongLaneLimit is the most long-lane requests that run at once (<= Concurrency).
	LongLaneLimit int
	// MaxGenSeconds caps the audio one request may generate; longer lines are split
	// (SplitText).
	MaxGenSeconds float64
	// SegmentTokens is IndexTTS's max_text_tokens_per_segment.
	SegmentTokens int
	// FP16 runs the GPT in half precision (about a third less GPT memory).
	FP16 bool
	// EmotionTextModel loads the Qwen emotion-from-text model (about 1 GB more per
	// host).
	EmotionTextModel bool
	// ShareWeights has the GPU's hosts hold one copy of the model's weights: the
	// first host (the lender) loads them and the others map them (CUDA IPC), each
	// keeping its own context, caches and activations. It needs an engine whose
	// hosts can (the bench host); each borrower then costs the calibration's
	// BorrowerBytes instead of a whole model.
	ShareWeights bool
	// Batching runs one batching host on the GPU (protocol 2): one copy of the
	// weights and a preallocated KV cache, decoding up to Concurrency lines at once in
	// one batch. It needs an engine whose hosts can batch (the bench host), and
	// excludes ShareWeights (there is one host, nothing to share).
	Batching bool
	// Beams is the rows each line decodes with on a batching host, 1..MaxBeams; 0
	// means tts.DefaultBeams (IndexTTS's 3, searched). One beam samples as IndexTTS2.infer
	// does (top-k 30, top-p 0.8, temperature 0.8), seeded by the line: a third of the
	// KV bytes and batch rows per line, less robust prosody (an unlucky draw is kept,
	// not outscored), and another seed gives other audio.
	Beams int
	// KVCacheGiB is the batching host's preallocated KV cache in GiB; 0 lets the
	// host take 40% of the memory free after its weights.
	KVCacheGiB float64
	// S2melPrecision is the batching host's s2mel DiT precision: S2melFP32 (the
	// default, IndexTTS-2's own; "" means it) or S2melBF16 (the DiT in bf16, its Euler
	// updates, conditioning and vocoder in fp32, as vllm-omni runs IndexTTS-2: faster
	// s2mel, audio about 0.1% apart). It needs Batching.
	S2melPrecision string
}

// S2mel precisions (Profile.S2melPrecision).
const (
	S2melFP32 = "fp32"
	S2melBF16 = "bf16"
)

// Limits on profile fields.
const (
	MaxReservePct     = 90
	MaxSegmentTokens  = 600 // IndexTTS-2.5 crashes on unsegmented input over about 600 tokens
	defaultSegTokens  = 120
	defaultReservePct = 15
	// MaxBeams is the most rows per line a profile may ask (0 asks for
	// tts.DefaultBeams).
	MaxBeams = 8
	// MaxBatchSequences is the most lines one batching host decodes at once
	// (Concurrency with Batching).
	MaxBatchSequences = 256
	// MaxKVCacheGiB bounds KVCacheGiB (the largest cards hold under 200 GiB).
	MaxKVCacheGiB = 1024
)

// DefaultProfile is a conservative starting point for an unprofiled GPU.
func DefaultProfile() Profile {
	return Profile{
		Name: "default", Concurrency: 2, ReservePct: defaultReservePct, LongTextThresholdSec: 15,
		LongLaneLimit: 1, MaxGenSeconds: 30, SegmentTokens: defaultSegTokens, FP16: true,
		S2melPrecision: S2melFP32,
	}
}

// S2melPrecisionOrDefault is the s2mel precision a batching host runs with.
func (p Profile) S2melPrecisionOrDefault() string {
	if p.S2melPrecision == "" {
		return S2melFP32
	}
	return p.S2melPrecision
}

// BeamsOrDefault is the rows per line a batching host decodes with.
func (p Profile) BeamsOrDefault() int {
	if p.Beams == 0 {
		return tts.DefaultBeams
	}
	return p.Beams
}

// KVCacheBytes is the KV cache a batching host is started with (0: the host's own
// choice).
func (p Profile) KVCacheBytes() int64 { return int64(p.KVCacheGiB * float64(GiB)) }

// FieldProblem is one invalid profile field, with the catalog message that explains it.
type FieldProblem struct {
	Field string // the Go field name, which forms use as input name
	Key   string // i18n message key
	Args  []any
}

// In returns the problem's text in lang.
func (p FieldProblem) In(lang i18n.Lang) string { return i18n.T(lang, p.Key, p.Args...) }

// ValidationError lists the invalid fields of a profile; it unwraps to ErrInvalid.
type ValidationError struct {
	Problems []FieldProblem
}

func (e *ValidationError) Error() string {
	s := "gpu: invalid profile:"
	for _, p := range e.Problems {
		s += " " + p.Field + ": " + p.In(i18n.EN)
	}
	return s
}

func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Field returns the problem with field, if any.
func (e *ValidationError) Field(field string) (FieldProblem, bool) {
	for _, p := range e.Problems {
		if p.Field == field {
			return p, true
		}
	}
	return FieldProblem{}, false
}

// Validate returns a *ValidationError listing every invalid field, or nil.
func (p Profile) Validate() error {
	var probs []FieldProblem
	add := func(field, key string, args ...any) {
		probs = append(probs, FieldProblem{Field: field, Key: key, Args: args})
	}
	if p.Name == "" {
		add("Name", "gpu.profile.name_required")
	}
	if p.Concurrency < 1 {
		add("Concurrency", "gpu.profile.concurrency_min", 1)
	}
	if math.IsNaN(p.ReservePct) || p.ReservePct < 0 || p.ReservePct > MaxReservePct {
		add("ReservePct", "gpu.profile.reserve_range", 0, MaxReservePct)
	}
	positive := func(field string, v float64) bool {
		if !(v > 0) || math.IsInf(v, 0) {
			add(field, "gpu.profile.must_be_positive")
			return false
		}
		return true
	}
	okThreshold := positive("LongTextThresholdSec", p.LongTextThresholdSec)
	okMaxGen := positive("MaxGenSeconds", p.MaxGenSeconds)
	if okThreshold && okMaxGen && p.LongTextThresholdSec > p.MaxGenSeconds {
		add("LongTextThresholdSec", "gpu.profile.threshold_over_max_gen", p.LongTextThresholdSec, p.MaxGenSeconds)
	}
	if positive("SegmentTokens", float64(p.SegmentTokens)) && p.SegmentTokens > MaxSegmentTokens {
		add("SegmentTokens", "gpu.profile.segment_tokens_max", MaxSegmentTokens)
	}
	if p.LongLaneLimit < 1 || (p.Concurrency >= 1 && p.LongLaneLimit > p.Concurrency) {
		add("LongLaneLimit", "gpu.profile.lane_limit_range", 1, max(p.Concurrency, 1))
	}
	if p.Beams < 0 || p.Beams > MaxBeams {
		add("Beams", "gpu.profile.beams_range", 1, MaxBeams)
	}
	if math.IsNaN(p.KVCacheGiB) || p.KVCacheGiB < 0 || p.KVCacheGiB > MaxKVCacheGiB {
		add("KVCacheGiB", "gpu.profile.kv_cache_range", MaxKVCacheGiB)
	}
	if p.Batching && p.Concurrency > MaxBatchSequences {
		add("Concurrency", "gpu.profile.batch_concurrency_max", MaxBatchSequences)
	}
	if p.Batching && p.ShareWeights {
		add("ShareWeights", "gpu.profile.batching_share")
	}
	switch p.S2melPrecision {
	case "", S2melFP32:
	case S2melBF16:
		if !p.Batching {
			add("S2melPrecision", "gpu.profile.s2mel_needs_batching")
		}
	default:
		add("S2melPrecision", "gpu.profile.s2mel_precision", S2melFP32, S2melBF16)
	}
	if len(probs) == 0 {
		return nil
	}
	return &ValidationError{Problems: probs}
}

// Budget returns the memory the executor may commit on a card of total bytes with
// foreign bytes held by processes that are not ours: the reserve is a share of what
// is left to us, so that a card shared with another program (a 24 GiB card's worth
// left of a bigger one) keeps the same headroom as a card of that size.
func (p Profile) Budget(total, foreign int64) int64 {
	return int64(float64(total-foreign) * (1 - p.ReservePct/100))
}

// WeightsRole is the part the i-th host (from 0) started on a GPU plays in sharing
// the weights: with ShareWeights the first lends and the others borrow.
func (p Profile) WeightsRole(i int) WeightsRole {
	switch {
	case !p.ShareWeights:
		return WeightsOwn
	case i == 0:
		return WeightsLend
	default:
		return WeightsBorrow
	}
}

// Hosts is how many model hosts the GPU's pool runs for p: one batching host, or one
// per seat.
func (p Profile) Hosts() int {
	if p.Batching {
		return min(p.Concurrency, 1)
	}
	return p.Concurrency
}

// AutoKVCacheShare is the share of the memory free after the weights that a batching
// host takes for its KV cache when the profile leaves the size to it (KVCacheGiB 0);
// bench_host.py's AUTO_KV_CACHE_SHARE, which test_bench_host.py checks against it.
const AutoKVCacheShare = 0.4

// BatchResident is what a batching host of p is predicted to hold on a card of total
// bytes with foreign bytes held by others, before it reports its own figure: the
// weights (cal.Resident) plus the profile's KV cache, or the host's own share
// (AutoKVCacheShare) of the memory free after the weights.
func BatchResident(p Profile, cal Calibration, total, foreign int64) int64 {
	if p.KVCacheGiB > 0 {
		return cal.Resident() + p.KVCacheBytes()
	}
	return cal.Resident() + int64(AutoKVCacheShare*float64(max(total-foreign-cal.Resident(), 0)))
}

// IsLong reports whether a request of audioSeconds belongs to the long lane.
func (p Profile) IsLong(audioSeconds float64) bool { return audioSeconds >= p.LongTextThresholdSec }

// CheckFits refuses a profile that cannot run even one synthesis on a card of total bytes
// with foreign bytes held by other processes: one host's resident memory plus the
// predicted peak of a MaxGenSeconds request must fit the budget. The refusal is an
// *i18n.Error (its In gives the user's language) carrying the measured numbers, and
// unwraps to ErrNeverFits; an invalid profile is its *ValidationError.
func CheckFits(p Profile, cal Calibration, total, foreign int64) error {
	if err := p.Validate(); err != nil {
		return err
	}
	resident := cal.Resident()
	if p.Batching {
		resident = BatchResident(p, cal, total, foreign)
	}
	peak := cal.PeakBytes(p.MaxGenSeconds)
	budget := p.Budget(total, foreign)
	if resident+peak <= budget {
		return nil
	}
	return i18n.Errorf(ErrNeverFits, "gpu.profile.does_not_fit",
		gb(resident), gb(peak), p.MaxGenSeconds, gb(max(budget, 0)), gb(total), p.ReservePct, gb(foreign))
}

// ModelsBytes is the memory n hosts of profile p hold after load: n models, or with
// shared weights one model and n-1 borrowers. With batching there is one host
// whatever n: its weights and KV pool (BatchResident, the host's automatic KV size
// counted as nothing until the host reports it; callers that know the card use
// BatchResident).
func ModelsBytes(p Profile, cal Calibration, n int) int64 {
	if n <= 0 {
		return 0
	}
	if p.Batching {
		return BatchResident(p, cal, 0, 0)
	}
	if !p.ShareWeights {
		return int64(n) * cal.Resident()
	}
	return cal.Resident() + int64(n-1)*cal.Borrower()
}

// fitHosts returns how many hosts fit in room when the first costs first and each
// other one next.
func fitHosts(room, first, next int64) int {
	if first <= 0 || next <= 0 || room < first {
		return 0
	}
	return 1 + int((room-first)/next)
}

// ConcurrencyThatFits returns the concurrency that fits when every host has run the longest
// request and kept its cache (the worst steady state, without cache releases).
func ConcurrencyThatFits(p Profile, cal Calibration, total, foreign int64) int {
	peak := cal.PeakBytes(p.MaxGenSeconds)
	return fitHosts(p.Budget(total, foreign), cal.Resident()+peak, ModelsBytes(p, cal, 2)-cal.Resident()+peak)
}

// HostsThatFit returns how many hosts fit under the executor: every host's model
// (or borrower), and room beside them for the peak of the longest request on one of
// them (the executor frees caches and holds lines back while memory is short).
//
// With batching it is the lines the one host may have in flight: Concurrency (at most
// MaxBatchSequences) when the host and one longest line fit, else 0.
func HostsThatFit(p Profile, cal Calibration, total, foreign int64) int {
	room := p.Budget(total, foreign) - cal.PeakBytes(p.MaxGenSeconds)
	if p.Batching {
		if BatchResident(p, cal, total, foreign) > room {
			return 0
		}
		return min(max(p.Concurrency, 1), MaxBatchSequences)
	}
	return fitHosts(room, cal.Resident(), ModelsBytes(p, cal, 2)-cal.Resident())
}

// LongLinesThatFit returns how many of the longest requests n hosts can run at once
// with the memory left beside their models: a long-lane limit that only holds long
// lines back where memory is short (at least 1, at most n).
func LongLinesThatFit(p Profile, cal Calibration, n int, total, foreign int64) int {
	room := p.Budget(total, foreign) - ModelsBytes(p, cal, n)
	peak := cal.PeakBytes(p.MaxGenSeconds)
	if peak <= 0 {
		return n
	}
	return min(max(int(room/peak), 1), n)
}

// gb renders bytes as decimal gigabytes for messages, as nvidia-smi users read them.
func gb(b int64) float64 { return math.Round(float64(b)/1e8) / 10 }
