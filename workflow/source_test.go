package workflow_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/media"
	"dubstudio/studio"
	"dubstudio/tts"
)

// emotionEngine records the emotion reference each synthesis gets, with the length of
// its audio, then lets the real engine speak.
type emotionEngine struct {
	tts.Engine
	mu  sync.Mutex
	got map[string]emotionSeen // by text
}

type emotionSeen struct {
	emotion tts.Emotion
	frames  int
	err     error
}

func (e *emotionEngine) Synthesize(ctx context.Context, req tts.Request) (tts.Result, error) {
	seen := emotionSeen{emotion: req.Emotion}
	if req.Emotion.AudioPath != "" {
		pcm, err := audio.ReadWAVFile(req.Emotion.AudioPath)
		seen.frames, seen.err = pcm.Frames(), err
	}
	e.mu.Lock()
	e.got[req.Text] = seen
	e.mu.Unlock()
	return e.Engine.Synthesize(ctx, req)
}

// TestEmotionFromTheSourceSegment renders lines whose emotion reference is the
// project's source audio: a line's own segment, and a character's default segment.
// The engine gets the segment as a WAV exactly as long as the segment, cut once and
// kept under the same key the review page plays it from.
func TestEmotionFromTheSourceSegment(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg is not installed")
	}
	b := setup(t, 3) // 0-1.5 s Alice, 2-3.5 s Bob, 4-5.5 s Alice
	ctx := context.Background()
	lines := b.Lines(t)
	blobs := studio.BlobStore{Dir: filepath.Join(b.DataDir, "blobs")}

	// Without source audio, a line that asks for it fails with a message to act on.
	_, err := b.Store.UpdateLine(ctx, b.Editor.ID, b.Project.ID, lines[0].ID, studio.LineEdit{BaseRevision: lines[0].Revision,
		Emotion: ptrTo(ptrTo(studio.SourceEmotion(lines[0].StartMs, lines[0].EndMs, 0.8)))})
	require.NoError(t, err)
	eng := &emotionEngine{Engine: tts.NewEspeak(tts.EspeakConfig{}), got: map[string]emotionSeen{}}
	b.startWorker(t, workerOpts{engine: eng})
	_, err = b.Pipeline.RenderLines(ctx, b.Project.ID, []int64{lines[0].ID})
	require.NoError(t, err)
	counts := b.WaitSettled(t, time.Minute)
	require.Equal(t, 1, counts[studio.StateFailed], "%v", counts)
	failed, err := b.Store.Line(ctx, b.Project.ID, lines[0].ID)
	require.NoError(t, err)
	require.Contains(t, failed.LastError, "source.missing")

	// The programme's sound track: 10 s of tone, stored as the project's source.
	wav := filepath.Join(t.TempDir(), "programme.wav")
	out, err := exec.Command("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "sine=frequency=220:sample_rate=48000:duration=10", "-y", wav).CombinedOutput()
	require.NoError(t, err, string(out))
	blob, err := b.Store.PutBlob(ctx, blobs, wav, studio.Blob{Format: "wav", DurationMs: 10000, SampleRate: 48000, Channels: 1})
	require.NoError(t, err)
	require.NoError(t, b.Store.SetProjectSource(ctx, studio.ProjectSource{ProjectID: b.Project.ID, AudioSHA256: blob.SHA256,
		DurationMs: 10000, Channels: 1}))
	// Bob (line 2) follows a segment of his own by default: 6.0-7.25 s.
	require.NoError(t, b.Store.SetCharacterSourceEmotion(ctx, b.Project.ID, *lines[1].CharacterID, 6000, 7250, 0.5))

	_, err = b.Pipeline.RenderLines(ctx, b.Project.ID, []int64{lines[0].ID, lines[1].ID, lines[2].ID})
	require.NoError(t, err)
	counts = b.WaitSettled(t, time.Minute)
	require.Equal(t, 3, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)

	eng.mu.Lock()
	defer eng.mu.Unlock()
	first := eng.got[lines[0].Text]
	require.NoError(t, first.err)
	require.Equal(t, tts.EmotionAudio, first.emotion.Mode)
	require.InDelta(t, 0.8, first.emotion.Weight, 1e-9)
	require.Equal(t, int(audio.SamplesFor(1500, 48000)), first.frames, "the line's own segment")
	sum, err := b.Store.DerivedAudio(ctx, blobs, media.SourceSegmentKey(blob.SHA256, lines[0].StartMs, lines[0].EndMs),
		func(context.Context, string) (studio.Blob, error) {
			t.Fatal("the segment was cut already")
			return studio.Blob{}, nil
		})
	require.NoError(t, err)
	p, _ := blobs.Path(sum.SHA256)
	require.Equal(t, p, first.emotion.AudioPath, "the same cached segment the review page plays")

	second := eng.got[lines[1].Text]
	require.NoError(t, second.err)
	require.Equal(t, int(audio.SamplesFor(1250, 48000)), second.frames, "the character's default segment")
	require.InDelta(t, 0.5, second.emotion.Weight, 1e-9)

	third := eng.got[lines[2].Text]
	require.Empty(t, third.emotion.AudioPath, "Alice's default is the speaker; only line 1 overrides it")
}

func ptrTo[T any](v T) *T { return &v }
