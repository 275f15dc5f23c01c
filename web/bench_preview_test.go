package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	rtmetrics "runtime/metrics"
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
// project, "merge" into a project holding the same 20,000 lines (every line
// unchanged), "merge-edited" into one holding them with other words (every line
// updated: a new revision and a history entry each). It reports the page's size and
// the peak live heap of the process (client and server both) above the figure before
// the run.
func BenchmarkImportPreview20000(b *testing.B) {
	data := srtCues(script.MaxCues)
	for _, bc := range []struct {
		name, mode string
		seed       func(string) string // the text of the project's lines, nil for none
	}{
		{"append", "append", nil},
		{"merge", "merge", func(s string) string { return s }},
		{"merge-edited", "merge", func(s string) string { return "Earlier: " + s }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bb := setup(b)
			ctx := context.Background()
			editor := bb.users[studio.RoleEditor]
			p, err := bb.store.CreateProject(ctx, "preview", &editor.ID)
			if err != nil {
				b.Fatal(err)
			}
			if bc.seed != nil {
				lines := newLines(b, data)
				for i := range lines {
					lines[i].Text = bc.seed(lines[i].Text)
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
				body, ctype := importForm(b, "big.srt", data, map[string]string{"preview": "1", "mode": bc.mode})
				resp := c.do("POST", path, body, ctype, hdr)
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

// BenchmarkImportConfirm20000 is the import itself (no preview) of the same 20,000
// cues over HTTP, each into a new empty project: the same work as the append preview,
// committed, and the editor's page after it.
func BenchmarkImportConfirm20000(b *testing.B) {
	data := srtCues(script.MaxCues)
	bb := setup(b)
	ctx := context.Background()
	editor := bb.users[studio.RoleEditor]
	c := bb.as(b, studio.RoleEditor)
	hdr := map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf}
	count := func() int64 {
		var n int64
		if err := bb.store.Pool().QueryRow(ctx, "SELECT count(*) FROM lines").Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	before := count()
	for b.Loop() {
		b.StopTimer()
		p, err := bb.store.CreateProject(ctx, "confirm", &editor.ID)
		if err != nil {
			b.Fatal(err)
		}
		body, ctype := importForm(b, "big.srt", data, map[string]string{"mode": "append"})
		b.StartTimer()
		resp := c.do("POST", fmt.Sprintf("/projects/%d/import", p.ID), body, ctype, hdr)
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d, %v", resp.StatusCode, err)
		}
	}
	b.StopTimer()
	if n := count() - before; n != int64(b.N*script.MaxCues) {
		b.Fatalf("%d lines imported, want %d", n, b.N*script.MaxCues)
	}
}

// newLines parses an SRT file into the lines of an import.
func newLines(b *testing.B, data []byte) []studio.NewLine {
	cues, err := script.Parse("big.srt", data)
	if err != nil {
		b.Fatal(err)
	}
	lines := make([]studio.NewLine, len(cues))
	for i, c := range cues {
		lines[i] = studio.NewLine{SourceLine: c.SourceLine, StartMs: int(c.Start.Milliseconds()), EndMs: int(c.End.Milliseconds()),
			CharacterName: c.Character, Text: c.Text}
	}
	return lines
}

// metricsBase is the live heap before a run.
type metricsBase struct{ heap uint64 }

func (m *metricsBase) read() {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	m.heap = s[0].Value.Uint64()
}
