package audio

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Container formats, as Info.Format names them.
const (
	FormatWAV  = "wav"
	FormatMP3  = "mp3"
	FormatFLAC = "flac"
	FormatOGG  = "ogg"
)

// ReferenceFormats are the formats accepted for a character's reference audio.
var ReferenceFormats = []string{FormatWAV, FormatMP3, FormatFLAC, FormatOGG}

// Info is what probing found about a file's first audio stream.
type Info struct {
	// Format is the container as ffprobe recognised it from the content (never from
	// the file name): wav, mp3, flac, ogg, mp4, matroska, ...
	Format string
	// Codec is the audio codec: pcm_s16le, mp3, flac, vorbis, opus, aac, ...
	Codec      string
	Duration   time.Duration
	SampleRate int
	Channels   int
	// Start is how long after a video's first frame its sound starts (MPEG-TS, MXF
	// and remuxed files often start it late): what an extraction pads with silence
	// to keep the sound against the picture. 0 for audio files, and for a sound
	// that starts first (t=0 is then its own start, in ffmpeg as in players).
	Start time.Duration
}

// formatNames maps ffprobe's comma-separated demuxer names to one short name.
var formatNames = map[string]string{
	"mov,mp4,m4a,3gp,3g2,mj2": "mp4",
	"matroska,webm":           "matroska",
}

// FormatName shortens ffprobe's name of a container (its demuxer's names, "mov,mp4,
// m4a,3gp,3g2,mj2") as Info.Format names it ("mp4"); other names stay as they are.
func FormatName(demuxer string) string {
	if short, ok := formatNames[demuxer]; ok {
		return short
	}
	return demuxer
}

// tailCheck is how much of the end of a file Probe decodes to catch truncation.
const tailCheck = 500 * time.Millisecond

// Probe reads what path contains. Anything that is not decodable audio — an empty
// file, a text or image file whatever its name, a truncated file, a video without a
// sound track — gives an error that unwraps to ErrNotAudio and to an *i18n.Error
// that tells the user what is wrong. It is ProbeFile and then ProbeResult.Audio.
func Probe(ctx context.Context, path string) (Info, error) {
	r, err := ProbeFile(ctx, path)
	if err != nil {
		return Info{}, err
	}
	return r.Audio(ctx)
}

// ProbeResult is one ffprobe reading of a file's headers: its container and every
// stream. Audio judges it as sound; the media package reads a video's picture from
// the same reading, so an upload that may be either is read by ffprobe once.
type ProbeResult struct {
	Streams []ProbeStream `json:"streams"`
	Format  struct {
		// FormatName is ffprobe's name of the container (its demuxer's names,
		// "mov,mp4,m4a,3gp,3g2,mj2"), as the function FormatName takes it.
		FormatName string `json:"format_name"`
		// Duration is the container's length in seconds ("12.345000", or "N/A"),
		// from StartTime, where its earliest stream starts.
		Duration  string `json:"duration"`
		StartTime string `json:"start_time"`
	} `json:"format"`

	path, in string
	size     int64
	regular  bool
	// failed is ffprobe's error when it ran and could not read the file.
	failed *toolError
}

// ProbeStream is one stream of a ProbeResult, with the fields of ffprobe's
// -show_streams that are read of a sound track or a picture.
type ProbeStream struct {
	CodecType string `json:"codec_type"` // audio, video, subtitle, data
	CodecName string `json:"codec_name"`
	// Sound.
	SampleRate string `json:"sample_rate"`
	Channels   int    `json:"channels"`
	Duration   string `json:"duration"`
	// StartTime is when the stream starts, in seconds on the file's clock.
	StartTime string `json:"start_time"`
	Tags      struct {
		// Duration is Matroska's statistics tag (ffmpeg and mkvmerge write it):
		// when the stream ends, "00:00:08.000000000", on the file's clock. Matroska
		// has no Duration field per stream.
		Duration string `json:"DURATION"`
	} `json:"tags"`
	// Picture.
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	RFrameRate   string `json:"r_frame_rate"`
	AvgFrameRate string `json:"avg_frame_rate"`
	Disposition  struct {
		// AttachedPic is 1 for cover art (a still picture in an audio file).
		AttachedPic int `json:"attached_pic"`
	} `json:"disposition"`
}

