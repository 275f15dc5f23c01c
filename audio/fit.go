package audio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"dubstudio/i18n"
)

// Duration lock defaults, used where FitParams leaves a field zero. They match the
// project settings' defaults.
const (
	DefaultStretchMin       = 0.85
	DefaultStretchMax       = 1.25
	DefaultGapBorrowMs      = 300
	DefaultMaxSpeedStep     = 0.15
	DefaultSilenceThreshold = -50.0 // dBFS
	DefaultLoudness         = -23.0 // LUFS, EBU R128
	DefaultSampleRate       = 48000
	// DefaultMaxSlotMs is the longest slot Fit accepts when FitParams.MaxSlotMs is
	// zero: the highest MAX_LINE_SECONDS allows (10 minutes, 115 MB of float32
	// samples at 48 kHz), so that the padded take's memory is bounded whatever a
	// line's timecodes say.
	DefaultMaxSlotMs = 600_000
)

const (
	// trimMargin is kept either side of the speech found by the silence threshold, so
	// that soft onsets and decays just under it are not clipped.
	trimMargin = 5 * time.Millisecond
	// fadeOut is applied where Fit cuts the output to its exact length, so the cut
	// does not click.
	fadeOut = 5 * time.Millisecond
	// cutFade is applied instead where the cut removes speech (a take too long for
	// its slot, stretched at the limit): the word cut off fades out over it rather
	// than stopping dead mid-syllable, and the review view shows how much was cut.
	cutFade = 30 * time.Millisecond
	// peakCeiling is the highest sample peak loudness gain may produce (-1 dBFS).
	peakCeiling = -1.0
)

// FitParams describes one take to fit into its line's slot. Zero numeric fields take
// the defaults above; GapBorrowMs and MaxSpeedStep are turned off with a negative
// value, since zero means "the default" for them too.
type FitParams struct {
	// InputPath is the synthesized take, in any format ffmpeg decodes. 16-bit PCM WAV
	// is read directly.
	InputPath string
	// Input, when set, is the content of InputPath, which the caller has in memory
	// already: a 16-bit PCM WAV is then decoded from it without reading the file.
	Input []byte
	// OutputPath receives the fitted take: mono 16-bit PCM WAV at SampleRate. It may
	// equal InputPath.
	OutputPath string
	// OutputFor, set instead of OutputPath, names the output from the take's
	// SHA-256, for a store that files takes by content (studio.BlobStore.Dest): the
	// take is then written once, straight into its place.
	OutputFor func(sha256 string) (string, error)
	// SlotMs is the line's length (end - start); it must be positive and at most
	// MaxSlotMs.
	SlotMs int
	// MaxSlotMs is the longest slot accepted (default DefaultMaxSlotMs): Fit holds
	// the whole slot in memory, so a longer one is refused with ErrInvalid rather
	// than padded.
	MaxSlotMs int
	// GapMs is the silence between this line's end and the next line's start (0 or
	// less: none, the lines touch or overlap).
	GapMs int
	// GapBorrowMs caps how much of GapMs the take may run into (default 300 ms).
	GapBorrowMs int
	// StretchMin and StretchMax bound the tempo ratio (speech length / available
	// length; above 1 speeds up). Defaults 0.85 and 1.25.
	StretchMin, StretchMax float64
	// SlowDown lets Fit slow short speech down (to StretchMin at most) to fill the
	// slot. Without it speech that fits is padded with silence, never slowed.
	SlowDown bool
	// PrevRatio is the ratio applied to the previous line of the same character (0 if
	// none). With MaxSpeedStep (default 0.15) it keeps the tempo from jumping audibly
	// between neighbouring lines when a closer ratio still fits.
	PrevRatio    float64
	MaxSpeedStep float64
	// SilenceThresholdDB is the level under which leading and trailing audio counts
	// as silence and is trimmed (default -50 dBFS).
	SilenceThresholdDB float64
	// LoudnessLUFS is the integrated loudness the take is normalised to (default -23).
	LoudnessLUFS float64
	// SampleRate of the output (default 48000).
	SampleRate int

	// forceAtempo makes Fit stretch with atempo even where rubberband exists (tests).
	forceAtempo bool
}

// FitTimings is the wall time Fit spent in each stage.
type FitTimings struct {
	Decode   time.Duration // reading the take (ffmpeg only for formats other than 16-bit WAV)
	Trim     time.Duration // silence trim and planning
	Stretch  time.Duration // time-stretch and resampling (ffmpeg), when needed
	Loudness time.Duration // measurement and gain
	Write    time.Duration // encoding, sync and rename
}

