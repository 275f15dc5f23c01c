package audio

import (
	"math"
	"math/rand/v2"
	"testing"
)

// referenceLoudness is BS.1770 integrated loudness written plainly: each biquad
// section on its own, the energy of every 400 ms block summed from its samples.
func referenceLoudness(x []float32, rate int) (float64, bool) {
	shelf, hp := kWeighting(rate)
	run := func(f biquad, in []float64) []float64 {
		out := make([]float64, len(in))
		var x1, x2, y1, y2 float64
		for i, v := range in {
			y := f.b0*v + f.b1*x1 + f.b2*x2 - f.a1*y1 - f.a2*y2
			x2, x1, y2, y1 = x1, v, y1, y
			out[i] = y
		}
		return out
	}
	in := make([]float64, len(x))
	for i, v := range x {
		in[i] = float64(v)
	}
	k := run(hp, run(shelf, in))
	step := rate / 10
	var blocks []float64
	if len(x) < 4*step {
		var e float64
		for _, v := range k {
			e += v * v
		}
		blocks = []float64{e / float64(len(x))}
	}
	for start := 0; start+4*step <= len(x); start += step {
		var e float64
		for _, v := range k[start : start+4*step] {
			e += v * v
		}
		blocks = append(blocks, e/float64(4*step))
	}
	gated := func(threshold float64) (float64, int) {
		var sum float64
		var n int
		for _, z := range blocks {
			if z > 0 && -0.691+10*math.Log10(z) > threshold {
				sum += z
				n++
			}
		}
		return sum / float64(max(n, 1)), n
	}
	abs, n := gated(-70)
	if n == 0 {
		return SilenceLUFS, false
	}
	rel, n := gated(-0.691 + 10*math.Log10(abs) - 10)
	if n == 0 {
		return SilenceLUFS, false
	}
	return -0.691 + 10*math.Log10(rel), true
}

// TestIntegratedLoudnessAsReference checks the fast K-weighting loop against the
// plain one, on lengths around the 100 ms steps and the 400 ms blocks and on signals
// with quiet stretches (the gates).
func TestIntegratedLoudnessAsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, rate := range []int{16000, 44100, 48000} {
		step := rate / 10
		for _, n := range []int{1, 2, 3, step - 1, step, step + 1, 4*step - 1, 4 * step, 4*step + 1, 15*step + 7, 3 * rate / 2} {
			x := make([]float32, n)
			for i := range x {
				amp := 0.3
				if (i/step)%5 == 3 {
					amp = 0.0005 // a quiet step, under the relative gate
				}
				x[i] = float32(amp * (math.Sin(float64(i)*0.07) + 0.3*(r.Float64()-0.5)))
			}
			got, gotOK := integratedLoudness(x, rate)
			want, wantOK := referenceLoudness(x, rate)
			if gotOK != wantOK || math.Abs(got-want) > 1e-9 {
				t.Fatalf("rate %d, %d samples: %v LUFS (%v), want %v (%v)", rate, n, got, gotOK, want, wantOK)
			}
		}
	}
	if l, ok := integratedLoudness(make([]float32, 4800), 48000); ok || l != SilenceLUFS {
		t.Fatalf("silence: %v, %v", l, ok)
	}
}
