package audio

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Ducking's defaults (DuckParams; the settings BED_DUCK_*): the bed is compressed by
// the dialogue itself (ffmpeg's sidechaincompress), from a threshold of -34 dBFS at
// 4:1, reacting in 20 ms and recovering over 400 ms. Takes are loudness-normalised when fitted, so
// the depth is about the same for every line: speech near -20 dBFS RMS pulls the
// bed down by about 15 dB (16.5 dB measured in TestMixOverBedDucksAndNormalises).
const (
	DefaultDuckThresholdDB = -34
	DefaultDuckRatio       = 4
	DefaultDuckAttackMs    = 20
	DefaultDuckReleaseMs   = 400
	// DefaultMixLUFS is the integrated loudness a full mix over the bed is brought
	// to (EBU R128), and DefaultMixTruePeakDB the ceiling its peaks are limited to.
	DefaultMixLUFS       = -23
	DefaultMixTruePeakDB = -1
)

// BedParams describes a bed rendered for a programme: its sound (any audio or video
// file ffmpeg reads) resampled, mixed to Channels (mono as (L+R)/2), trimmed or padded with silence to
// exactly Samples frames from 0, as a 16- or 24-bit PCM WAV.
type BedParams struct {
	InputPath, OutputPath string
	// SampleRate of the output (default 48000); Channels 1 (default) or 2.
	SampleRate, Channels int
	// BitDepth 16 (default) or 24; TimeReference, when not nil, a Broadcast WAV time
	// reference (WAVFormat).
	BitDepth      int
	TimeReference *int64
	Samples       int64
}

func (p *BedParams) defaults() error {
	if p.SampleRate == 0 {
		p.SampleRate = DefaultSampleRate
	}
	if p.Channels == 0 {
		p.Channels = 1
	}
	if p.BitDepth == 0 {
		p.BitDepth = 16
	}
	if p.Channels != 1 && p.Channels != 2 || p.Samples < 0 {
		return fmt.Errorf("%w: bed of %d channels, %d samples", ErrInvalid, p.Channels, p.Samples)
	}
	return nil
}

// RenderBed writes the bed of a programme (BedParams): the same length, rate, depth
// and time reference as its stems, so it lines up with them from the first sample.
// ffmpeg decodes and converts; the samples are streamed into the file, so memory
// does not grow with the programme. The file appears only when complete.
func RenderBed(ctx context.Context, p BedParams) error {
	if err := p.defaults(); err != nil {
		return err
	}
	in, err := mediaArg(p.InputPath)
	if err != nil {
		return err
	}
	n := strconv.FormatInt(p.Samples, 10)
	info, err := Probe(ctx, p.InputPath)
	if err != nil {
		return err
	}
	// Channels keep their level: a mono bed goes to both sides as it is, a stereo
	// one to mono as (L+R)/2 (ffmpeg's own -ac takes a centre 3 dB down either way);
	// more channels are first folded to stereo by ffmpeg's downmix.
	layout := "aformat=channel_layouts=stereo"
	switch {
	case info.Channels == 1 && p.Channels == 1:
		layout = "aformat=channel_layouts=mono"
	case info.Channels == 1:
		layout = "pan=stereo|c0=c0|c1=c0"
	case p.Channels == 1:
		layout += ",pan=mono|c0=0.5*c0+0.5*c1"
	}
	args := []string{"-v", "error", "-nostdin", "-hide_banner", "-i", in, "-vn", "-sn", "-dn",
		"-af", "aresample=" + strconv.Itoa(p.SampleRate) + "," + layout + ",atrim=end_sample=" + n + ",apad=whole_len=" + n}
	return ffmpegToWAV(ctx, p.OutputPath, args, p.SampleRate, p.Channels, p.BitDepth, p.TimeReference, p.Samples)
}

// DuckParams set the sidechain compression that ducks the bed under the dialogue;
// zero fields take the defaults.
type DuckParams struct {
	// ThresholdDB is the dialogue's level (dBFS, RMS) above which the bed is turned
	// down; Ratio how hard (4: 4 dB over the threshold give 1 dB); AttackMs how fast
	// it goes down when a line starts, ReleaseMs how slowly it comes back after.
	ThresholdDB, Ratio, AttackMs, ReleaseMs float64
}

// Ranges of DuckParams that ffmpeg's sidechaincompress takes (its threshold is a
// level from 0.000976563, -60.2 dBFS, to 1).
const (
	MinDuckThresholdDB, MaxDuckThresholdDB = -60, 0
	MinDuckRatio, MaxDuckRatio             = 1, 20
	MinDuckAttackMs, MaxDuckAttackMs       = 0.01, 2000
	MinDuckReleaseMs, MaxDuckReleaseMs     = 0.01, 9000
)

