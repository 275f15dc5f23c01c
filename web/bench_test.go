package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"dubstudio/studio"
	"dubstudio/studio/script"
)

func srt5000() []byte {
	var b bytes.Buffer
	for i := range 5000 {
		start := time.Duration(i) * 3 * time.Second
		fmt.Fprintf(&b, "%d\n%s --> %s\nSPEAKER%d: Line %d of the script, with \"quotes\" & <brackets>.\n\n", i+1,
			tc(start), tc(start+2500*time.Millisecond), i%3, i+1)
	}
	return b.Bytes()
}

func tc(d time.Duration) string {
	ms := d.Milliseconds()
	return fmt.Sprintf("%02d:%02d:%02d,%03d", ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
}

// BenchmarkImportSRT5000 is the whole import of a 5,000-cue SRT: parse, validate,
// create characters, insert lines and history, flag timing. Target: under 2 s.
func BenchmarkImportSRT5000(b *testing.B) {
	data := srt5000()
	bb := setup(b)
	store, user := bb.store, bb.users[studio.RoleEditor]
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		p, err := store.CreateProject(ctx, "bench", &user.ID)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := store.ImportLines(ctx, user.ID, p.ID, newLines(b, data)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProjectPage renders the editor of a 5,000-line project over HTTP (session,
// queries, templ) and reports the 95th percentile. Target: p95 under 50 ms.
func BenchmarkProjectPage(b *testing.B) {
	bb := setup(b)
	ctx := context.Background()
	p, err := bb.store.CreateProject(ctx, "big", &bb.users[studio.RoleEditor].ID)
	if err != nil {
		b.Fatal(err)
	}
	cues, _ := script.Parse("big.srt", srt5000())
	lines := make([]studio.NewLine, len(cues))
	for i, c := range cues {
		lines[i] = studio.NewLine{SourceLine: c.SourceLine, StartMs: int(c.Start.Milliseconds()), EndMs: int(c.End.Milliseconds()),
			CharacterName: c.Character, Text: c.Text}
	}
	if _, err := bb.store.ImportLines(ctx, bb.users[studio.RoleEditor].ID, p.ID, lines); err != nil {
		b.Fatal(err)
	}
	c := bb.as(b, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d?page=25", p.ID)
	var durs []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		resp := c.get(path)
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	b.ReportMetric(float64(durs[len(durs)*95/100].Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "p50-ms")
}