// ProbeFile runs ffprobe on path once. What the file holds is judged by the reader
// of the result, not here: a file ffprobe cannot read (an empty one, one that is not
// a regular file, one that is not media) gives a result whose Unreadable says why,
// and no error. Errors are for a name that could be read as an option, a file gone
// and ffprobe not running.
func ProbeFile(ctx context.Context, path string) (*ProbeResult, error) {
	in, err := mediaArg(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("error probing %s: %w", path, err)
	}
	r := &ProbeResult{path: path, in: in, size: st.Size(), regular: st.Mode().IsRegular()}
	if !r.regular || r.size == 0 {
		return r, nil // nothing for ffprobe to read (and a FIFO would block it)
	}
	var out bytes.Buffer
	_, err = runTool(ctx, ffprobeBin, []string{
		"-v", "error", "-hide_banner", "-print_format", "json",
		"-show_format", "-show_streams", "-i", in,
	}, nil, &out)
	if errors.As(err, &r.failed) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error probing %s: %w", path, err)
	}
	if err := json.Unmarshal(out.Bytes(), r); err != nil {
		return nil, fmt.Errorf("error probing %s: error reading ffprobe output: %w", path, err)
	}
	return r, nil
}

// Unreadable says why ffprobe could not read the file (its own complaint, or that
// the file is empty or not a regular file); empty when it read it.
func (r *ProbeResult) Unreadable() string {
	switch {
	case !r.regular:
		return "not a regular file"
	case r.size == 0:
		return "an empty file"
	case r.failed != nil:
		return r.failed.Stderr
	}
	return ""
}

// Audio is the reading's first audio stream, checked as Probe checks it: an error
// that unwraps to ErrNotAudio (and an *i18n.Error) for what is not decodable audio.
//
// Besides ffprobe's reading of the headers, Audio decodes the last half second (a
// seek, so cheap on long files) and, for WAV, compares the size the header declares
// with the file's size: a file cut short in an upload still has plausible headers.
func (r *ProbeResult) Audio(ctx context.Context) (Info, error) {
	switch {
	case !r.regular:
		return Info{}, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, r.path)
	case r.size == 0:
		return Info{}, userError(ErrNotAudio, nil, "audio.empty")
	case r.failed != nil:
		return Info{}, userError(ErrNotAudio, fmt.Errorf("error probing %s: %w", r.path, r.failed), "audio.unreadable")
	}
	info, end, err := r.firstAudio()
	if err != nil {
		return Info{}, fmt.Errorf("error probing %s: %w", r.path, err)
	}
	if info.Format == FormatWAV {
		if err := checkWAVSize(r.path, r.size); err != nil {
			return Info{}, err
		}
	}
	// Without the sound's own end, its tail cannot be found: a sound that ends
	// before the picture is not truncated. The file's end is checked instead.
	if end > 0 {
		err = checkTail(ctx, r.in, end, info.Duration)
	} else {
		err = r.checkFileTail(ctx)
	}
	if err != nil {
		return Info{}, fmt.Errorf("error probing %s: %w", r.path, err)
	}
	return info, nil
}

// ProbeReference probes path and checks that it is in one of ReferenceFormats.
func ProbeReference(ctx context.Context, path string) (Info, error) {
	info, err := Probe(ctx, path)
	if err != nil {
		return Info{}, err
	}
	if err := CheckFormat(info, ReferenceFormats); err != nil {
		return Info{}, err
	}
	if info.Duration <= 0 {
		// Headers and no samples: nothing to clone a voice from.
		return Info{}, userError(ErrNotAudio, nil, "audio.no_sound")
	}
	return info, nil
}