// Total returns the sum of the stages.
func (t FitTimings) Total() time.Duration {
	return t.Decode + t.Trim + t.Stretch + t.Loudness + t.Write
}

// Hint is a message for the editor about a take, as a catalog key and its arguments;
// In renders it. The zero Hint says nothing. Hints are meant to be stored (as JSON)
// and rendered later in the reader's language, so their messages format arguments
// with %v: a number read back from JSON is a float64, which %d would garble.
type Hint struct {
	Key  string `json:"key"`
	Args []any  `json:"args,omitempty"`
}

// In returns the hint's text in lang, or "" for the zero Hint.
func (h Hint) In(lang i18n.Lang) string {
	if h.Key == "" {
		return ""
	}
	return i18n.T(lang, h.Key, h.Args...)
}

// FitResult is what Fit did to a take.
type FitResult struct {
	OutputPath string
	// Samples is the output's exact length: (SlotMs + BorrowedMs) × SampleRate / 1000.
	Samples    int64
	SampleRate int
	// Ratio is the tempo ratio applied (1: none; above 1: faster).
	Ratio float64
	// NeededRatio is speech length / available length, available being the slot plus
	// as much of the gap as may be borrowed. Above StretchMax the take needs review.
	NeededRatio float64
	// SpeechMs is the take's length after the silence trim, before stretching.
	SpeechMs int
	// BorrowedMs is how far the output runs into the following gap.
	BorrowedMs int
	// CutMs is how much of the (stretched) take the cut to Samples removed: speech
	// past the slot and the borrowed time, for a take too long to fit. The cut fades
	// out over cutFade (30 ms) rather than stopping mid-word.
	CutMs int
	// LoudnessLUFS is the output's integrated loudness (SilenceLUFS for silence), and
	// GainDB the gain applied to reach it. The loudness is the input's measurement
	// plus the gain: quantising to 16 bits changes it by far less than anyone hears or
	// the 0.1 LU that loudness meters show (a test measures the output to check).
	LoudnessLUFS float64
	GainDB       float64
	// SHA256 is the hex SHA-256 of the output file's bytes, computed as it was
	// written, for storing it by content without reading it again; Bytes is its size.
	SHA256 string
	Bytes  int64
	// NeedsReview is set when the take could not be fitted within the limits (the
	// output is then the best effort at the limit, cut to the slot) or is silent; Hint
	// says why and what to do.
	NeedsReview bool
	Hint        Hint
	Elapsed     FitTimings
}

