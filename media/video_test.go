package media_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/media"
	"dubstudio/media/mediatest"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// probeStreams is what ffprobe says of a file's streams.
type probeStreams struct {
	Streams []struct {
		CodecType string `json:"codec_type"`
		CodecName string `json:"codec_name"`
		Width     int    `json:"width"`
		Height    int    `json:"height"`
		PixFmt    string `json:"pix_fmt"`
		Rate      string `json:"sample_rate"`
	} `json:"streams"`
}

func ffprobeJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, err := exec.Command("ffprobe", append([]string{"-v", "error", "-of", "json"}, args...)...).Output()
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, v))
}

// topBoxes lists the top-level MP4 boxes of the file at path, in order.
func topBoxes(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var names []string
	for {
		var h [8]byte
		if _, err := io.ReadFull(f, h[:]); err != nil {
			return names
		}
		size := int64(binary.BigEndian.Uint32(h[:4]))
		names = append(names, string(h[4:]))
		if size == 1 {
			var ext [8]byte
			_, err := io.ReadFull(f, ext[:])
			require.NoError(t, err)
			size = int64(binary.BigEndian.Uint64(ext[:])) - 8
		}
		require.GreaterOrEqual(t, size, int64(8))
		_, err := f.Seek(size-8, io.SeekCurrent)
		require.NoError(t, err)
	}
}

// keyframeTimes lists the times of the keyframes of the file's video.
func keyframeTimes(t *testing.T, path string) []float64 {
	t.Helper()
	var fr struct {
		Frames []struct {
			Time string `json:"pts_time"`
		} `json:"frames"`
	}
	ffprobeJSON(t, &fr, "-select_streams", "v:0", "-skip_frame", "nokey", "-show_entries", "frame=pts_time", path)
	var out []float64
	for _, f := range fr.Frames {
		v, err := strconv.ParseFloat(f.Time, 64)
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

func TestSourceVideoKeepsItsPicture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	video := mediatest.Video(t, b.dir, "episode.mp4", 3, "Where were you last night?")
	src, v, err := b.lib.SetProjectSourceVideo(ctx, b.project.ID, b.user.ID, b.upload(t, video, "episode.mp4"))
	require.NoError(t, err)
	require.NotNil(t, src, "the sound track is the source audio, as before")
	require.InDelta(t, 3000, src.DurationMs, 100)
	require.NotNil(t, v)
	require.Equal(t, 320, v.Width)
	require.Equal(t, 240, v.Height)
	require.InDelta(t, 3000, v.DurationMs, 100)
	require.Equal(t, "episode.mp4", v.FileName)
	kept, err := b.blobs.Path(v.VideoSHA256)
	require.NoError(t, err)
	orig, err := os.ReadFile(video)
	require.NoError(t, err)
	got, err := os.ReadFile(kept)
	require.NoError(t, err)
	require.Equal(t, orig, got, "the upload is kept as it was")

	// An audio upload is a source without a picture.
	wav := b.ffmpeg(t, "tone.wav", "-f", "lavfi", "-i", "sine=frequency=440:duration=2")
	src, v, err = b.lib.SetProjectSourceVideo(ctx, b.project.ID, b.user.ID, b.upload(t, wav, "tone.wav"))
	require.NoError(t, err)
	require.NotNil(t, src)
	require.Nil(t, v)

	// What is neither is refused and changes nothing.
	_, _, err = b.lib.SetProjectSourceVideo(ctx, b.project.ID, b.user.ID, b.upload(t, b.text(t, "clip.mp4"), "clip.mp4"))
	requireRefused(t, err, studio.ErrInvalid, "audio.unreadable")
	now, err := b.store.ProjectSource(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, "tone.wav", now.FileName)
}

// countFFprobe puts a wrapper of ffprobe first in PATH for the rest of the test and
// returns a function that counts the runs that read path so far. The test must not
// be parallel: PATH is the process's.
func countFFprobe(t *testing.T) func(path string) int {
	t.Helper()
	ffprobe, err := exec.LookPath("ffprobe")
	if err != nil {
		t.Skip("ffprobe is not installed")
	}
	bin := t.TempDir()
	runs := filepath.Join(bin, "runs")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> '" + runs + "'\nexec '" + ffprobe + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "ffprobe"), []byte(script), 0o700))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func(path string) int {
		data, err := os.ReadFile(runs)
		if os.IsNotExist(err) {
			return 0
		}
		require.NoError(t, err)
		n := 0
		for _, arg := range strings.Split(string(data), "\n") {
			if arg == "file:"+path {
				n++
			}
		}
		return n
	}
}

