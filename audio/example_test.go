package audio_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"dubstudio/audio"
)

// A take of 1.2 s for a line whose slot is 1 s, with 0.5 s of silence before the
// next line: the take borrows 200 ms of the gap instead of being sped up.
func ExampleFit() {
	dir, err := os.MkdirTemp("", "fit")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// Stand-in for a synthesized take: 1.2 s of a 220 Hz tone, 24 kHz mono.
	take := audio.PCM{SampleRate: 24000, Channels: 1, Samples: make([]int16, 28800)}
	for i := range take.Samples {
		take.Samples[i] = int16(8000 * math.Sin(2*math.Pi*220*float64(i)/24000))
	}
	in := filepath.Join(dir, "take.wav")
	if err := audio.WriteWAVFile(in, take); err != nil {
		panic(err)
	}

	res, err := audio.Fit(context.Background(), audio.FitParams{
		InputPath:  in,
		OutputPath: filepath.Join(dir, "fitted.wav"),
		SlotMs:     1000,
		GapMs:      500,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("speech %d ms, ratio %.2f, borrowed %d ms, %d samples at %d Hz, review %v\n",
		res.SpeechMs, res.Ratio, res.BorrowedMs, res.Samples, res.SampleRate, res.NeedsReview)
	fmt.Printf("loudness %.0f LUFS\n", res.LoudnessLUFS)
	// Output:
	// speech 1200 ms, ratio 1.00, borrowed 200 ms, 57600 samples at 48000 Hz, review false
	// loudness -23 LUFS
}