// Validate reports a parameter outside what sidechaincompress takes, as ErrInvalid.
func (d DuckParams) Validate() error {
	in := func(v, lo, hi float64) bool { return v >= lo && v <= hi }
	if !in(d.ThresholdDB, MinDuckThresholdDB, MaxDuckThresholdDB) || !in(d.Ratio, MinDuckRatio, MaxDuckRatio) ||
		!in(d.AttackMs, MinDuckAttackMs, MaxDuckAttackMs) || !in(d.ReleaseMs, MinDuckReleaseMs, MaxDuckReleaseMs) {
		return fmt.Errorf("%w: ducking threshold %v dB (%d to %d), ratio %v (%d to %d), attack %v ms (%v to %v), release %v ms (%v to %v)",
			ErrInvalid, d.ThresholdDB, MinDuckThresholdDB, MaxDuckThresholdDB, d.Ratio, MinDuckRatio, MaxDuckRatio,
			d.AttackMs, MinDuckAttackMs, MaxDuckAttackMs, d.ReleaseMs, MinDuckReleaseMs, MaxDuckReleaseMs)
	}
	return nil
}

// WithDefaults is d with its zero fields set to the defaults (DefaultDuck*).
func (d DuckParams) WithDefaults() DuckParams {
	if d.ThresholdDB == 0 {
		d.ThresholdDB = DefaultDuckThresholdDB
	}
	if d.Ratio == 0 {
		d.Ratio = DefaultDuckRatio
	}
	if d.AttackMs == 0 {
		d.AttackMs = DefaultDuckAttackMs
	}
	if d.ReleaseMs == 0 {
		d.ReleaseMs = DefaultDuckReleaseMs
	}
	return d
}

// BedMixParams describe the dialogue mixed over the ducked bed. DialoguePath and
// BedPath are WAVs of the output's rate and channels, as long as the output (the
// programme's mix and its bed, RenderBed).
type BedMixParams struct {
	DialoguePath, BedPath, OutputPath string
	SampleRate, Channels, BitDepth    int
	TimeReference                     *int64
	Samples                           int64
	Duck                              DuckParams
	// Normalize brings the mix to TargetLUFS integrated (default -23), its peaks
	// limited to TruePeakDB (default -1 dB); otherwise the levels are the inputs'.
	Normalize              bool
	TargetLUFS, TruePeakDB float64
}

// BedMixResult is what the loudness normalisation measured and did.
type BedMixResult struct {
	// InputLUFS and InputTruePeakDB are the mix's before normalisation (ffmpeg's
	// loudnorm analysis, EBU R128 / BS.1770); GainDB what was applied.
	InputLUFS, InputTruePeakDB, GainDB float64
	// Limited says the gain would have taken peaks past the ceiling, so a limiter
	// held them there.
	Limited bool
}