// TestSourceVideoIsProbedOnce: ffprobe reads a video upload once, for its picture and
// its sound track both, and the upload still records all it did: the sound track as
// the source (its length, its channels, a 48 kHz WAV), the picture (its size, length
// and frame rate) and the upload kept as the video's blob; a video without a sound
// track is refused, with one reading too.
func TestSourceVideoIsProbedOnce(t *testing.T) {
	runs := countFFprobe(t)
	b := setup(t)
	ctx := context.Background()
	video := mediatest.VideoAt(t, b.dir, "episode.mp4", 3, "320x240", "30000/1001", "Where were you last night?")
	up := b.upload(t, video, "episode.mp4")
	require.Zero(t, runs(up.Path))
	src, v, err := b.lib.SetProjectSourceVideo(ctx, b.project.ID, b.user.ID, up)
	require.NoError(t, err)
	require.Equal(t, 1, runs(up.Path), "one ffprobe of the upload")

	require.Equal(t, "episode.mp4", src.FileName)
	require.Equal(t, b.user.ID, *src.UploadedBy)
	require.InDelta(t, 3000, src.DurationMs, 100)
	require.Equal(t, 2, src.Channels)
	sound, err := b.store.Blob(ctx, src.AudioSHA256)
	require.NoError(t, err)
	require.Equal(t, audio.FormatWAV, sound.Format)
	require.Equal(t, audio.DefaultSampleRate, sound.SampleRate)
	require.Equal(t, 2, sound.Channels)
	stored, err := b.store.ProjectSource(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, src.AudioSHA256, stored.AudioSHA256)

	require.Equal(t, []int{320, 240}, []int{v.Width, v.Height})
	require.InDelta(t, 3000, v.DurationMs, 100)
	require.Equal(t, []int{30000, 1001}, []int{*v.FrameRateNum, *v.FrameRateDen})
	require.Equal(t, "episode.mp4", v.FileName)
	require.Equal(t, b.user.ID, *v.UploadedBy)
	picture, err := b.store.Blob(ctx, v.VideoSHA256)
	require.NoError(t, err)
	require.Equal(t, "mp4", picture.Format)
	require.Equal(t, v.DurationMs, picture.DurationMs)

	silent := b.ffmpeg(t, "silent.mp4", "-f", "lavfi", "-i", "testsrc=size=64x36:rate=5:duration=1", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	up = b.upload(t, silent, "silent.mp4")
	_, _, err = b.lib.SetProjectSourceVideo(ctx, b.project.ID, b.user.ID, up)
	requireRefused(t, err, studio.ErrInvalid, "audio.no_sound")
	require.Equal(t, 1, runs(up.Path), "one ffprobe of the upload")
	stored, err = b.store.ProjectSource(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, src.AudioSHA256, stored.AudioSHA256, "the refusal changed nothing")
}

// TestSourceVideoKeepsItsFrameRate: the frame rate is probed at the upload, kept with
// the video, and one frame of it is the timeline's nudge (33 ms at 29.97 fps).
func TestSourceVideoKeepsItsFrameRate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, c := range []struct {
		rate     string
		num, den int
		frameMs  int
	}{
		{"25", 25, 1, 40},
		{"30", 30, 1, 33},
		{"30000/1001", 30000, 1001, 33},
		{"24000/1001", 24000, 1001, 42},
	} {
		video := mediatest.VideoAt(t, b.dir, "v"+strings.ReplaceAll(c.rate, "/", "_")+".mp4", 1, "160x120", c.rate, "Hello.")
		info, err := media.ProbeVideo(ctx, video)
		require.NoError(t, err)
		require.Equal(t, []int{c.num, c.den}, []int{info.FrameRateNum, info.FrameRateDen}, c.rate)

		_, v, err := b.lib.SetProjectSourceVideo(ctx, b.project.ID, b.user.ID, b.upload(t, video, "clip.mp4"))
		require.NoError(t, err)
		require.NotNil(t, v.FrameRateNum, c.rate)
		_, err = b.store.SetProjectVideo(ctx, *v, func(context.Context, *sql.Tx, *studio.ProjectVideo) error { return nil })
		require.NoError(t, err)
		kept, err := b.store.ProjectVideo(ctx, b.project.ID)
		require.NoError(t, err)
		require.Equal(t, c.num, *kept.FrameRateNum)
		require.Equal(t, c.den, *kept.FrameRateDen)
		require.Equal(t, c.frameMs, kept.FrameMs(), c.rate)
	}
	// A video recorded before frame rates were probed nudges by a frame at 25 fps.
	require.Equal(t, studio.DefaultFrameMs, (&studio.ProjectVideo{}).FrameMs())
}

func TestParseFrameRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][2]int{
		"25/1": {25, 1}, "30000/1001": {30000, 1001}, "50": {50, 1},
		"0/0": {}, "": {}, "x/1": {}, "25/0": {}, "-25/1": {}, "90000/1": {}, "1/2": {},
	} {
		num, den, ok := media.ParseFrameRate(in)
		require.Equal(t, want, [2]int{num, den}, in)
		require.Equal(t, want != [2]int{}, ok, in)
	}
}

func TestProbeVideoRefusesWhatHasNoPicture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for name, path := range map[string]string{
		"audio":          b.ffmpeg(t, "tone.m4a", "-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac"),
		"text":           b.text(t, "movie.mp4"),
		"image":          b.ffmpeg(t, "still.png", "-f", "lavfi", "-i", "testsrc2=size=64x64", "-frames:v", "1"),
		"mp3 with cover": b.ffmpeg(t, "song.mp3", "-f", "lavfi", "-i", "sine=duration=1", "-f", "lavfi", "-i", "testsrc2=size=64x64:duration=1", "-map", "0:a", "-map", "1:v", "-frames:v", "1", "-c:v", "mjpeg", "-disposition:v", "attached_pic", "-c:a", "libmp3lame"),
	} {
		_, err := media.ProbeVideo(ctx, path)
		require.ErrorIs(t, err, media.ErrNotVideo, name)
		requireRefused(t, err, studio.ErrInvalid, "video.not_video")
	}
	info, err := media.ProbeVideo(ctx, mediatest.Video(t, b.dir, "ok.mp4", 1, "Hello."))
	require.NoError(t, err)
	require.Equal(t, "h264", info.Codec)
}

