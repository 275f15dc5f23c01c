package media

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"dubstudio/audio"
	"dubstudio/i18n"
	"dubstudio/internal/perm"
	"dubstudio/studio"
)

// ErrNotVideo is what a file without a picture unwraps to (with studio.ErrInvalid and
// an *i18n.Error), for the proxy job: an audio file, an image, a text file.
var ErrNotVideo = errors.New("not a video")

// Defaults of ProxyOpts, matching the settings PROXY_HEIGHT, PROXY_CRF and
// PROXY_THREADS.
const (
	DefaultProxyHeight = 480
	DefaultProxyCRF    = 28
	// proxyKeyframeSeconds is the proxy's keyframe interval: a seek decodes at most
	// this much picture before the frame it shows.
	proxyKeyframeSeconds = 1
	// proxyAudioBitrate is the AAC rate of the proxy's sound track (the original
	// sound, played when the preview is switched to it).
	proxyAudioBitrate = "96k"
	// proxyBytesPerSecond bounds what a second of proxy takes on disk, for the free
	// space check before a transcoding: CRF 28 at 480p runs near 1 Mbit/s, this is
	// twice that.
	proxyBytesPerSecond = 256 << 10
)

// ProxyOpts say how a video's proxy is made. Zero fields take the defaults.
type ProxyOpts struct {
	// Height is the proxy's largest height in pixels (the width follows the aspect);
	// a smaller source keeps its own.
	Height int
	// CRF is x264's constant rate factor: higher is smaller and blurrier.
	CRF int
	// Threads bounds ffmpeg's threads (0: ffmpeg decides, about one per core).
	Threads int
}

func (o ProxyOpts) withDefaults() ProxyOpts {
	if o.Height <= 0 {
		o.Height = DefaultProxyHeight
	}
	if o.CRF <= 0 {
		o.CRF = DefaultProxyCRF
	}
	return o
}

// VideoInfo is what probing found about a file's picture.
type VideoInfo struct {
	// Format is the container as ffprobe named it (mov,mp4,..., matroska,webm).
	Format        string
	Codec         string
	Width, Height int
	Duration      time.Duration
	// FrameRateNum/FrameRateDen is the picture's frame rate (30000/1001 for NTSC);
	// 0/0 when ffprobe gives none that is plausible.
	FrameRateNum, FrameRateDen int
}

// Plausible frame rates: below or above these ffprobe's figure is a timebase or a
// guess, not the picture's rate.
const (
	minFrameRate = 1
	maxFrameRate = 1000
)

// parseFrameRate reads ffprobe's rational frame rate ("25/1", "30000/1001"); ok is
// false for "0/0", anything unreadable and rates outside minFrameRate..maxFrameRate.
func parseFrameRate(s string) (num, den int, ok bool) {
	a, b, found := strings.Cut(s, "/")
	if !found {
		b = "1"
	}
	num, err1 := strconv.Atoi(a)
	den, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || num <= 0 || den <= 0 || num < minFrameRate*den || num > maxFrameRate*den {
		return 0, 0, false
	}
	return num, den, true
}

// ProbeVideo reads the picture of the file at path by its content. A file without a
// moving picture (audio, with or without cover art, an image, anything ffprobe cannot
// read) gives an error that unwraps to ErrNotVideo, studio.ErrInvalid and an
// *i18n.Error saying so.
func ProbeVideo(ctx context.Context, path string) (VideoInfo, error) {
	_, info, err := probeVideo(ctx, path)
	return info, err
}

// probeVideo is ProbeVideo that also returns ffprobe's reading of the file (nil only
// with an error that is not ErrNotVideo), for an upload to find its sound track in
// without running ffprobe again.
func probeVideo(ctx context.Context, path string) (*audio.ProbeResult, VideoInfo, error) {
	if path == "" || strings.HasPrefix(path, "-") {
		return nil, VideoInfo{}, fmt.Errorf("%w: file name %q", studio.ErrInvalid, path)
	}
	// A file gone (a blob store not mounted) is an error to retry, not a refusal.
	r, err := audio.ProbeFile(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, VideoInfo{}, ctx.Err()
		}
		return nil, VideoInfo{}, err
	}
	info, err := videoInfo(r)
	return r, info, err
}