// MixOverBed writes the dialogue over the bed, the bed ducked while the dialogue
// speaks: ffmpeg's sidechaincompress keyed by the dialogue itself, then the two
// summed. With Normalize, a first pass measures the mix's integrated loudness and
// true peak (loudnorm's analysis) and a second applies the one gain that brings it
// to the target, with a limiter at the ceiling only when that gain would pass it: a
// single gain keeps the mix's dynamics (loudnorm's own dynamic mode would ride the
// level). The limiter holds true peaks, not only sample peaks, and keeps the mix in
// time (limitTruePeak); it costs up to three more passes. The output is exactly
// Samples frames, written as the stems are.
func MixOverBed(ctx context.Context, p BedMixParams) (BedMixResult, error) {
	var res BedMixResult
	bp := BedParams{SampleRate: p.SampleRate, Channels: p.Channels, BitDepth: p.BitDepth, Samples: p.Samples}
	if err := bp.defaults(); err != nil {
		return res, err
	}
	if p.TargetLUFS == 0 {
		p.TargetLUFS = DefaultMixLUFS
	}
	if p.TruePeakDB == 0 {
		p.TruePeakDB = DefaultMixTruePeakDB
	}
	if p.TargetLUFS < -70 || p.TargetLUFS > -5 || p.TruePeakDB < -9 || p.TruePeakDB > 0 {
		return res, fmt.Errorf("%w: loudness target %v LUFS, ceiling %v dB", ErrInvalid, p.TargetLUFS, p.TruePeakDB)
	}
	dlg, err := mediaArg(p.DialoguePath)
	if err != nil {
		return res, err
	}
	bed, err := mediaArg(p.BedPath)
	if err != nil {
		return res, err
	}
	d := p.Duck.WithDefaults()
	if err := d.Validate(); err != nil {
		return res, err
	}
	layout := "mono"
	if bp.Channels == 2 {
		layout = "stereo"
	}
	format := "aformat=sample_fmts=fltp:sample_rates=" + strconv.Itoa(bp.SampleRate) + ":channel_layouts=" + layout
	graph := "[0:a]" + format + ",asplit=2[dlg][key];[1:a]" + format + "[bed];" +
		fmt.Sprintf("[bed][key]sidechaincompress=threshold=%.6f:ratio=%g:attack=%g:release=%g:detection=rms[duck];",
			math.Pow(10, d.ThresholdDB/20), d.Ratio, d.AttackMs, d.ReleaseMs) +
		"[dlg][duck]amix=inputs=2:duration=first:dropout_transition=0:normalize=0"
	inputs := []string{"-v", "info", "-nostdin", "-hide_banner", "-i", dlg, "-i", bed}
	post := ""
	if p.Normalize {
		m, err := measureLoudness(ctx, inputs, graph, p.TargetLUFS, p.TruePeakDB)
		if err != nil {
			return res, err
		}
		res.InputLUFS, res.InputTruePeakDB = m.lufs, m.truePeak
		if m.lufs > SilenceLUFS { // silence has no loudness to bring anywhere
			res.GainDB = p.TargetLUFS - m.lufs
		}
		post = fmt.Sprintf(",volume=%.3fdB", res.GainDB)
		if m.truePeak+res.GainDB > p.TruePeakDB {
			res.Limited = true
			limiter, err := limitTruePeak(ctx, inputs, graph+post, bp.SampleRate, p.TruePeakDB)
			if err != nil {
				return res, err
			}
			post += limiter
		}
	}
	n := strconv.FormatInt(bp.Samples, 10)
	args := []string{"-v", "error", "-nostdin", "-hide_banner", "-i", dlg, "-i", bed,
		"-filter_complex", graph + post + ",atrim=end_sample=" + n + ",apad=whole_len=" + n + "[out]", "-map", "[out]"}
	return res, ffmpegToWAV(ctx, p.OutputPath, args, bp.SampleRate, bp.Channels, bp.BitDepth, p.TimeReference, bp.Samples)
}

// truePeakRate is the rate true peaks are measured at: 4 × 48 kHz, as BS.1770 asks
// and as ffmpeg's ebur128 and astats (after aresample) read them.
const truePeakRate = 192000

// limiterPasses is how many times limitTruePeak measures a limited mix at most.
const limiterPasses = 3

// limitTruePeak returns the filters that, after graph (the mix, at rate), hold its
// true peak to ceilingDB (dBTP). ffmpeg's alimiter
// limits sample peaks, and the peaks between samples of a limited mix can pass them
// by 3 dB, so it runs at truePeakRate between two aresamples. That is not enough
// on its own: the gain changes of hard limiting spread the sound past what 48 kHz
// holds, and taking that off again raises the peaks by up to 0.7 dB measured (white
// noise or gated 12 kHz tones 20 to 40 dB into the limiter; 0.03 dB on speech). So
// the limited mix is measured, and the limit lowered by what it passed the ceiling
// by (the excess hardly changes with the limit), up to limiterPasses times.
// latency=1 makes alimiter take out its look-ahead delay (its attack, 5 ms),
// which by default (latency=0) delays the whole mix.
func limitTruePeak(ctx context.Context, inputs []string, graph string, rate int, ceilingDB float64) (string, error) {
	limitDB := ceilingDB
	for pass := 1; ; pass++ {
		// alimiter's limit goes down to 0.0625 (-24 dB).
		limiter := fmt.Sprintf(",aresample=%d,alimiter=limit=%.6f:level=disabled:attack=5:release=50:latency=1,aresample=%d",
			truePeakRate, max(math.Pow(10, limitDB/20), 0.0625), rate)
		peak, err := measureTruePeak(ctx, inputs, graph+limiter)
		if err != nil {
			return "", err
		}
		if peak <= ceilingDB || pass == limiterPasses {
			return limiter, nil
		}
		limitDB -= peak - ceilingDB + 0.02 // a little more, so that the next pass lands under
	}
}

