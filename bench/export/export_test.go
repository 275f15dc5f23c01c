package export_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/internal/peakrss"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
	"dubstudio/workflow"
)

const (
	benchLines = 1000
	programMs  = 3600 * 1000 // one hour
	rate       = audio.DefaultSampleRate
)

type benchBundle struct {
	store    *studio.Store
	pipeline *workflow.Pipeline
	dataDir  string
	editor   *studio.User
	project  *studio.Project
	audioMs  int
}

// setupHour makes a one-hour project of benchLines lines spoken by four characters,
// every line with an approved take: a distinct 48 kHz tone exactly as long as its slot.
func setupHour(b *testing.B) *benchBundle {
	b.Helper()
	ctx := context.Background()
	store := studiotest.Store(b)
	p, err := workflow.NewPipeline(store, slog.New(slog.DiscardHandler))
	require.NoError(b, err)
	ed := studiotest.User(b, store, studio.RoleEditor)
	bb := &benchBundle{store: store, pipeline: p, dataDir: b.TempDir(), editor: ed, project: studiotest.Project(b, store, ed, 0)}

	step := programMs / benchLines
	lines := make([]studio.NewLine, benchLines)
	for i := range lines {
		start := i * step
		lines[i] = studio.NewLine{SourceLine: i + 1, StartMs: start, EndMs: start + 2000 + (i*137)%1400,
			CharacterName: []string{"Ann", "Ben", "Cleo", "Dev"}[i%4], Text: fmt.Sprintf("Line %d.", i+1)}
	}
	_, err = store.ImportLines(ctx, ed.ID, bb.project.ID, lines)
	require.NoError(b, err)
	all, err := store.AllLines(ctx, bb.project.ID)
	require.NoError(b, err)
	blobs := studio.BlobStore{Dir: filepath.Join(bb.dataDir, "blobs")}
	tmp := filepath.Join(bb.dataDir, "tmp")
	require.NoError(b, os.MkdirAll(tmp, 0o700))
	for i, l := range all {
		n := int(audio.SamplesFor(l.DurationMs(), rate))
		pcm := audio.PCM{SampleRate: rate, Channels: 1, Samples: make([]int16, n)}
		freq := 110 + float64(i%200)*3.7
		for k := range pcm.Samples {
			// A tone under a fade in and out, about -20 dBFS: mixed, nothing clips.
			env := min(1, float64(min(k, n-k))/480)
			pcm.Samples[k] = int16(3000 * env * math.Sin(2*math.Pi*freq*float64(k)/rate))
		}
		path := filepath.Join(tmp, fmt.Sprintf("take-%d.wav", i))
		require.NoError(b, audio.WriteWAVFile(path, pcm))
		blob, err := store.PutBlob(ctx, blobs, path, studio.Blob{Format: audio.FormatWAV, DurationMs: l.DurationMs(), SampleRate: rate, Channels: 1})
		require.NoError(b, err)
		take := &studio.Take{LineID: l.ID, ProjectID: l.ProjectID, Revision: l.Revision, RenderSeq: l.RenderSeq,
			Engine: "bench", SpokenText: l.Text, DurationMs: l.DurationMs(), AudioMs: l.DurationMs(), StretchRatio: 1,
			NeededRatio: 1, AudioSHA256: blob.SHA256}
		ok, err := store.FinishRender(ctx, take)
		require.NoError(b, err)
		require.True(b, ok)
		require.NoError(b, store.ApproveTake(ctx, ed.ID, l.ProjectID, take.ID))
		bb.audioMs += l.DurationMs()
	}
	w, err := workflow.NewWorker(p, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1), workflow.WorkerConfig{
		Name: "bench-export", DataDir: bb.dataDir, FetchPollInterval: 50 * time.Millisecond, JobTimeout: 10 * time.Minute,
	}, slog.New(slog.DiscardHandler))
	require.NoError(b, err)
	require.NoError(b, w.Start(ctx))
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(b, w.Stop(ctx))
	})
	return bb
}

// BenchmarkExportHour exports a one-hour, 1,000-line project with four characters:
// 1,000 line WAVs, the 48 kHz mix, four full-length stems, subtitles and the
// manifest, zipped. Each iteration is one export job, from the request to the
// finished archive. peak-RSS-MB is the process's peak resident memory over an export
// (the worker runs in this process; issue 17: exports work in bounded memory).
func BenchmarkExportHour(b *testing.B) {
	bb := setupHour(b)
	ctx := context.Background()
	var size, peak int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		debug.FreeOSMemory() // the mark starts from what is live, not the setup's garbage
		if err := peakrss.Reset(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		ex, err := bb.pipeline.Export(ctx, bb.project.ID, bb.editor.ID, studio.ExportOptions{ApprovedOnly: true})
		require.NoError(b, err)
		for ex.State != studio.ExportDone {
			time.Sleep(20 * time.Millisecond)
			ex, err = bb.store.Export(ctx, bb.project.ID, ex.ID)
			require.NoError(b, err)
			require.NotEqual(b, studio.ExportFailed, ex.State, ex.Error)
		}
		require.Equal(b, benchLines, ex.Lines)
		size = ex.SizeBytes
		b.StopTimer()
		p, err := peakrss.Peak()
		require.NoError(b, err)
		peak = max(peak, p)
		require.NoError(b, os.Remove(workflow.ExportPath(bb.dataDir, ex.ID)))
		b.StartTimer()
	}
	b.ReportMetric(float64(size)/1e6, "MB/archive")
	b.ReportMetric(float64(bb.audioMs)/1000/60, "speech-min")
	b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
}
