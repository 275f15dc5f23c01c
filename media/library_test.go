package media_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/blobhash"
	"dubstudio/i18n"
	"dubstudio/media"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

type testBundle struct {
	store   *studio.Store
	blobs   studio.BlobStore
	lib     *media.Library
	user    *studio.User
	project *studio.Project
	lines   []studio.Line // 0-1.5 s, 2-3.5 s, 4-5.5 s
	dir     string        // for fixtures and uploads
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	for _, tool := range []string{"ffmpeg", "ffprobe", "espeak-ng"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	s := studiotest.Store(t)
	u := studiotest.User(t, s, studio.RoleEditor)
	p := studiotest.Project(t, s, u, 3)
	page, err := s.Lines(context.Background(), p.ID, studio.LineFilter{})
	require.NoError(t, err)
	lines := page.Lines
	bs := studio.BlobStore{Dir: filepath.Join(t.TempDir(), "blobs")}
	return &testBundle{store: s, blobs: bs, lib: media.NewLibrary(s, bs), user: u, project: p, lines: lines, dir: t.TempDir()}
}

// ffmpeg makes a fixture dir/name with ffmpeg args and returns its path.
func (b *testBundle) ffmpeg(t *testing.T, name string, args ...string) string {
	t.Helper()
	out := filepath.Join(b.dir, name)
	msg, err := exec.Command("ffmpeg", append(append([]string{"-v", "error", "-nostdin"}, args...), "-y", out)...).CombinedOutput()
	require.NoError(t, err, string(msg))
	return out
}

// upload copies a fixture to a fresh file, as the web spools one, and returns it.
func (b *testBundle) upload(t *testing.T, fixture, name string) media.Upload {
	t.Helper()
	data, err := os.ReadFile(fixture)
	require.NoError(t, err)
	f, err := os.CreateTemp(b.dir, "upload-*")
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return media.Upload{Path: f.Name(), Name: name}
}

// text writes a file that is not audio, whatever its name says.
func (b *testBundle) text(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(b.dir, "text", name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte("this is text pretending to be audio"), 0o600))
	return p
}

// requireRefused checks that err refuses a request: it unwraps to sentinel and to
// the catalog message key.
func requireRefused(t *testing.T, err error, sentinel error, key string) {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	var ie *i18n.Error
	require.ErrorAs(t, err, &ie, "no user message in %v", err)
	require.Equal(t, key, ie.Key)
}

// take records a take of l: n samples at 48 kHz, silent for the first lead, then a
// tone at freq.
func (b *testBundle) take(t *testing.T, l studio.Line, n, lead int, freq float64) *studio.Take {
	t.Helper()
	return studiotest.Take(t, b.store, b.blobs, b.dir, l, n, lead, freq)
}

func TestCharacterAudioIsProbedAndStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	ch := chars[0]
	voice := filepath.Join(b.dir, "voice.wav")
	out, err := exec.Command("espeak-ng", "-w", voice, "This is my voice. I read a few sentences so that the clone has enough to learn from, and then I stop.").CombinedOutput()
	require.NoError(t, err, string(out))

	// Refused by content, whatever the name says; nothing is recorded.
	err = b.lib.SetCharacterReference(ctx, b.project.ID, ch.ID, b.upload(t, b.text(t, "voice.wav"), "voice.wav"))
	requireRefused(t, err, studio.ErrInvalid, "audio.unreadable")
	require.ErrorIs(t, err, audio.ErrNotAudio, "the cause is kept")
	aac := b.ffmpeg(t, "voice.m4a", "-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac")
	err = b.lib.SetCharacterReference(ctx, b.project.ID, ch.ID, b.upload(t, aac, "voice.m4a"))
	requireRefused(t, err, studio.ErrInvalid, "audio.format_not_allowed")
	err = b.lib.SetCharacterEmotionAudio(ctx, b.project.ID, ch.ID, b.upload(t, b.text(t, "angry.mp3"), "angry.mp3"), 0.8)
	requireRefused(t, err, studio.ErrInvalid, "audio.unreadable")
	got, err := b.store.Character(ctx, b.project.ID, ch.ID)
	require.NoError(t, err)
	require.Nil(t, got.RefAudioSHA256)
	require.Equal(t, ch.Emotion, got.Emotion)

	// Accepted: stored as it is, under its hash.
	up := b.upload(t, voice, "my voice.wav")
	require.NoError(t, b.lib.SetCharacterReference(ctx, b.project.ID, ch.ID, up))
	got, err = b.store.Character(ctx, b.project.ID, ch.ID)
	require.NoError(t, err)
	require.NotNil(t, got.RefAudioSHA256)
	require.Equal(t, "my voice.wav", got.RefAudioName)
	sum, err := blobhash.File(voice)
	require.NoError(t, err)
	require.Equal(t, sum, *got.RefAudioSHA256)
	p, err := b.blobs.Path(sum)
	require.NoError(t, err)
	require.FileExists(t, p)
	require.NoFileExists(t, up.Path, "moved into the blob store")
	blob, err := b.store.Blob(ctx, sum)
	require.NoError(t, err)
	require.Equal(t, audio.FormatWAV, blob.Format)
	require.Equal(t, 22050, blob.SampleRate)

	require.NoError(t, b.lib.SetCharacterEmotionAudio(ctx, b.project.ID, ch.ID, b.upload(t, voice, "angry.wav"), 0.6))
	got, err = b.store.Character(ctx, b.project.ID, ch.ID)
	require.NoError(t, err)
	require.Equal(t, studio.Emotion{Mode: studio.EmotionAudio, AudioSHA256: sum, Weight: 0.6}, got.Emotion, "same bytes, same blob")
	// The store's own refusals come through as they are.
	err = b.lib.SetCharacterEmotionAudio(ctx, b.project.ID, ch.ID, b.upload(t, voice, "angry.wav"), 2)
	require.ErrorIs(t, err, studio.ErrInvalid)
	err = b.lib.SetCharacterReference(ctx, b.project.ID, ch.ID+1000, b.upload(t, voice, "voice.wav"))
	require.ErrorIs(t, err, studio.ErrNotFound)
}

