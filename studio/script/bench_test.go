package script

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

var benchNames = []string{"MARTHA", "JONAH", "Dr. Okafor", "小明"}

// srtCue writes the i-th cue (0-based) of a generated SRT file: four lines each.
func srtCue(b *bytes.Buffer, i int) {
	start := time.Duration(i) * 2 * time.Second
	fmt.Fprintf(b, "%d\n%s --> %s\n%s: <i>Line %d</i>, said with \"feeling\" & care.\n\n", i+1,
		formatTimecode(start, ','), formatTimecode(start+1500*time.Millisecond, ','), benchNames[i%len(benchNames)], i)
}

func BenchmarkParseSRT5000(b *testing.B) {
	var buf bytes.Buffer
	for i := range 5000 {
		srtCue(&buf, i)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		cues, err := ParseSRT(data)
		if err != nil || len(cues) != 5000 {
			b.Fatal(len(cues), err)
		}
	}
}