// videoInfo reads the picture of a file from ffprobe's reading of it.
func videoInfo(r *audio.ProbeResult) (VideoInfo, error) {
	notVideo := func(cause string) error {
		return fmt.Errorf("%w: %w: %w (%s)", i18n.Errorf(studio.ErrInvalid, "video.not_video"), ErrNotVideo, studio.ErrInvalid, cause)
	}
	if why := r.Unreadable(); why != "" {
		return VideoInfo{}, notVideo(why)
	}
	format := r.Format.FormatName
	for _, s := range r.Streams {
		if s.CodecType != "video" || s.Disposition.AttachedPic != 0 || s.Width <= 0 || s.Height <= 0 {
			continue
		}
		// Still images (a PNG, a JPEG) are one-frame "video" streams of image codecs.
		if strings.HasSuffix(format, "_pipe") || format == "image2" {
			return VideoInfo{}, notVideo("a still image")
		}
		secs, _ := strconv.ParseFloat(r.Format.Duration, 64)
		info := VideoInfo{Format: format, Codec: s.CodecName, Width: s.Width, Height: s.Height,
			Duration: time.Duration(secs * float64(time.Second))}
		// The average rate is the picture's for a variable-rate file too; the
		// stream's base rate (r_frame_rate) where it has none.
		num, den, ok := parseFrameRate(s.AvgFrameRate)
		if !ok {
			num, den, ok = parseFrameRate(s.RFrameRate)
		}
		if ok {
			info.FrameRateNum, info.FrameRateDen = num, den
		}
		return info, nil
	}
	return VideoInfo{}, notVideo("no video stream in " + format)
}

// SetProjectSourceVideo takes an uploaded audio or video file as a project's source,
// as SetProjectSource does, and keeps a video's picture too: the upload itself is
// moved into the blob store, and the project's video to record (and make a proxy
// of) is returned; nil for a file without a picture. A video is first probed and the
// room for its proxy checked (in the blob store, where the proxy is written), so a
// refusal changes nothing. ffprobe reads the upload once, for its picture and its
// sound track both.
func (l *Library) SetProjectSourceVideo(ctx context.Context, projectID, userID int64, up Upload) (*studio.ProjectSource, *studio.ProjectVideo, error) {
	reading, info, err := probeVideo(ctx, up.Path)
	isVideo := err == nil
	if err != nil && !errors.Is(err, ErrNotVideo) {
		return nil, nil, err
	}
	if isVideo {
		if err := os.MkdirAll(l.blobs.Dir, perm.Dir); err != nil {
			return nil, nil, err
		}
		if err := l.checkProxySpace(l.blobs.Dir, info.Duration); err != nil {
			return nil, nil, err
		}
	}
	src, err := l.setProjectSource(ctx, projectID, userID, up, reading)
	if err != nil || !isVideo {
		return src, nil, err
	}
	blob, err := l.store.PutBlob(ctx, l.blobs, up.Path, studio.Blob{Format: audio.FormatName(info.Format),
		DurationMs: int(info.Duration.Milliseconds())})
	if err != nil {
		return nil, nil, err
	}
	v := &studio.ProjectVideo{ProjectID: projectID, VideoSHA256: blob.SHA256, FileName: up.Name,
		DurationMs: blob.DurationMs, Width: info.Width, Height: info.Height, UploadedBy: &userID}
	if info.FrameRateNum > 0 {
		v.FrameRateNum, v.FrameRateDen = &info.FrameRateNum, &info.FrameRateDen
	}
	return src, v, nil
}

// checkProxySpace refuses a transcoding of d of video that would leave less than
// MinFreeBytes free on the disk of dir.
func (l *Library) checkProxySpace(dir string, d time.Duration) error {
	free, err := freeBytes(dir)
	if err != nil {
		return err
	}
	need := int64(d.Seconds()+1) * proxyBytesPerSecond
	if lim := l.Limits.withDefaults(); free-need < lim.MinFreeBytes {
		return i18n.Errorf(audio.ErrNoSpace, "upload.no_space", need>>20, free>>20, lim.MinFreeBytes>>20)
	}
	return nil
}