// Fit is the duration lock: it fits the take at p.InputPath to its slot and writes
// the result to p.OutputPath (or where p.OutputFor says). It trims leading and
// trailing silence, borrows from the following gap what the speech needs (up to
// GapBorrowMs), time-stretches with pitch preserved when the speech is still too
// long (Rubber Band, or chained atempo where ffmpeg lacks it), pads with silence or
// cuts to the exact sample count, and normalises loudness (BS.1770 measurement and gain, peaks kept under -1 dBFS).
//
// A take that cannot fit within StretchMax is still written, stretched at the limit
// and cut to the available length so that the editor can listen to it, and the
// result says NeedsReview with a Hint. Silent takes are written as silence and need
// review too. The output is written to a temporary file and renamed into place only
// when complete; a full disk gives an error that unwraps to ErrNoSpace.
func Fit(ctx context.Context, p FitParams) (FitResult, error) {
	p, err := p.withDefaults()
	if err != nil {
		return FitResult{}, err
	}
	var res FitResult
	res.SampleRate = p.SampleRate

	t0 := time.Now()
	x, inRate, release, err := decodeMono(ctx, p.InputPath, p.Input, p.SampleRate)
	if err != nil {
		return FitResult{}, err
	}
	defer release() // x, and y where it is part of x
	res.Elapsed.Decode = time.Since(t0)

	t0 = time.Now()
	start, end := trimSilence(x, inRate, p.SilenceThresholdDB)
	x = x[start:end]
	speech := float64(len(x)) * 1000 / float64(inRate) // ms
	res.SpeechMs = int(math.Round(speech))
	plan := planFit(speech, p)
	res.Ratio, res.NeededRatio = plan.Ratio, plan.Needed
	res.Elapsed.Trim = time.Since(t0)

	t0 = time.Now()
	y, err := stretch(ctx, x, inRate, p.SampleRate, plan.Ratio, !p.forceAtempo && hasRubberband())
	if err != nil {
		return FitResult{}, err
	}
	res.Elapsed.Stretch = time.Since(t0)

	// Borrow what the stretched speech needs, then pad or cut to the exact length.
	slotSamples := SamplesFor(p.SlotMs, p.SampleRate)
	if over := int64(len(y)) - slotSamples; over > 0 && plan.MaxBorrowMs > 0 {
		ms := (over*1000 + int64(p.SampleRate) - 1) / int64(p.SampleRate)
		res.BorrowedMs = int(min(ms, int64(plan.MaxBorrowMs)))
	}
	res.Samples = SamplesFor(p.SlotMs+res.BorrowedMs, p.SampleRate)
	if cut := int64(len(y)) - res.Samples; cut > 0 {
		res.CutMs = int(cut * 1000 / int64(p.SampleRate))
	}
	y = fitLength(y, res.Samples, p.SampleRate)

	t0 = time.Now()
	var gain float32
	res.LoudnessLUFS, res.GainDB, gain = normalize(y, p.SampleRate, p.LoudnessLUFS)
	res.Elapsed.Loudness = time.Since(t0)

	switch {
	case len(x) == 0:
		res.NeedsReview = true
		res.Hint = Hint{Key: "audio.fit.silent"}
	case plan.Review:
		res.NeedsReview = true
		pct := max(1, int(math.Round((plan.Needed/p.StretchMax-1)*100)))
		res.Hint = Hint{Key: "audio.fit.too_long", Args: []any{pct}}
	}

	if err := ctx.Err(); err != nil {
		return FitResult{}, fmt.Errorf("error fitting %s: %w", p.InputPath, err)
	}
	t0 = time.Now()
	out, releaseOut, err := encodeMonoWAV(y, gain, p.SampleRate)
	if err != nil {
		return FitResult{}, err
	}
	defer releaseOut()
	sum := sha256.Sum256(out)
	res.SHA256, res.Bytes = hex.EncodeToString(sum[:]), int64(len(out))
	res.OutputPath = p.OutputPath
	if p.OutputFor != nil {
		if res.OutputPath, err = p.OutputFor(res.SHA256); err != nil {
			return FitResult{}, err
		}
	}
	if err := WriteBytesAtomic(res.OutputPath, out); err != nil {
		return FitResult{}, err
	}
	res.Elapsed.Write = time.Since(t0)
	return res, nil
}

// withDefaults fills zero fields and checks the rest.
func (p FitParams) withDefaults() (FitParams, error) {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.StretchMin, DefaultStretchMin)
	def(&p.StretchMax, DefaultStretchMax)
	def(&p.MaxSpeedStep, DefaultMaxSpeedStep)
	def(&p.SilenceThresholdDB, DefaultSilenceThreshold)
	def(&p.LoudnessLUFS, DefaultLoudness)
	if p.GapBorrowMs == 0 {
		p.GapBorrowMs = DefaultGapBorrowMs
	}
	if p.SampleRate == 0 {
		p.SampleRate = DefaultSampleRate
	}
	if p.MaxSlotMs == 0 {
		p.MaxSlotMs = DefaultMaxSlotMs
	}
	var bad []string
	if _, err := mediaArg(p.InputPath); err != nil {
		bad = append(bad, "input: "+err.Error())
	}
	if p.OutputFor == nil {
		if _, err := mediaArg(p.OutputPath); err != nil {
			bad = append(bad, "output: "+err.Error())
		}
	} else if p.OutputPath != "" {
		bad = append(bad, "both an output path and a way to name the output")
	}
	if p.SlotMs <= 0 || p.SlotMs > p.MaxSlotMs {
		bad = append(bad, fmt.Sprintf("slot of %d ms (at most %d ms)", p.SlotMs, p.MaxSlotMs))
	}
	if p.GapBorrowMs > p.MaxSlotMs {
		bad = append(bad, fmt.Sprintf("gap borrow of %d ms (at most %d ms)", p.GapBorrowMs, p.MaxSlotMs))
	}
	if !(p.StretchMin > 0 && p.StretchMin <= 1 && p.StretchMax >= 1 && p.StretchMax <= 4) {
		bad = append(bad, fmt.Sprintf("stretch limits %g-%g", p.StretchMin, p.StretchMax))
	}
	if p.SampleRate < 8000 || p.SampleRate > 192000 {
		bad = append(bad, fmt.Sprintf("sample rate %d", p.SampleRate))
	}
	if p.SilenceThresholdDB >= 0 || p.LoudnessLUFS >= 0 {
		bad = append(bad, fmt.Sprintf("levels %g dB / %g LUFS", p.SilenceThresholdDB, p.LoudnessLUFS))
	}
	if len(bad) > 0 {
		return p, fmt.Errorf("%w: fit: %s", ErrInvalid, strings.Join(bad, "; "))
	}
	return p, nil
}

