package media_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/media"
	"dubstudio/studio"
)

// toneLevel is the amplitude (of full scale) of the freq Hz component of channel 0 of
// p between msFrom and msTo (Goertzel): a bed's tone, whatever else sounds.
func toneLevel(p audio.PCM, freq float64, msFrom, msTo int) float64 {
	from, to := msFrom*p.SampleRate/1000, msTo*p.SampleRate/1000
	w := 2 * math.Pi * freq / float64(p.SampleRate)
	c := 2 * math.Cos(w)
	var s1, s2 float64
	for i := from; i < to; i++ {
		s := float64(p.Samples[i*p.Channels])/32768 + c*s1 - s2
		s2, s1 = s1, s
	}
	return 2 * math.Sqrt(max(s1*s1+s2*s2-c*s1*s2, 0)) / float64(to-from)
}

// TestBedUploadReplaceAndRemove takes a stereo M&E bed, replaces it with a full mix
// (another kind), and refuses what is not audio, a bed past SOURCE_MAX_SECONDS, a
// disk too full and an unknown kind, each changing nothing; then removes it. The
// bed's blob belongs to the project (project_blobs, by the migration's trigger).
func TestBedUploadReplaceAndRemove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	me := b.ffmpeg(t, "me.flac", "-f", "lavfi", "-i", "sine=frequency=15000:sample_rate=44100:duration=3", "-ac", "2")
	bed, err := b.lib.SetProjectBed(ctx, b.project.ID, b.user.ID, studio.BedME, b.upload(t, me, "M&E stereo.flac"))
	require.NoError(t, err)
	require.Equal(t, 2, bed.Channels)
	require.InDelta(t, 3000, bed.DurationMs, 30)
	got, err := b.store.ProjectBed(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, bed.AudioSHA256, got.AudioSHA256)
	require.Equal(t, "M&E stereo.flac", got.FileName)
	blob, err := b.store.Blob(ctx, bed.AudioSHA256)
	require.NoError(t, err)
	require.Equal(t, 48000, blob.SampleRate, "extracted at 48 kHz, as a source")
	ok, err := b.store.MayHearBlob(ctx, b.user, bed.AudioSHA256)
	require.NoError(t, err)
	require.True(t, ok, "the bed's blob is the project's")

	mix := b.ffmpeg(t, "mix.mp4", "-f", "lavfi", "-i", "sine=frequency=500:sample_rate=48000:duration=4", "-c:a", "aac")
	full, err := b.lib.SetProjectBed(ctx, b.project.ID, b.user.ID, studio.BedFullMix, b.upload(t, mix, "full.mp4"))
	require.NoError(t, err)
	require.Equal(t, studio.BedFullMix, full.Kind)
	require.NotEqual(t, bed.AudioSHA256, full.AudioSHA256)

	unchanged := func(msg string) {
		t.Helper()
		got, err := b.store.ProjectBed(ctx, b.project.ID)
		require.NoError(t, err)
		require.Equal(t, full.AudioSHA256, got.AudioSHA256, msg)
		require.Equal(t, studio.BedFullMix, got.Kind, msg)
	}
	_, err = b.lib.SetProjectBed(ctx, b.project.ID, b.user.ID, studio.BedME, b.upload(t, b.text(t, "bed.wav"), "bed.wav"))
	require.ErrorIs(t, err, studio.ErrInvalid)
	unchanged("text is refused")
	_, err = b.lib.SetProjectBed(ctx, b.project.ID, b.user.ID, "stems", b.upload(t, me, "me.flac"))
	requireRefused(t, err, studio.ErrInvalid, "bed.bad_kind")
	unchanged("an unknown kind is refused")
	b.lib.Limits.SourceMaxMs = 2000
	_, err = b.lib.SetProjectBed(ctx, b.project.ID, b.user.ID, studio.BedME, b.upload(t, me, "me.flac"))
	requireRefused(t, err, studio.ErrInvalid, "upload.source_too_long")
	unchanged("too long")
	b.lib.Limits.SourceMaxMs = 0
	b.lib.Limits.MinFreeBytes = 1 << 60
	_, err = b.lib.SetProjectBed(ctx, b.project.ID, b.user.ID, studio.BedME, b.upload(t, me, "me.flac"))
	requireRefused(t, err, audio.ErrNoSpace, "upload.no_space")
	unchanged("no space")
	b.lib.Limits.MinFreeBytes = 0

	require.NoError(t, b.lib.DeleteProjectBed(ctx, b.project.ID))
	_, err = b.store.ProjectBed(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound)
}