func TestProxyIsBrowserReady(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	video := mediatest.Video(t, b.dir, "episode.mp4", 4, "Out walking, like I said.")
	_, v, err := b.lib.SetProjectSourceVideo(ctx, b.project.ID, b.user.ID, b.upload(t, video, "episode.mp4"))
	require.NoError(t, err)
	var seen []int
	proxy, err := b.lib.MakeProxy(ctx, v.VideoSHA256, media.ProxyOpts{Height: 120}, func(p int) { seen = append(seen, p) })
	require.NoError(t, err)
	require.Equal(t, "mp4", proxy.Format)
	require.NotEmpty(t, seen, "ffmpeg -progress was read")
	for i := 1; i < len(seen); i++ {
		require.Greater(t, seen[i], seen[i-1], "progress only goes up: %v", seen)
	}
	require.GreaterOrEqual(t, seen[len(seen)-1], 90, "%v", seen)

	path, err := b.blobs.Path(proxy.SHA256)
	require.NoError(t, err)
	var ps probeStreams
	ffprobeJSON(t, &ps, "-show_entries", "stream=codec_type,codec_name,width,height,pix_fmt,sample_rate", path)
	require.Len(t, ps.Streams, 2)
	require.Equal(t, "h264", ps.Streams[0].CodecName)
	require.Equal(t, "yuv420p", ps.Streams[0].PixFmt)
	require.Equal(t, 160, ps.Streams[0].Width, "the aspect is kept")
	require.Equal(t, 120, ps.Streams[0].Height)
	require.Equal(t, "aac", ps.Streams[1].CodecName)
	require.Equal(t, "48000", ps.Streams[1].Rate)

	boxes := strings.Join(topBoxes(t, path), " ")
	require.Less(t, strings.Index(boxes, "moov"), strings.Index(boxes, "mdat"), "+faststart: the index first (%s)", boxes)
	keys := keyframeTimes(t, path)
	require.GreaterOrEqual(t, len(keys), 4, "%v", keys)
	for i := 1; i < len(keys); i++ {
		require.LessOrEqual(t, keys[i]-keys[i-1], 1.05, "a keyframe every second: %v", keys)
	}

	// Under the dub the picture plays without the sound track: the same H.264
	// stream, copied (index first, same keyframes), made once per proxy.
	pic, err := b.lib.ProxyPicture(ctx, proxy.SHA256)
	require.NoError(t, err)
	require.Equal(t, "mp4", pic.Format)
	picPath, err := b.blobs.Path(pic.SHA256)
	require.NoError(t, err)
	var pp probeStreams
	ffprobeJSON(t, &pp, "-show_entries", "stream=codec_type,codec_name,width,height,pix_fmt,sample_rate", picPath)
	require.Len(t, pp.Streams, 1, "no sound track")
	require.Equal(t, ps.Streams[0], pp.Streams[0], "the proxy's picture as it was")
	picBoxes := strings.Join(topBoxes(t, picPath), " ")
	require.Less(t, strings.Index(picBoxes, "moov"), strings.Index(picBoxes, "mdat"), "+faststart (%s)", picBoxes)
	require.Equal(t, keys, keyframeTimes(t, picPath), "the same keyframes")
	again, err := b.lib.ProxyPicture(ctx, proxy.SHA256)
	require.NoError(t, err)
	require.Equal(t, pic.SHA256, again.SHA256)

	// A source already smaller than the height keeps its size.
	proxy, err = b.lib.MakeProxy(ctx, v.VideoSHA256, media.ProxyOpts{}, nil)
	require.NoError(t, err)
	path, err = b.blobs.Path(proxy.SHA256)
	require.NoError(t, err)
	ffprobeJSON(t, &ps, "-show_entries", "stream=codec_type,codec_name,width,height,pix_fmt,sample_rate", path)
	require.Equal(t, 240, ps.Streams[0].Height)
}

func TestProxyOfWhatIsNotVideo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	blob, err := b.store.PutBlob(ctx, b.blobs, b.ffmpeg(t, "tone.wav", "-f", "lavfi", "-i", "sine=duration=1"), studio.Blob{Format: audio.FormatWAV})
	require.NoError(t, err)
	_, err = b.lib.MakeProxy(ctx, blob.SHA256, media.ProxyOpts{}, nil)
	require.ErrorIs(t, err, media.ErrNotVideo)
}

