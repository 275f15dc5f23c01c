package gpu

import (
	"math"
	"sort"
	"time"
)

// Byte sizes. Figures from docs/indextts.md are read as binary units, which errs on
// the safe side.
const (
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
)

// Defaults from the measurements in docs/indextts.md (IndexTTS-2-shaped workload on
// an H200, no Qwen emotion model): a host holds about 5.0 GB after load, and a
// request needs about 45 MB plus 38 MB per second of audio on top.
const (
	DefaultResidentBytes  = 5 * GiB
	DefaultPeakBaseBytes  = 45 * MiB
	DefaultPeakPerSecond  = 38 * MiB
	emotionModelResidency = 1100 * MiB // Qwen 0.6B: 6.54 vs 5.48 GB reported on a 4090
)

// CurvePoint is the worst extra peak measured for requests of one audio length.
type CurvePoint struct {
	AudioSeconds float64
	PeakBytes    int64
}

// Calibration is what a calibration run measured for one GPU model and profile: the
// memory one host holds after loading, and the extra peak per request by audio
// length. The zero value is uncalibrated and predicts with the defaults.
type Calibration struct {
	// ResidentBytes is NVML's reading for one idle host after load and warm-up,
	// before any cache grows; 0 means DefaultResidentBytes.
	ResidentBytes int64
	// BorrowerBytes is NVML's reading for one idle host that maps the lender's
	// weights (Profile.ShareWeights), after warm-up and a cache release: its CUDA
	// context and what it does not share. 0: not measured, and a borrower counts as
	// a whole host.
	BorrowerBytes int64
	// Points are the worst peaks per length bucket (see AnalyzeBuckets).
	Points     []CurvePoint
	MeasuredAt time.Time
}

// DefaultCalibration is the uncalibrated prediction for a profile: the measured
// defaults, plus the Qwen emotion model's memory when the profile loads it.
func DefaultCalibration(p Profile) Calibration {
	c := Calibration{ResidentBytes: DefaultResidentBytes}
	if p.EmotionTextModel {
		c.ResidentBytes += emotionModelResidency
	}
	return c
}

// Calibrated reports whether the curve comes from measurements.
func (c Calibration) Calibrated() bool { return len(c.Points) > 0 }

// Resident returns the memory one host holds after load.
func (c Calibration) Resident() int64 {
	if c.ResidentBytes > 0 {
		return c.ResidentBytes
	}
	return DefaultResidentBytes
}

// Borrower returns the memory one host that borrows the weights holds after load:
// the measured figure, or a whole host's when there is none.
func (c Calibration) Borrower() int64 {
	if c.BorrowerBytes > 0 {
		return c.BorrowerBytes
	}
	return c.Resident()
}

// PeakBytes predicts the extra peak of a request producing audioSeconds of speech,
// before any safety factor. Uncalibrated: the default line. Calibrated: piecewise
// linear through the measured points, made non-decreasing (a longer line never needs
// less), flat below the first point and extended with the last segment's slope (or
// the default slope) above the last.
func (c Calibration) PeakBytes(audioSeconds float64) int64 {
	s := max(audioSeconds, 0)
	if len(c.Points) == 0 {
		return DefaultPeakBaseBytes + int64(math.Ceil(s*float64(DefaultPeakPerSecond)))
	}
	pts := c.monotone()
	if s <= pts[0].AudioSeconds {
		return pts[0].PeakBytes
	}
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if s <= b.AudioSeconds {
			f := (s - a.AudioSeconds) / (b.AudioSeconds - a.AudioSeconds)
			return a.PeakBytes + int64(math.Ceil(f*float64(b.PeakBytes-a.PeakBytes)))
		}
	}
	last := pts[len(pts)-1]
	slope := float64(DefaultPeakPerSecond)
	if len(pts) >= 2 {
		prev := pts[len(pts)-2]
		slope = max(float64(last.PeakBytes-prev.PeakBytes)/(last.AudioSeconds-prev.AudioSeconds), 0)
	}
	return last.PeakBytes + int64(math.Ceil((s-last.AudioSeconds)*slope))
}

// monotone returns the points sorted by length, one per length (the worst), with
// peaks made non-decreasing.
func (c Calibration) monotone() []CurvePoint {
	pts := append([]CurvePoint(nil), c.Points...)
	sort.Slice(pts, func(i, j int) bool { return pts[i].AudioSeconds < pts[j].AudioSeconds })
	out := pts[:0]
	for _, p := range pts {
		if n := len(out); n > 0 && out[n-1].AudioSeconds == p.AudioSeconds {
			out[n-1].PeakBytes = max(out[n-1].PeakBytes, p.PeakBytes)
			continue
		}
		if n := len(out); n > 0 {
			p.PeakBytes = max(p.PeakBytes, out[n-1].PeakBytes)
		}
		out = append(out, p)
	}
	return out
}
