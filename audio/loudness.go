package audio

import "math"

// SilenceLUFS is reported as the loudness of audio with nothing above BS.1770's
// absolute gate (-70 LUFS): silence has no integrated loudness, and -Inf does not
// survive JSON.
const SilenceLUFS = -70.0

// biquad is the coefficients of a second-order IIR filter section (direct form I,
// a0 = 1).
type biquad struct {
	b0, b1, b2, a1, a2 float64
}

// kWeighting returns BS.1770's K-weighting (high shelf, then high pass) for rate,
// with the filter design libebur128 and ffmpeg use, so that any rate works and 48 kHz
// gives the coefficients printed in the recommendation.
func kWeighting(rate int) (shelf, highpass biquad) {
	fs := float64(rate)
	f0, g, q := 1681.974450955533, 3.999843853973347, 0.7071752369554196
	k := math.Tan(math.Pi * f0 / fs)
	vh := math.Pow(10, g/20)
	vb := math.Pow(vh, 0.4996667741545416)
	a0 := 1 + k/q + k*k
	shelf = biquad{
		b0: (vh + vb*k/q + k*k) / a0,
		b1: 2 * (k*k - vh) / a0,
		b2: (vh - vb*k/q + k*k) / a0,
		a1: 2 * (k*k - 1) / a0,
		a2: (1 - k/q + k*k) / a0,
	}
	f0, q = 38.13547087602444, 0.5003270373238773
	k = math.Tan(math.Pi * f0 / fs)
	a0 = 1 + k/q + k*k
	highpass = biquad{b0: 1, b1: -2, b2: 1, a1: 2 * (k*k - 1) / a0, a2: (1 - k/q + k*k) / a0}
	return shelf, highpass
}

// integratedLoudness measures mono samples (full scale ±1) as ITU-R BS.1770-4 /
// EBU R128 integrated loudness: K-weighting, 400 ms blocks overlapping by 75%, an
// absolute gate at -70 LUFS and a relative gate 10 LU below the gated mean. Audio
// shorter than one block is measured as one block of its own length. ok is false
// when nothing passes the gates (silence).
func integratedLoudness(x []float32, rate int) (lufs float64, ok bool) {
	if len(x) == 0 || rate <= 0 {
		return SilenceLUFS, false
	}
	shelf, hp := kWeighting(rate)
	// Energy per 100 ms step; a block is four consecutive steps. acc is what the
	// samples after the last whole step add up to.
	step := rate / 10
	if step == 0 {
		step = len(x) + 1 // no whole step
	}
	var steps []float64
	var acc float64
	// Both sections run in one loop over locals, which the compiler keeps in
	// registers: this loop is most of a fit's arithmetic, and its speed is how long
	// each sample waits for the one before. So the terms of the last output come
	// last (a sample waits for one multiplication and one subtraction, not the whole
	// sum); the high pass's numerator (1, -2, 1) is written as such, the products
	// being exact (kWeighting's is always that); the shelf's inputs are read again
	// from x rather than carried; and the inner loop calls nothing (a call, to
	// append, made the compiler keep the filter states on the stack).
	sb0, sb1, sb2, sa1, sa2 := shelf.b0, shelf.b1, shelf.b2, shelf.a1, shelf.a2
	ha1, ha2 := hp.a1, hp.a2
	var sy1, sy2, hy1, hy2 float64 // the high pass's input is the shelf's output
	for first := 0; first < len(x); first += step {
		last := min(first+step, len(x))
		var sx1, sx2 float64
		if first > 0 {
			sx1 = float64(x[first-1])
		}
		if first > 1 {
			sx2 = float64(x[first-2])
		}
		var e float64
		for _, v := range x[first:last] {
			in := float64(v)
			s := (sb0*in + sb1*sx1 + sb2*sx2 - sa2*sy2) - sa1*sy1
			y := (s - 2*sy1 + sy2 - ha2*hy2) - ha1*hy1
			sx2, sx1, sy2, sy1, hy2, hy1 = sx1, in, sy1, s, hy1, y
			e += y * y
		}
		if last-first == step {
			steps = append(steps, e)
		} else {
			acc = e
		}
	}
	var blocks []float64 // mean square per block
	if len(steps) < 4 {
		total := acc
		for _, s := range steps {
			total += s
		}
		blocks = []float64{total / float64(len(x))}
	} else {
		for i := 0; i+4 <= len(steps); i++ {
			blocks = append(blocks, (steps[i]+steps[i+1]+steps[i+2]+steps[i+3])/float64(4*step))
		}
	}
	loud := func(z float64) float64 { return -0.691 + 10*math.Log10(z) }
	gatedMean := func(threshold float64) (float64, int) {
		var sum float64
		var cnt int
		for _, z := range blocks {
			if z > 0 && loud(z) > threshold {
				sum += z
				cnt++
			}
		}
		if cnt == 0 {
			return 0, 0
		}
		return sum / float64(cnt), cnt
	}
	abs, cnt := gatedMean(-70)
	if cnt == 0 {
		return SilenceLUFS, false
	}
	rel, cnt := gatedMean(loud(abs) - 10)
	if cnt == 0 {
		return SilenceLUFS, false
	}
	return loud(rel), true
}

// peak returns the largest absolute sample value. It compares the values' bits
// without their sign, which orders finite floats as their magnitudes do, several
// times faster than max on floats (which must look for NaN).
func peak(x []float32) float64 {
	var p uint32
	for _, v := range x {
		p = max(p, math.Float32bits(v)&^(1<<31))
	}
	return float64(math.Float32frombits(p))
}
