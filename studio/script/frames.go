package script

import (
	"math"
	"regexp"
	"strconv"
	"time"
)

// FPS is a frame rate that timecodes with frames (HH:MM:SS:FF, and HH:MM:SS;FF
// drop-frame, as dubbing spreadsheets give TC in and out) count at, named as editors
// name it: "25", "29.97". An export's start timecode counts at one too
// (studio.ExportOptions.FPS, FrameSamples).
type FPS string

// DefaultFPS is the rate timecodes with frames count at when nothing names one: no
// rate chosen for an import and no video to take it from, an export that names none.
const DefaultFPS = FPS25

// The frame rates an import reads.
const (
	FPS23976 FPS = "23.976"
	FPS24    FPS = "24"
	FPS25    FPS = "25"
	FPS2997  FPS = "29.97"
	FPS30    FPS = "30"
	FPS50    FPS = "50"
	FPS5994  FPS = "59.94"
	FPS60    FPS = "60"
)

// fpsRate is how a rate counts: labels a second (a timecode's frames run from 0 to
// nominal-1) and the rate the frames play at, num/den (30000/1001 for 29.97).
type fpsRate struct {
	nominal  int
	num, den int
}

// frameRates are the FPS an import reads, in the order the import panel lists them.
var frameRates = []struct {
	fps FPS
	fpsRate
}{
	{FPS23976, fpsRate{24, 24000, 1001}},
	{FPS24, fpsRate{24, 24, 1}},
	{FPS25, fpsRate{25, 25, 1}},
	{FPS2997, fpsRate{30, 30000, 1001}},
	{FPS30, fpsRate{30, 30, 1}},
	{FPS50, fpsRate{50, 50, 1}},
	{FPS5994, fpsRate{60, 60000, 1001}},
	{FPS60, fpsRate{60, 60, 1}},
}

// FrameRates returns the FPS an import reads, slowest first.
func FrameRates() []FPS {
	out := make([]FPS, len(frameRates))
	for i, r := range frameRates {
		out[i] = r.fps
	}
	return out
}

// KnownFPS reports whether f is one of FrameRates.
func KnownFPS(f FPS) bool {
	_, ok := f.rate()
	return ok
}

func (f FPS) rate() (fpsRate, bool) {
	for _, r := range frameRates {
		if r.fps == f {
			return r.fpsRate, true
		}
	}
	return fpsRate{}, false
}

// FPSOf returns the FPS of a picture whose frames play at num/den a second, as a
// probe gives it (30000/1001 is 29.97, 25/1 is 25); ok is false for a rate that is
// none of FrameRates.
func FPSOf(num, den int) (FPS, bool) {
	if num <= 0 || den <= 0 {
		return "", false
	}
	v := float64(num) / float64(den)
	for _, r := range frameRates {
		if math.Abs(v-float64(r.num)/float64(r.den)) < 0.005 {
			return r.fps, true
		}
	}
	return "", false
}

// dropFrame reports whether timecodes at f may be drop-frame (";"): 29.97 only, whose
// labels SMPTE ST 12 drops so that they keep up with the clock.
func (f FPS) dropFrame() bool { return f == FPS2997 }

// frameTimecode matches a timecode with frames: HH:MM:SS:FF, or HH:MM:SS;FF for
// drop-frame. The hours have 1 to 3 digits, as parseTimecode's.
var frameTimecode = regexp.MustCompile(`^(\d{1,3}):(\d{2}):(\d{2})([:;])(\d{2})$`)

// isFrameTimecode reports whether v is written as a timecode with frames, which
// parseTimecode never reads (it has three fields at most, and no ";").
func isFrameTimecode(v string) bool { return frameTimecode.MatchString(v) }

// parseFrameTimecode reads v, a frame timecode (isFrameTimecode), at f, a known FPS.
// On failure it returns the message key and arguments of the problem.
func parseFrameTimecode(v string, f FPS) (time.Duration, string, []any) {
	n, key, args := frameCount(v, f)
	if key != "" {
		return 0, key, args
	}
	r, _ := f.rate()
	d := time.Duration(math.Round(float64(n)*float64(r.den)*1000/float64(r.num))) * time.Millisecond
	if d > MaxTimecode {
		return 0, "script.bad_frame_timecode", []any{v}
	}
	return d, "", nil
}

// FrameSamples reads v, a timecode with frames (HH:MM:SS:FF, or HH:MM:SS;FF
// drop-frame at 29.97), at f, a known FPS, and returns its time since 00:00:00:00 in
// sample frames at rate, rounded down: exact to the sample, where a millisecond
// count would round 29.97's frames. It is an export's Broadcast WAV time reference.
// On failure it returns the message key and arguments of the problem, as an import
// reports them.
func FrameSamples(v string, f FPS, rate int) (int64, string, []any) {
	n, key, args := frameCount(v, f)
	if key != "" {
		return 0, key, args
	}
	r, _ := f.rate()
	return n * int64(rate) * int64(r.den) / int64(r.num), "", nil
}

// LastFrame is the highest frame label of a second at f, a known FPS (24 for 25).
func (f FPS) LastFrame() int {
	r, _ := f.rate()
	return r.nominal - 1
}

// frameCount returns how many frames at f, a known FPS, come before the timecode v;
// one that is not written as a timecode with frames is refused. It counts as TTML's SMPTE time base does (ttmlRates.timecode):
// labels at the nominal rate, less the ones drop-frame skips. On failure it returns
// the message key and arguments of the problem.
func frameCount(v string, f FPS) (int64, string, []any) {
	m := frameTimecode.FindStringSubmatch(v)
	if m == nil {
		return 0, "script.bad_frame_timecode", []any{v}
	}
	r, _ := f.rate()
	num := func(s string) float64 {
		n, _ := strconv.Atoi(s)
		return float64(n)
	}
	h, mi, s, frames := num(m[1]), num(m[2]), num(m[3]), num(m[5])
	drop := m[4] == ";"
	switch {
	case mi >= 60 || s >= 60:
		return 0, "script.bad_frame_timecode", []any{v}
	case drop && !f.dropFrame():
		return 0, "script.drop_frame_rate", []any{v, string(f)}
	case frames >= float64(r.nominal):
		return 0, "script.frame_too_high", []any{v, string(f), r.nominal - 1}
	case drop && s == 0 && frames < 2 && int(mi)%10 != 0:
		return 0, "script.dropped_frame", []any{v}
	}
	rates := ttmlRates{frameRate: float64(r.num) / float64(r.den), nominal: float64(r.nominal), smpte: true}
	if drop {
		rates.drop = "dropNTSC"
	}
	return int64(rates.timecode(h, mi, s, frames) + frames), "", nil
}