// CheckFormat returns nil when info's probed format is one of allowed, and otherwise
// an error that unwraps to ErrFormat (and to a user message naming the formats).
func CheckFormat(info Info, allowed []string) error {
	if slices.Contains(allowed, info.Format) {
		return nil
	}
	names := make([]string, len(allowed))
	for i, f := range allowed {
		names[i] = strings.ToUpper(f)
	}
	return userError(ErrFormat, nil, "audio.format_not_allowed",
		strings.ToUpper(info.Format), strings.Join(names, ", "))
}

// firstAudio is Info for the reading's first audio stream, and where that stream
// ends from the file's start (as ffmpeg's -ss counts), 0 when only the
// container's duration is known.
func (r *ProbeResult) firstAudio() (Info, time.Duration, error) {
	for _, s := range r.Streams {
		if s.CodecType != "audio" {
			continue
		}
		rate, _ := strconv.Atoi(s.SampleRate)
		if s.CodecName == "" || s.CodecName == "none" || rate <= 0 || s.Channels <= 0 {
			return Info{}, 0, userError(ErrNotAudio, fmt.Errorf("audio stream without a known codec (%q, %s Hz, %d channels)",
				s.CodecName, s.SampleRate, s.Channels), "audio.unreadable")
		}
		start, _ := parseTime(s.StartTime)
		fileStart, _ := parseTime(r.Format.StartTime)
		d := parseSeconds(s.Duration)
		if tagEnd := parseClock(s.Tags.Duration); d == 0 && tagEnd > start {
			d = tagEnd - start
		}
		var end time.Duration
		if d > 0 {
			end = start - fileStart + d
		} else {
			d = parseSeconds(r.Format.Duration) // the picture's, as like as not
		}
		info := Info{Format: FormatName(r.Format.FormatName), Codec: s.CodecName, Duration: d, SampleRate: rate, Channels: s.Channels}
		if picture, ok := r.pictureStart(); ok && start > picture {
			info.Start = start - picture
		}
		return info, end, nil
	}
	if len(r.Streams) > 0 {
		return Info{}, 0, userError(ErrNotAudio, fmt.Errorf("no audio stream in %s", r.Format.FormatName), "audio.no_sound")
	}
	return Info{}, 0, userError(ErrNotAudio, errors.New("no streams"), "audio.unreadable")
}

// pictureStart is when the reading's first video stream starts, cover art left out
// (an MP3's picture is no time line).
func (r *ProbeResult) pictureStart() (time.Duration, bool) {
	for _, s := range r.Streams {
		if s.CodecType == "video" && s.Disposition.AttachedPic == 0 {
			return parseTime(s.StartTime)
		}
	}
	return 0, false
}

// parseTime reads ffprobe's "-0.021333" (a start may be before 0); ok is false for
// "N/A" and garbage.
func parseTime(s string) (d time.Duration, ok bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return time.Duration(math.Round(f * float64(time.Second))), true
}

// parseClock reads Matroska's "00:00:08.000000000"; anything else gives 0.
func parseClock(s string) time.Duration {
	var h, m int
	var sec float64
	if n, err := fmt.Sscanf(s, "%d:%d:%f", &h, &m, &sec); n != 3 || err != nil || h < 0 || m < 0 || sec < 0 {
		return 0
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(math.Round(sec*float64(time.Second)))
}

// parseSeconds reads ffprobe's "12.345000"; "N/A" and garbage give 0.
func parseSeconds(s string) time.Duration {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0
	}
	return time.Duration(math.Round(f * float64(time.Second)))
}