// fitPlan is the duration lock's decision for one take.
type fitPlan struct {
	Needed      float64 // speech / (slot + the borrow it needs, up to MaxBorrowMs)
	Ratio       float64 // tempo to apply
	MaxBorrowMs int     // how much of the gap may be used
	Review      bool    // Needed is over StretchMax
}

// planFit decides the tempo for speechMs of speech. Borrowing from the gap comes
// before stretching; stretching never goes past the limits; speech that fits is not
// slowed down unless p.SlowDown; and the ratio moves towards p.PrevRatio, within
// MaxSpeedStep of it, when a closer ratio still fits.
func planFit(speechMs float64, p FitParams) fitPlan {
	slot := float64(p.SlotMs)
	var plan fitPlan
	if p.GapBorrowMs > 0 && p.GapMs > 0 {
		plan.MaxBorrowMs = min(p.GapBorrowMs, p.GapMs)
	}
	avail := slot + float64(plan.MaxBorrowMs)
	switch {
	case speechMs <= slot:
		plan.Needed = speechMs / slot
	case speechMs <= avail:
		plan.Needed = 1
	default:
		plan.Needed = speechMs / avail
	}
	lo := 1.0
	if p.SlowDown {
		lo = p.StretchMin
	}
	plan.Ratio = min(max(plan.Needed, lo), p.StretchMax)
	plan.Review = plan.Needed > p.StretchMax
	if plan.Review || speechMs == 0 {
		return plan
	}
	if prev, step := p.PrevRatio, p.MaxSpeedStep; prev > 0 && step >= 0 && math.Abs(plan.Ratio-prev) > step {
		c := min(max(plan.Ratio, prev-step), prev+step)
		c = min(max(c, lo, plan.Needed), p.StretchMax) // still fits, still within limits
		if math.Abs(c-prev) < math.Abs(plan.Ratio-prev) {
			plan.Ratio = c
		}
	}
	return plan
}

// decodeMono reads path (whose content is b, when the caller has it) as mono samples
// in [-1, 1). A 16-bit PCM WAV is decoded here at its own rate, into a pooled buffer
// that release gives back; anything else is decoded by ffmpeg at fallbackRate.
func decodeMono(ctx context.Context, path string, b []byte, fallbackRate int) (x []float32, rate int, release func(), err error) {
	releaseFile := func() {}
	if b == nil {
		if b, releaseFile, err = ReadFilePooled(path); err != nil {
			return nil, 0, nil, fmt.Errorf("error reading %s: %w", path, err)
		}
	}
	f, data, err := wavData(b)
	if err == nil {
		x, release = monoFloats(wholeFrames(data, f.Channels), f.Channels)
	}
	releaseFile()
	if err == nil {
		return x, f.SampleRate, release, nil
	}
	if errors.Is(err, errNoRecording) {
		return nil, 0, nil, userError(ErrNotAudio, fmt.Errorf("error decoding %s: %w", path, err), "audio.unreadable")
	}
	x, rate, err = decodeFFmpeg(ctx, path, fallbackRate)
	return x, rate, func() {}, err
}

// decodeFFmpeg decodes path as mono samples at rate.
func decodeFFmpeg(ctx context.Context, path string, rate int) ([]float32, int, error) {
	in, err := mediaArg(path)
	if err != nil {
		return nil, 0, err
	}
	var out bytes.Buffer
	_, err = runTool(ctx, ffmpegBin, []string{
		"-v", "error", "-nostdin", "-hide_banner", "-i", in,
		"-map", "0:a:0", "-ac", "1", "-ar", strconv.Itoa(rate), "-f", "f32le", "pipe:1",
	}, nil, &out)
	var te *toolError
	if errors.As(err, &te) {
		return nil, 0, userError(ErrNotAudio, fmt.Errorf("error decoding %s: %w", path, err), "audio.unreadable")
	}
	if err != nil {
		return nil, 0, fmt.Errorf("error decoding %s: %w", path, err)
	}
	return bytesToFloat(out.Bytes()), rate, nil
}