// measureTruePeak runs graph and reads its output's true peak (dBTP): the highest
// sample once resampled to truePeakRate, as ebur128's true peak is read.
func measureTruePeak(ctx context.Context, inputs []string, graph string) (float64, error) {
	args := append(append([]string{}, inputs...), "-filter_complex",
		graph+fmt.Sprintf(",aformat=sample_fmts=flt,aresample=%d,astats=measure_perchannel=none:measure_overall=Peak_level[out]", truePeakRate),
		"-map", "[out]", "-f", "null", "-")
	stderr, err := runTool(ctx, ffmpegBin, args, nil, nil)
	if err != nil {
		return 0, fmt.Errorf("error measuring the limited mix's true peak: %w", err)
	}
	i := strings.LastIndex(stderr, "Peak level dB:")
	if i < 0 {
		return 0, fmt.Errorf("no peak level in ffmpeg's log: %s", lastLine(stderr))
	}
	field := strings.Fields(stderr[i+len("Peak level dB:"):])
	if len(field) == 0 {
		return 0, fmt.Errorf("no peak level in ffmpeg's log: %s", lastLine(stderr))
	}
	v, err := strconv.ParseFloat(field[0], 64)
	if err != nil {
		return 0, fmt.Errorf("error reading the peak level %q: %w", field[0], err)
	}
	return v, nil // -inf for silence, which passes any ceiling
}

type loudness struct{ lufs, truePeak float64 }

// measureLoudness runs graph through loudnorm's analysis and reads its JSON report.
func measureLoudness(ctx context.Context, inputs []string, graph string, target, tp float64) (loudness, error) {
	args := append(append([]string{}, inputs...), "-filter_complex",
		graph+fmt.Sprintf(",loudnorm=I=%g:TP=%g:LRA=20:print_format=json[out]", target, tp), "-map", "[out]", "-f", "null", "-")
	stderr, err := runTool(ctx, ffmpegBin, args, nil, nil)
	if err != nil {
		return loudness{}, fmt.Errorf("error measuring the mix's loudness: %w", err)
	}
	return parseLoudnorm(stderr)
}

// parseLoudnorm reads the last JSON object in loudnorm's log (input_i, input_tp as
// strings, "-inf" for silence).
func parseLoudnorm(log string) (loudness, error) {
	i, j := strings.LastIndex(log, "{"), strings.LastIndex(log, "}")
	if i < 0 || j < i {
		return loudness{}, fmt.Errorf("no loudness report in ffmpeg's log: %s", lastLine(log))
	}
	var r struct {
		InputI  string `json:"input_i"`
		InputTP string `json:"input_tp"`
	}
	if err := json.Unmarshal([]byte(log[i:j+1]), &r); err != nil {
		return loudness{}, fmt.Errorf("error reading the loudness report: %w", err)
	}
	num := func(s string, floor float64) float64 {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) || v < floor {
			return floor
		}
		return v
	}
	return loudness{lufs: num(r.InputI, SilenceLUFS), truePeak: num(r.InputTP, -200)}, nil
}

// ffmpegToWAV runs ffmpeg with args (inputs, filters, channels: everything but the
// output) writing raw PCM to its stdout, and streams exactly samples frames of it
// into a WAV at path after the header WAVHeader makes: whatever ffmpeg writes past
// that is dropped, and a short output padded with silence, so the length is exact
// whatever the decoder did at the edges.
func ffmpegToWAV(ctx context.Context, path string, args []string, rate, channels, bitDepth int, timeRef *int64, samples int64) error {
	header, err := WAVHeader(WAVFormat{SampleRate: rate, Channels: channels, BitDepth: bitDepth, TimeReference: timeRef}, samples)
	if err != nil {
		return err
	}
	codec, raw := "pcm_s16le", "s16le"
	if bitDepth == 24 {
		codec, raw = "pcm_s24le", "s24le"
	}
	args = append(args, "-c:a", codec, "-f", raw, "-fflags", "+bitexact", "pipe:1")
	return writeFileAtomic(path, func(w io.Writer) error {
		if _, err := w.Write(header); err != nil {
			return err
		}
		ew := &exactWriter{w: w, left: samples * int64(channels) * int64(bitDepth/8)}
		stderr, err := runTool(ctx, ffmpegBin, args, nil, ew)
		if ew.err != nil {
			return ew.err
		}
		if err != nil {
			if noSpace(err, stderr) {
				return writeError(path, err, stderr)
			}
			return fmt.Errorf("error rendering %s: %w", path, err)
		}
		zero := make([]byte, 64<<10)
		for ew.left > 0 {
			k := min(ew.left, int64(len(zero)))
			if _, err := w.Write(zero[:k]); err != nil {
				return err
			}
			ew.left -= k
		}
		return nil
	})
}

// exactWriter passes on the first left bytes written to it and drops the rest; a
// write error is kept (err) and ends the copy, reported as written so that the
// program writing stops on its own error only through the caller.
type exactWriter struct {
	w    io.Writer
	left int64
	err  error
}

func (e *exactWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	k := min(int64(len(p)), e.left)
	if k > 0 {
		if _, err := e.w.Write(p[:k]); err != nil {
			e.err = err
			return 0, err
		}
		e.left -= k
	}
	return len(p), nil
}