// checkWAVSize refuses a RIFF WAVE file whose data chunk is declared longer than what
// the file holds. A size of 0 or 0xFFFFFFFF (written by streaming encoders) and RF64
// files are not checked.
func checkWAVSize(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("error probing %s: %w", path, err)
	}
	defer f.Close()
	var hdr [12]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil || string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return nil // RF64 or something ffprobe reads differently: leave it to the tail check
	}
	pos := int64(12)
	for {
		var ch [8]byte
		if _, err := io.ReadFull(f, ch[:]); err != nil {
			return nil
		}
		pos += 8
		n := int64(binary.LittleEndian.Uint32(ch[4:]))
		if string(ch[0:4]) == "data" {
			if n == 0 || n == math.MaxUint32 || pos+n <= size {
				return nil
			}
			return userError(ErrNotAudio, fmt.Errorf("%s: WAV data chunk declares %d bytes, file holds %d",
				path, n, size-pos), "audio.truncated")
		}
		pos += n + n&1 // chunks are padded to an even size
		if _, err := f.Seek(pos, io.SeekStart); err != nil {
			return nil
		}
	}
}

// checkTail decodes the last tailCheck of the first audio stream, which lasts dur
// and ends at end from the file's start (at a low rate: only the amount matters),
// and refuses the file when much less comes out than the headers promise.
func checkTail(ctx context.Context, in string, end, dur time.Duration) error {
	const rate = 8000
	tail := min(tailCheck, dur)
	want := int64(tail.Seconds() * rate)
	if want < 40 { // under 5 ms: nothing to check
		return nil
	}
	var got countWriter
	_, err := runTool(ctx, ffmpegBin, []string{
		"-v", "error", "-nostdin", "-hide_banner",
		"-ss", seconds(end - tail), "-i", in,
		"-map", "0:a:0", "-ac", "1", "-ar", strconv.Itoa(rate), "-f", "s16le", "pipe:1",
	}, nil, &got)
	var te *toolError
	if err != nil && !errors.As(err, &te) {
		return err
	}
	if got.n/2 < want/4 {
		cause := fmt.Errorf("decoded %d of %d samples at the end", got.n/2, want)
		if err != nil {
			cause = fmt.Errorf("%w (%w)", cause, err)
		}
		return userError(ErrNotAudio, cause, "audio.truncated")
	}
	return nil
}

// checkFileTail is checkTail for a file whose sound has no length of its own, only
// the container's (a Matroska file without DURATION tags): the sound may end
// before the picture, so it reads the packets of every stream in the last
// tailCheck of the container (ffprobe, no decoding) and refuses the file when they
// cover less than a quarter of it, as checkTail does with samples.
func (r *ProbeResult) checkFileTail(ctx context.Context) error {
	dur := parseSeconds(r.Format.Duration)
	fileStart, _ := parseTime(r.Format.StartTime)
	if dur < 5*time.Millisecond {
		return nil // no length to check, or nothing to check
	}
	tail := min(tailCheck, dur)
	from, end := fileStart+dur-tail, fileStart+dur // ffprobe's intervals are on the file's clock
	var out bytes.Buffer
	_, err := runTool(ctx, ffprobeBin, []string{
		"-v", "error", "-hide_banner", "-read_intervals", seconds(from) + "%",
		"-show_entries", "packet=pts_time,duration_time", "-of", "csv=p=0", "-i", r.in,
	}, nil, &out)
	var te *toolError
	if err != nil && !errors.As(err, &te) {
		return err
	}
	last := time.Duration(math.MinInt64)
	for line := range strings.Lines(out.String()) {
		pts, length, _ := strings.Cut(strings.TrimSpace(line), ",")
		if t, ok := parseTime(pts); ok {
			d, _ := parseTime(length)
			last = max(last, t+d)
		}
	}
	if last < from+tail/4 {
		cause := fmt.Errorf("the last packet ends at %v, the file at %v", max(last, 0), end)
		if err != nil {
			cause = fmt.Errorf("%w (%w)", cause, err)
		}
		return userError(ErrNotAudio, cause, "audio.truncated")
	}
	return nil
}

// seconds formats d for ffmpeg's time options.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 6, 64)
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