// downmix averages p's channels into mono floats.
func downmix(p PCM) []float32 {
	if p.Channels == 1 {
		return pcmToFloat(p.Samples)
	}
	out := make([]float32, p.Frames())
	for i := range out {
		var s int32
		for c := range p.Channels {
			s += int32(p.Samples[i*p.Channels+c])
		}
		out[i] = float32(s) / float32(p.Channels) / 32768
	}
	return out
}

func pcmToFloat(s []int16) []float32 {
	out := make([]float32, len(s))
	for i, v := range s {
		out[i] = float32(v) / 32768
	}
	return out
}

// monoFloats decodes little-endian 16-bit samples of channels interleaved channels
// straight into mono floats, as downmix does for PCM; mono goes into a pooled buffer
// that release gives back.
func monoFloats(data []byte, channels int) (x []float32, release func()) {
	if channels != 1 {
		return downmix(pcmFrom(wavFormat{Channels: channels}, data)), func() {}
	}
	x, release = pooled[float32](&floatPool, len(data)/2)
	data = data[:2*len(x)] // one bounds check for the loop
	for i := range x {
		x[i] = float32(int16(uint16(data[2*i])|uint16(data[2*i+1])<<8)) / 32768
	}
	return x, release
}

// quantise rounds v (full scale ±1) to a 16-bit sample, half away from zero as
// math.Round does, clipping.
//
// It adds ±0.5 and truncates instead of calling math.Round, whose branches on each
// sample's exponent were a third of encoding a take. The result is the same for every
// float32: f has at most 24 significant bits and |f| < 2^15 where it is not clipped,
// so f ± 0.5 is exact (or, for |f| < 2^-37, rounds to ±0.5, which truncates to 0 as
// Round(f) is), and truncating it is rounding f half away from zero.
func quantise(v float32) int16 {
	f := float64(v) * 32768
	switch {
	case f >= math.MaxInt16:
		return math.MaxInt16
	case f <= math.MinInt16:
		return math.MinInt16
	default:
		return int16(f + math.Copysign(0.5, f))
	}
}

// encodeMonoWAV returns x × gain quantised as a canonical mono 16-bit WAV file, as
// WriteWAV writes it, in a pooled buffer that release gives back: it is then hashed
// and written in one piece. The gain is applied here, sample by sample as normalize
// computed it, rather than in a pass of its own over x.
func encodeMonoWAV(x []float32, gain float32, rate int) (b []byte, release func(), err error) {
	h, err := wavHeader(rate, 1, int64(len(x)))
	if err != nil {
		return nil, nil, err
	}
	b, release = pooled[byte](&bytePool, len(h)+2*len(x))
	copy(b, h)
	s := b[len(h):]
	s = s[:2*len(x)] // one bounds check for the loop
	for i, v := range x {
		q := uint16(quantise(v * gain))
		s[2*i], s[2*i+1] = byte(q), byte(q>>8)
	}
	return b, release, nil
}