// TestPreviewMixPlaysTheBed puts a 15 kHz bed (longer than the programme) under a
// project with takes on lines 1 and 2: the preview over the bed has the bed where no
// line speaks, ducked under the takes, and is as long as the programme; without the
// bed option it is the dub alone; a new bed is a new mix.
func TestPreviewMixPlaysTheBed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Lines at 0-1.5 s, 2-3.5 s, 4-5.5 s: takes of 1 s tones at 440 and 660 Hz.
	b.take(t, b.lines[0], 48000, 0, 440)
	b.take(t, b.lines[1], 48000, 0, 660)
	bedWav := b.ffmpeg(t, "bed.wav", "-f", "lavfi", "-i", "aevalsrc=0.1*sin(15000*2*PI*t):s=48000:d=9")
	_, err := b.lib.SetProjectBed(ctx, b.project.ID, b.user.ID, studio.BedME, b.upload(t, bedWav, "bed.wav"))
	require.NoError(t, err)

	read := func(opts media.PreviewOpts) (audio.PCM, string) {
		blob, err := b.lib.PreviewMix(ctx, b.project.ID, opts)
		require.NoError(t, err)
		p, err := b.blobs.Path(blob.SHA256)
		require.NoError(t, err)
		pcm, err := audio.ReadWAVFile(p)
		require.NoError(t, err)
		require.Equal(t, 5500*48, pcm.Frames(), "from 0 to the end of the programme, the bed trimmed")
		return pcm, blob.SHA256
	}
	over, sha := read(media.PreviewOpts{Bed: true})
	between := toneLevel(over, 15000, 4100, 5400) // no take on line 3
	under := toneLevel(over, 15000, 2200, 2900)
	t.Logf("bed in the preview: %.4f where no line speaks, %.4f under line 2's take", between, under)
	require.InDelta(t, 0.1, between, 0.01, "the bed where no line speaks")
	require.Less(t, under, between/2, "ducked under a take")
	require.Greater(t, toneLevel(over, 660, 2200, 2900), 0.1, "the take plays over it")

	alone, _ := read(media.PreviewOpts{})
	require.Less(t, toneLevel(alone, 15000, 4100, 5400), 0.001, "dub only: no bed")

	again, sha2 := read(media.PreviewOpts{Bed: true})
	require.Equal(t, sha, sha2, "the same content is the same cached mix")
	require.Equal(t, over.Frames(), again.Frames())

	// The ducking is a setting (BED_DUCK_*): at 1:1 the bed is not ducked at all, and
	// the new setting is a new mix, not the cached one.
	b.lib.Duck = audio.DuckParams{Ratio: 1}
	flat, shaFlat := read(media.PreviewOpts{Bed: true})
	require.NotEqual(t, sha, shaFlat, "another ducking, another mix")
	require.InDelta(t, 0.1, toneLevel(flat, 15000, 2200, 2900), 0.01, "ratio 1: the bed at its level under the take")
	b.lib.Duck = audio.DuckParams{}
	quiet := b.ffmpeg(t, "quiet.wav", "-f", "lavfi", "-i", "aevalsrc=0.02*sin(15000*2*PI*t):s=48000:d=2")
	_, err = b.lib.SetProjectBed(ctx, b.project.ID, b.user.ID, studio.BedME, b.upload(t, quiet, "quiet.wav"))
	require.NoError(t, err)
	short, sha3 := read(media.PreviewOpts{Bed: true})
	require.NotEqual(t, sha, sha3, "a new bed is a new mix")
	require.InDelta(t, 0.02, toneLevel(short, 15000, 1100, 1900), 0.005, "the new bed")
	require.Less(t, toneLevel(short, 15000, 4100, 5400), 0.001, "padded with silence past its end")
}
