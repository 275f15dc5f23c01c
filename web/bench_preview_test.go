package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"dubstudio/studio"
	"dubstudio/studio/script"
)

// srtCues is an SRT file of n cues, three speakers, every tenth cue overlapping its
// predecessor and every fiftieth a dialogue, so that the preview has flags to count.
func srtCues(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		start := time.Duration(i) * 3 * time.Second
		end := start + 2500*time.Millisecond
		if i%10 == 9 {
			start -= time.Second
		}
		text := fmt.Sprintf("SPEAKER%d: Line %d of the script, with \"quotes\" & <brackets>.", i%3, i+1)
		if i%50 == 49 {
			text = "- Yes.\n- No."
		}
		fmt.Fprintf(&b, "%d\n%s --> %s\n%s\n\n", i+1, tc(start), tc(end), text)
	}
	return b.Bytes()
}

// peakHeap samples the live heap every few milliseconds until stop is called, which
// returns the largest figure seen, in bytes.
func peakHeap() (stop func() uint64) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			rtmetrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak }
}

// BenchmarkImportPreview20000 is the import preview of a script of script.MaxCues
// (20,000) cues over HTTP: upload, detection and decoding, parsing, flags, the dry run
// of the import in a rolled-back transaction, and the page (its first
// views.MaxPreviewRows rows, every count). "append" previews it into an empty
// project, "merge" into a project holding the same 20,000 lines. It reports the page's
// size and the peak live heap of the process (client and server both) above the
// figure before the run.
func BenchmarkImportPreview20000(b *testing.B) {
	data := srtCues(script.MaxCues)
	for _, mode := range []string{"append", "merge"} {
		b.Run(mode, func(b *testing.B) {
			bb := setup(b)
			ctx := context.Background()
			editor := bb.users[studio.RoleEditor]
			p, err := bb.store.CreateProject(ctx, "preview", &editor.ID)
			if err != nil {
				b.Fatal(err)
			}
			if mode == "merge" {
				cues, err := script.Parse("big.srt", data)
				if err != nil {
					b.Fatal(err)
				}
				lines := make([]studio.NewLine, len(cues))
				for i, c := range cues {
					lines[i] = studio.NewLine{SourceLine: c.SourceLine, StartMs: int(c.Start.Milliseconds()), EndMs: int(c.End.Milliseconds()),
						CharacterName: c.Character, Text: c.Text}
				}
				if _, err := bb.store.ImportLines(ctx, editor.ID, p.ID, lines); err != nil {
					b.Fatal(err)
				}
			}
			c := bb.as(b, studio.RoleEditor)
			path := fmt.Sprintf("/projects/%d/import", p.ID)
			hdr := map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf}
			var page int
			var base metricsBase
			base.read()
			stop := peakHeap()
			b.ResetTimer()
			for b.Loop() {
				var body strings.Builder
				w := multipart.NewWriter(&body)
				fw, err := w.CreateFormFile("file", "big.srt")
				if err == nil {
					_, err = fw.Write(data)
				}
				if err == nil {
					err = w.WriteField("preview", "1")
				}
				if err == nil {
					err = w.WriteField("mode", mode)
				}
				if err == nil {
					err = w.Close()
				}
				if err != nil {
					b.Fatal(err)
				}
				resp := c.do("POST", path, strings.NewReader(body.String()), w.FormDataContentType(), hdr)
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, %v", resp.StatusCode, err)
				}
				page = int(n)
			}
			b.StopTimer()
			peak := stop()
			b.ReportMetric(float64(page)/1024, "page-KiB")
			b.ReportMetric(float64(peak-min(peak, base.heap))/(1<<20), "peak-heap-MiB")
		})
	}
}

// metricsBase is the live heap before a run.
type metricsBase struct{ heap uint64 }

func (m *metricsBase) read() {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	m.heap = s[0].Value.Uint64()
}