func TestProjectSourceIsItsSoundTrack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	err := func() error {
		_, err := b.lib.SetProjectSource(ctx, b.project.ID, b.user.ID, b.upload(t, b.text(t, "episode.mp4"), "episode.mp4"))
		return err
	}()
	requireRefused(t, err, studio.ErrInvalid, "audio.unreadable")
	silent := b.ffmpeg(t, "silent.mp4", "-f", "lavfi", "-i", "testsrc=size=64x36:rate=5:duration=1", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	_, err = b.lib.SetProjectSource(ctx, b.project.ID, b.user.ID, b.upload(t, silent, "silent.mp4"))
	requireRefused(t, err, studio.ErrInvalid, "audio.no_sound")
	_, err = b.store.ProjectSource(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound, "nothing recorded")

	video := b.ffmpeg(t, "episode.mp4", "-f", "lavfi", "-i", "testsrc=size=64x36:rate=5:duration=5",
		"-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=5", "-shortest",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac")
	up := b.upload(t, video, "episode 7.mp4")
	src, err := b.lib.SetProjectSource(ctx, b.project.ID, b.user.ID, up)
	require.NoError(t, err)
	require.Equal(t, "episode 7.mp4", src.FileName)
	require.Equal(t, b.user.ID, *src.UploadedBy)
	require.InDelta(t, 5000, src.DurationMs, 100)
	require.Equal(t, 1, src.Channels)
	stored, err := b.store.ProjectSource(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, src.AudioSHA256, stored.AudioSHA256)
	p, err := b.blobs.Path(src.AudioSHA256)
	require.NoError(t, err)
	pcm, err := audio.ReadWAVFile(p)
	require.NoError(t, err, "the sound track is kept as WAV")
	require.Equal(t, 48000, pcm.SampleRate)
	require.FileExists(t, up.Path, "the upload is its caller's to remove")
	require.NoFileExists(t, up.Path+".wav", "no extraction left behind")

	// A stereo recording replaces it.
	wav := b.ffmpeg(t, "dialogue.wav", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=12", "-ac", "2")
	src, err = b.lib.SetProjectSource(ctx, b.project.ID, b.user.ID, b.upload(t, wav, "dialogue.wav"))
	require.NoError(t, err)
	require.Equal(t, 2, src.Channels)
	require.InDelta(t, 12000, src.DurationMs, 50)

	require.NoError(t, b.lib.DeleteProjectSource(ctx, b.project.ID))
	_, err = b.store.ProjectSource(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound)
}

func TestSourceSegmentIsCutOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	_, err := b.lib.SourceSegment(ctx, b.project.ID, 1000, 2500)
	requireRefused(t, err, studio.ErrNotFound, "source.missing")

	wav := b.ffmpeg(t, "programme.wav", "-f", "lavfi", "-i", "sine=frequency=220:sample_rate=48000:duration=10", "-ac", "2")
	src, err := b.lib.SetProjectSource(ctx, b.project.ID, b.user.ID, b.upload(t, wav, "programme.wav"))
	require.NoError(t, err)

	seg, err := b.lib.SourceSegment(ctx, b.project.ID, 1000, 2500)
	require.NoError(t, err)
	require.Equal(t, studio.Blob{SHA256: seg.SHA256, SizeBytes: seg.SizeBytes, Format: audio.FormatWAV, DurationMs: 1500,
		SampleRate: 48000, Channels: 2, CreatedAt: seg.CreatedAt}, *seg)
	p, err := b.blobs.Path(seg.SHA256)
	require.NoError(t, err)
	pcm, err := audio.ReadWAVFile(p)
	require.NoError(t, err)
	require.Equal(t, int(audio.SamplesFor(1500, 48000)), pcm.Frames())
	require.Equal(t, 2, pcm.Channels)

	// Cut once, under the key the derived audio cache has always used for it.
	again, err := b.lib.SourceSegment(ctx, b.project.ID, 1000, 2500)
	require.NoError(t, err)
	require.Equal(t, seg.SHA256, again.SHA256)
	cached, err := b.store.DerivedAudio(ctx, b.blobs, media.SourceSegmentKey(src.AudioSHA256, 1000, 2500),
		func(context.Context, string) (studio.Blob, error) {
			t.Fatal("the segment was cut already")
			return studio.Blob{}, nil
		})
	require.NoError(t, err)
	require.Equal(t, seg.SHA256, cached.SHA256)
	var n int
	require.NoError(t, b.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM derived_audio WHERE key LIKE 'segment:%'`).Scan(&n))
	require.Equal(t, 1, n)

	// A segment past the end of the source is padded with silence to its length.
	tail, err := b.lib.SourceSegment(ctx, b.project.ID, 9500, 11000)
	require.NoError(t, err)
	p, err = b.blobs.Path(tail.SHA256)
	require.NoError(t, err)
	pcm, err = audio.ReadWAVFile(p)
	require.NoError(t, err)
	require.Equal(t, int(audio.SamplesFor(1500, 48000)), pcm.Frames())

	_, err = b.lib.SourceSegment(ctx, b.project.ID, 2500, 2500)
	requireRefused(t, err, studio.ErrNotFound, "source.no_segment")
	_, err = b.lib.SourceSegment(ctx, b.project.ID, 10000, 10500)
	requireRefused(t, err, studio.ErrNotFound, "source.after_end")
}

// TestRangeMixIsTheTimeline mixes lines as the export places them: each take at its
// timecode to the sample, silence between, and the same range is mixed once.
func TestRangeMixIsTheTimeline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	lines := b.lines
	ids := []int64{lines[2].ID, lines[1].ID}

	_, err := b.lib.RangeMix(ctx, b.project.ID, nil)
	requireRefused(t, err, studio.ErrInvalid, "range.none")
	_, err = b.lib.RangeMix(ctx, b.project.ID, ids)
	requireRefused(t, err, studio.ErrInvalid, "range.no_takes")

	// Line 2 plays its approved take, not its newer current one.
	approved := b.take(t, lines[1], 72000, 0, 330)
	require.NoError(t, b.store.ApproveTake(ctx, b.user.ID, b.project.ID, approved.ID))
	b.take(t, lines[1], 72000, 0, 990)
	third := b.take(t, lines[2], 76800, 0, 440) // 1.6 s: 0.1 s past its slot

	mix, err := b.lib.RangeMix(ctx, b.project.ID, ids)
	require.NoError(t, err)
	require.Equal(t, 2, mix.FirstIdx)
	require.Equal(t, 3, mix.LastIdx)
	require.Equal(t, 2000, mix.StartMs)
	require.Equal(t, 5600, mix.EndMs, "to the end of line 3's take")
	p, err := b.blobs.Path(mix.Blob.SHA256)
	require.NoError(t, err)
	pcm, err := audio.ReadWAVFile(p)
	require.NoError(t, err)
	require.Equal(t, int(audio.SamplesFor(5600, 48000)-audio.SamplesFor(2000, 48000)), pcm.Frames())
	for _, tc := range []struct {
		take  *studio.Take
		start int
	}{{approved, 2000}, {third, 4000}} {
		tp, err := b.blobs.Path(tc.take.AudioSHA256)
		require.NoError(t, err)
		clip, err := audio.ReadWAVFile(tp)
		require.NoError(t, err)
		off := audio.SamplesFor(tc.start, 48000) - audio.SamplesFor(2000, 48000)
		require.Equal(t, clip.Samples, pcm.Samples[off:off+int64(clip.Frames())], "take at %d ms", tc.start)
	}
	require.Equal(t, make([]int16, 24000), pcm.Samples[72000:96000], "silence between the lines")

	again, err := b.lib.RangeMix(ctx, b.project.ID, ids)
	require.NoError(t, err)
	require.Equal(t, mix.Blob.SHA256, again.Blob.SHA256)
	var n int
	require.NoError(t, b.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM derived_audio WHERE key LIKE 'range:%'`).Scan(&n))
	require.Equal(t, 1, n, "mixed once")

	studiotest.Exec(t, b.store, `UPDATE lines SET end_ms = $1 WHERE id = $2`, 2000+media.MaxRangeMs+1, lines[2].ID)
	_, err = b.lib.RangeMix(ctx, b.project.ID, ids)
	requireRefused(t, err, studio.ErrInvalid, "range.too_long")
}

func TestSpeechBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tk := b.take(t, b.lines[0], 48000, 12000, 440) // 0.25 s of silence, then 0.75 s of tone
	start, end := b.lib.SpeechBounds(*tk)
	require.InDelta(t, 250, start, 1)
	require.InDelta(t, 1000, end, 1)
	silent := b.take(t, b.lines[1], 4800, 4800, 440)
	start, end = b.lib.SpeechBounds(*silent)
	require.Equal(t, [2]int{-1, -1}, [2]int{start, end}, "silent")
	start, end = b.lib.SpeechBounds(studio.Take{AudioSHA256: "not a hash"})
	require.Equal(t, [2]int{-1, -1}, [2]int{start, end}, "unreadable")
}

func TestDerivedKeysSeparateTheirParts(t *testing.T) {
	t.Parallel()
	require.Equal(t, "segment:ab:1000:1500", media.SourceSegmentKey("ab", 1000, 1500))
	require.NotEqual(t, media.DerivedKey("range", "a", "bc"), media.DerivedKey("range", "ab", "c"))
}

// TestUploadsAreBoundedByLengthAndSpace: a two-hour file was accepted as a reference
// voice, a 0.4 s tone and a silent recording as voices, a source of any length was
// extracted without looking at the disk. Each is refused with a message saying the
// limit, before anything is stored.
func TestUploadsAreBoundedByLengthAndSpace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	ch := chars[0]
	sine := func(name, seconds string) string {
		return b.ffmpeg(t, name, "-f", "lavfi", "-i", "sine=frequency=220:sample_rate=16000:duration="+seconds)
	}

	short := sine("short.wav", "0.4")
	err = b.lib.SetCharacterReference(ctx, b.project.ID, ch.ID, b.upload(t, short, "short.wav"))
	requireRefused(t, err, studio.ErrInvalid, "upload.reference_length")
	require.Contains(t, err.Error(), "0.4 s")
	long := sine("long.wav", "31")
	err = b.lib.SetCharacterEmotionAudio(ctx, b.project.ID, ch.ID, b.upload(t, long, "long.wav"), 0.5)
	requireRefused(t, err, studio.ErrInvalid, "upload.reference_length")
	require.Contains(t, err.Error(), "first 15 s")
	silent := b.ffmpeg(t, "silent.wav", "-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", "5")
	err = b.lib.SetCharacterReference(ctx, b.project.ID, ch.ID, b.upload(t, silent, "silent.wav"))
	requireRefused(t, err, studio.ErrInvalid, "upload.reference_silent")
	got, err := b.store.Character(ctx, b.project.ID, ch.ID)
	require.NoError(t, err)
	require.Nil(t, got.RefAudioSHA256, "nothing recorded")
	require.NoError(t, b.lib.SetCharacterReference(ctx, b.project.ID, ch.ID, b.upload(t, sine("ok.wav", "4"), "ok.wav")), "four seconds of sound pass")

	b.lib.Limits.SourceMaxMs = 2000
	_, err = b.lib.SetProjectSource(ctx, b.project.ID, b.user.ID, b.upload(t, sine("source.wav", "3"), "source.wav"))
	requireRefused(t, err, studio.ErrInvalid, "upload.source_too_long")
	b.lib.Limits.SourceMaxMs = 0
	b.lib.Limits.MinFreeBytes = 1 << 60 // more than any disk has
	_, err = b.lib.SetProjectSource(ctx, b.project.ID, b.user.ID, b.upload(t, sine("source.wav", "3"), "source.wav"))
	requireRefused(t, err, audio.ErrNoSpace, "upload.no_space")
	_, err = b.store.ProjectSource(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound, "no source recorded")
}