func TestPreviewMixIsTheProgramme(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Lines at 0-1.5 s, 2-3.5 s, 4-5.5 s; the source is 8 s long.
	wav := b.ffmpeg(t, "source.wav", "-f", "lavfi", "-i", "sine=frequency=300:sample_rate=48000:duration=8", "-af", "volume=0.5")
	_, err := b.lib.SetProjectSource(ctx, b.project.ID, b.user.ID, b.upload(t, wav, "source.wav"))
	require.NoError(t, err)
	t0 := b.take(t, b.lines[0], 48000, 0, 440)
	b.take(t, b.lines[1], 48000, 0, 660)
	require.NoError(t, b.store.ApproveTake(ctx, b.user.ID, b.project.ID, t0.ID))

	read := func(opts media.PreviewOpts) audio.PCM {
		blob, err := b.lib.PreviewMix(ctx, b.project.ID, opts)
		require.NoError(t, err)
		p, err := b.blobs.Path(blob.SHA256)
		require.NoError(t, err)
		pcm, err := audio.ReadWAVFile(p)
		require.NoError(t, err)
		require.Equal(t, 8*48000, pcm.Frames(), "from 0 to the end of the programme")
		return pcm
	}
	loud := func(pcm audio.PCM, fromMs, toMs int) bool {
		for i := fromMs * 48 * pcm.Channels; i < toMs*48*pcm.Channels; i++ {
			if pcm.Samples[i] > 1000 || pcm.Samples[i] < -1000 {
				return true
			}
		}
		return false
	}
	latest := read(media.PreviewOpts{})
	require.True(t, loud(latest, 100, 900), "line 1's take at 0 s")
	require.False(t, loud(latest, 1100, 1900), "silence between")
	require.True(t, loud(latest, 2100, 2900), "line 2's take at 2 s")
	require.False(t, loud(latest, 4000, 5500), "line 3 has no take: silence")

	approved := read(media.PreviewOpts{Approved: true})
	require.True(t, loud(approved, 100, 900))
	require.False(t, loud(approved, 2100, 2900), "line 2's take is not approved")

	filled := read(media.PreviewOpts{Approved: true, FillOriginal: true})
	require.True(t, loud(filled, 2100, 2900), "the original where no approved take")
	require.True(t, loud(filled, 4100, 5400), "and where no take at all")
	require.False(t, loud(filled, 6000, 8000), "no line there: silence")

	// The same content again is the same blob.
	a, err := b.lib.PreviewMix(ctx, b.project.ID, media.PreviewOpts{})
	require.NoError(t, err)
	c, err := b.lib.PreviewMix(ctx, b.project.ID, media.PreviewOpts{})
	require.NoError(t, err)
	require.Equal(t, a.SHA256, c.SHA256)
}

// The room for a video's proxy is checked where the proxy will be written, the blob
// store, not where the upload was spooled: here the upload's disk has room to spare
// and the blob store's (a tmpfs) has less than MIN_FREE_MB.
func TestSourceVideoChecksTheBlobStoresSpace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	shm, err := os.MkdirTemp("/dev/shm", "blobs-") //nolint:usetesting // on another file system than t.TempDir's
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(shm) })
	blobFree, uploadFree := statfsFree(t, shm), statfsFree(t, b.dir)
	// Apart by more than other tests' writes could change in the meantime.
	if uploadFree-blobFree < 4<<30 {
		t.Skipf("the blob store's disk (%d MB free) is not smaller than the upload's (%d MB)", blobFree>>20, uploadFree>>20)
	}
	blobs := studio.BlobStore{Dir: filepath.Join(shm, "blobs")}
	lib := media.NewLibrary(b.store, blobs)
	lib.Limits.MinFreeBytes = (blobFree + uploadFree) / 2
	video := mediatest.Video(t, b.dir, "episode.mp4", 2, "Where were you last night?")
	up := b.upload(t, video, "episode.mp4")
	_, _, err = lib.SetProjectSourceVideo(ctx, b.project.ID, b.user.ID, up)
	requireRefused(t, err, audio.ErrNoSpace, "upload.no_space")
	require.FileExists(t, up.Path, "the upload is not taken")
	_, err = b.store.ProjectSource(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound, "no source recorded")
}

func statfsFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	return int64(st.Bavail) * st.Bsize
}

// The preview is as long as the export's programme (studio.Store.ProgrammeMs), one
// count for both: a take running past the last line's slot (its duration lock off)
// is cut at the programme's end, as the export cuts it, not played on.
func TestPreviewMixIsAsLongAsTheExport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	studiotest.Exec(t, b.store, `UPDATE lines SET duration_lock = false WHERE id = $1`, b.lines[2].ID)
	b.take(t, b.lines[2], 3*48000, 0, 440) // 4 s + 3 s: past the slot's end at 5.5 s
	programme, err := b.store.ProgrammeMs(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, 5500, programme)
	blob, err := b.lib.PreviewMix(ctx, b.project.ID, media.PreviewOpts{})
	require.NoError(t, err)
	require.Equal(t, programme, blob.DurationMs)
	p, err := b.blobs.Path(blob.SHA256)
	require.NoError(t, err)
	pcm, err := audio.ReadWAVFile(p)
	require.NoError(t, err)
	require.EqualValues(t, audio.SamplesFor(programme, 48000), pcm.Frames())
}