func bytesToFloat(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func floatToBytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// trimSilence returns the bounds of x once leading and trailing samples under
// thresholdDB (dBFS peak) are removed, keeping trimMargin either side. All-silent x
// gives an empty range.
func trimSilence(x []float32, rate int, thresholdDB float64) (start, end int) {
	thr := float32(math.Pow(10, thresholdDB/20))
	first, last := -1, -1
	for i, v := range x {
		if v >= thr || -v >= thr {
			first = i
			break
		}
	}
	if first < 0 {
		return 0, 0
	}
	for i := len(x) - 1; i >= first; i-- {
		if v := x[i]; v >= thr || -v >= thr {
			last = i
			break
		}
	}
	margin := int(int64(rate) * int64(trimMargin) / int64(time.Second))
	return max(0, first-margin), min(len(x), last+1+margin)
}

// stretchPad is how much silence a take shorter than it gets after it before it is
// stretched, cut from the result again: ffmpeg's stretchers fail on a few tens of
// milliseconds of input ("Error marking filters as finished"), as a cough or a
// breath may be.
const stretchPad = 100 * time.Millisecond

// stretch changes x's tempo by ratio with its pitch kept, and resamples it from
// inRate to outRate, in one ffmpeg run. Nothing to do means no ffmpeg at all.
func stretch(ctx context.Context, x []float32, inRate, outRate int, ratio float64, rubberband bool) ([]float32, error) {
	if pad := int(int64(inRate) * int64(stretchPad) / int64(time.Second)); ratio != 1 && len(x) > 0 && len(x) < pad {
		want := int(math.Round(float64(len(x)) * float64(outRate) / float64(inRate) / ratio))
		padded := append(slices.Clip(x), make([]float32, pad)...)
		y, err := stretch(ctx, padded, inRate, outRate, ratio, rubberband)
		if err != nil {
			return nil, err
		}
		return y[:min(len(y), want)], nil
	}
	var filters []string
	if ratio != 1 && len(x) > 0 {
		if rubberband {
			filters = append(filters, "rubberband=tempo="+strconv.FormatFloat(ratio, 'f', 6, 64))
		} else {
			filters = append(filters, atempoChain(ratio)...)
		}
	}
	if inRate != outRate && len(x) > 0 {
		filters = append(filters, "aresample="+strconv.Itoa(outRate))
	}
	if len(filters) == 0 {
		return x, nil
	}
	var out bytes.Buffer
	out.Grow(int(float64(len(x))*float64(outRate)/float64(inRate)/ratio)*4 + 1<<16)
	_, err := runTool(ctx, ffmpegBin, []string{
		"-v", "error", "-nostdin", "-hide_banner",
		"-f", "f32le", "-ar", strconv.Itoa(inRate), "-ac", "1", "-i", "pipe:0",
		"-af", strings.Join(filters, ","),
		"-f", "f32le", "-ar", strconv.Itoa(outRate), "-ac", "1", "pipe:1",
	}, bytes.NewReader(floatToBytes(x)), &out)
	if err != nil {
		return nil, fmt.Errorf("error stretching audio by %.3f: %w", ratio, err)
	}
	return bytesToFloat(out.Bytes()), nil
}

// atempoChain splits ratio into atempo filters, each within atempo's 0.5-2.0.
func atempoChain(ratio float64) []string {
	var chain []string
	for ratio > 2 {
		chain = append(chain, "atempo=2")
		ratio /= 2
	}
	for ratio < 0.5 {
		chain = append(chain, "atempo=0.5")
		ratio /= 0.5
	}
	return append(chain, "atempo="+strconv.FormatFloat(ratio, 'f', 6, 64))
}

// hasRubberband reports whether this ffmpeg has the rubberband filter (Debian's does;
// builds without librubberband do not).
var hasRubberband = sync.OnceValue(func() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ffmpegBin, "-hide_banner", "-filters").Output()
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == "rubberband" {
			return true
		}
	}
	return false
})

// fitLength pads y with silence or cuts it to n samples. The take fades in over
// fadeOut, and where it is padded fades out over fadeOut too: a take whose file
// starts or ends mid-waveform (a generation cut off by its token cap, speech
// without leading silence) would otherwise meet the slot's silence with a step, a
// click; where the trim kept silence either side, the fades touch only that. A cut
// fades out over fadeOut; one that removes more than fadeOut of audio (speech cut
// short) over cutFade.
func fitLength(y []float32, n int64, rate int) []float32 {
	short := samplesIn(fadeOut, rate)
	in := min(len(y), short)
	for i := range in {
		y[i] *= float32(i) / float32(in)
	}
	if int64(len(y)) <= n {
		for i := range in {
			y[len(y)-1-i] *= float32(i) / float32(in)
		}
		return append(y, make([]float32, n-int64(len(y)))...)
	}
	fade := short
	if int64(len(y))-n > int64(short) {
		fade = samplesIn(cutFade, rate)
	}
	y = y[:n]
	fade = min(len(y), fade)
	for i := range fade {
		y[len(y)-1-i] *= float32(i) / float32(fade)
	}
	return y
}

// samplesIn is the number of samples d lasts at rate.
func samplesIn(d time.Duration, rate int) int {
	return int(int64(rate) * int64(d) / int64(time.Second))
}

// normalize returns the gain that brings y to target LUFS, limited so that the peak
// stays under peakCeiling (in dB, and as the factor to multiply y's samples with),
// and the loudness expected once applied. Silence is left alone (a gain of 1).
func normalize(y []float32, rate int, target float64) (lufs, gainDB float64, gain float32) {
	l, ok := integratedLoudness(y, rate)
	if !ok {
		return SilenceLUFS, 0, 1
	}
	gainDB = target - l
	if pk := peak(y); pk > 0 {
		gainDB = min(gainDB, peakCeiling-20*math.Log10(pk))
	}
	return l + gainDB, gainDB, float32(math.Pow(10, gainDB/20))
}