// ProgressFunc is told how far a long piece of work is, in percent.
type ProgressFunc func(percent int)

// MakeProxy transcodes the video blob videoSHA into its browser-ready proxy and
// stores it as a blob: H.264 (yuv420p, at most opts.Height high) and AAC (48 kHz
// stereo) in an MP4 with its index first (+faststart, so playback starts before the
// whole file is read) and a keyframe every second (so a seek decodes little).
// progress is called as ffmpeg reports its position (ffmpeg -progress). A blob that
// is not a video gives an error that unwraps to ErrNotVideo; a disk too full, one
// that unwraps to audio.ErrNoSpace, before anything is written.
func (l *Library) MakeProxy(ctx context.Context, videoSHA string, opts ProxyOpts, progress ProgressFunc) (*studio.Blob, error) {
	in, err := l.blobs.Path(videoSHA)
	if err != nil {
		return nil, err
	}
	info, err := ProbeVideo(ctx, in)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(l.blobs.Dir, perm.Dir); err != nil {
		return nil, err
	}
	if err := l.checkProxySpace(l.blobs.Dir, info.Duration); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(l.blobs.Dir, ".proxy-*.mp4")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp) // gone already once stored
	if err := transcodeProxy(ctx, in, tmp, info.Duration, opts.withDefaults(), progress); err != nil {
		return nil, err
	}
	return l.store.PutBlob(ctx, l.blobs, tmp, studio.Blob{Format: "mp4", DurationMs: int(info.Duration.Milliseconds()),
		SampleRate: audio.DefaultSampleRate, Channels: 2})
}

// ProxyArgs are ffmpeg's arguments that make the proxy of in at out.
func ProxyArgs(in, out string, opts ProxyOpts) []string {
	opts = opts.withDefaults()
	args := []string{"-hide_banner", "-nostdin", "-v", "error", "-y", "-i", "file:" + in,
		"-map", "0:v:0", "-map", "0:a:0?", "-sn", "-dn",
		// An even height (yuv420p needs one), no larger than the source's.
		"-vf", "scale=-2:'2*trunc(min(" + strconv.Itoa(opts.Height) + ",ih)/2)',format=yuv420p",
		"-c:v", "libx264", "-preset", "veryfast", "-crf", strconv.Itoa(opts.CRF), "-profile:v", "main",
		"-force_key_frames", "expr:gte(t,n_forced*" + strconv.Itoa(proxyKeyframeSeconds) + ")",
		"-c:a", "aac", "-b:a", proxyAudioBitrate, "-ac", "2", "-ar", strconv.Itoa(audio.DefaultSampleRate),
		"-movflags", "+faststart"}
	if opts.Threads > 0 {
		args = append(args, "-threads", strconv.Itoa(opts.Threads))
	}
	return append(args, "-progress", "pipe:1", "-nostats", "-f", "mp4", "file:"+out)
}

// transcodeProxy runs ffmpeg, reading its -progress output for progress as it comes.
func transcodeProxy(ctx context.Context, in, out string, total time.Duration, opts ProxyOpts, progress ProgressFunc) error {
	stderr, err := audio.RunFFmpeg(ctx, ProxyArgs(in, out, opts), nil, progressWriter(total, progress))
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("proxy transcoding interrupted: %w", ctx.Err())
		}
		if strings.Contains(stderr, "No space left") {
			return fmt.Errorf("%w: %s", audio.ErrNoSpace, stderr)
		}
		return fmt.Errorf("error transcoding the proxy: %w", err)
	}
	return nil
}

// progressWriter reads ffmpeg's -progress key=value lines, calling progress with
// each new whole percent of total reached (out_time_us).
func progressWriter(total time.Duration, progress ProgressFunc) *lineWriter {
	last := -1
	return &lineWriter{line: func(line string) {
		v, ok := strings.CutPrefix(line, "out_time_us=")
		if !ok || progress == nil || total <= 0 {
			return
		}
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil || us < 0 {
			return // "N/A" before the first frame
		}
		pct := int(min(100, time.Duration(us)*time.Microsecond*100/total))
		if pct > last {
			last = pct
			progress(pct)
		}
	}}
}
