package audio

import (
	"path/filepath"
	"runtime/debug"
	"strconv"
	"testing"

	"dubstudio/internal/peakrss"
)

// BenchmarkFitMemory fits the longest takes a line can have (issue 17: the duration
// lock works in bounded memory): a 55 s take padded into the default longest line
// (MAX_LINE_SECONDS, 60 s), a 110 s take stretched into 100 s (a line a higher
// MAX_LINE_SECONDS allows), and a 590 s take padded into the largest slot Fit accepts
// (DefaultMaxSlotMs, 600 s, the highest MAX_LINE_SECONDS). It reports the process's
// peak resident memory over a fit (peak-RSS-MB), the test binary's own included; the
// ffmpeg processes a stretch runs are not in it.
func BenchmarkFitMemory(b *testing.B) {
	dir := b.TempDir()
	for _, bc := range []struct {
		name   string
		takeS  int
		slotMs int
	}{{"pad-60s", 55, 60_000}, {"stretch-100s", 110, 100_000}, {"pad-600s", 590, DefaultMaxSlotMs}} {
		b.Run(bc.name, func(b *testing.B) {
			take := tone(b, dir, bc.name+".wav", strconv.Itoa(bc.takeS), "48000")
			p := FitParams{InputPath: take, OutputPath: filepath.Join(dir, "out.wav"), SlotMs: bc.slotMs}
			var most int64
			for b.Loop() {
				debug.FreeOSMemory() // the mark starts from what is live, not earlier garbage
				if err := peakrss.Reset(); err != nil {
					b.Skip(err)
				}
				if _, err := Fit(b.Context(), p); err != nil {
					b.Fatal(err)
				}
				peak, err := peakrss.Peak()
				if err != nil {
					b.Fatal(err)
				}
				most = max(most, peak)
			}
			b.ReportMetric(float64(most)/1e6, "peak-RSS-MB")
		})
	}
}
