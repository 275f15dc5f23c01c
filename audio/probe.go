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
// that tells the user what is wrong.
//
// Besides ffprobe's reading of the headers, Probe decodes the last half second (a
// seek, so cheap on long files) and, for WAV, compares the size the header declares
// with the file's size: a file cut short in an upload still has plausible headers.
func Probe(ctx context.Context, path string) (Info, error) {
	in, err := mediaArg(path)
	if err != nil {
		return Info{}, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return Info{}, fmt.Errorf("error probing %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return Info{}, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, path)
	}
	if st.Size() == 0 {
		return Info{}, userError(ErrNotAudio, nil, "audio.empty")
	}

	var out bytes.Buffer
	_, err = runTool(ctx, ffprobeBin, []string{
		"-v", "error", "-hide_banner", "-print_format", "json",
		"-show_format", "-show_streams", "-i", in,
	}, nil, &out)
	var te *toolError
	if errors.As(err, &te) {
		return Info{}, userError(ErrNotAudio, fmt.Errorf("error probing %s: %w", path, err), "audio.unreadable")
	}
	if err != nil {
		return Info{}, fmt.Errorf("error probing %s: %w", path, err)
	}
	info, err := parseProbe(out.Bytes())
	if err != nil {
		return Info{}, fmt.Errorf("error probing %s: %w", path, err)
	}
	if info.Format == FormatWAV {
		if err := checkWAVSize(path, st.Size()); err != nil {
			return Info{}, err
		}
	}
	if err := checkTail(ctx, in, info.Duration); err != nil {
		return Info{}, fmt.Errorf("error probing %s: %w", path, err)
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

type probeJSON struct {
	Streams []struct {
		CodecType  string `json:"codec_type"`
		CodecName  string `json:"codec_name"`
		SampleRate string `json:"sample_rate"`
		Channels   int    `json:"channels"`
		Duration   string `json:"duration"`
	} `json:"streams"`
	Format struct {
		FormatName string `json:"format_name"`
		Duration   string `json:"duration"`
	} `json:"format"`
}

// parseProbe turns ffprobe's JSON into Info for the first audio stream.
func parseProbe(data []byte) (Info, error) {
	var p probeJSON
	if err := json.Unmarshal(data, &p); err != nil {
		return Info{}, fmt.Errorf("error reading ffprobe output: %w", err)
	}
	for _, s := range p.Streams {
		if s.CodecType != "audio" {
			continue
		}
		rate, _ := strconv.Atoi(s.SampleRate)
		if s.CodecName == "" || s.CodecName == "none" || rate <= 0 || s.Channels <= 0 {
			return Info{}, userError(ErrNotAudio, fmt.Errorf("audio stream without a known codec (%q, %s Hz, %d channels)",
				s.CodecName, s.SampleRate, s.Channels), "audio.unreadable")
		}
		d := parseSeconds(s.Duration)
		if d == 0 {
			d = parseSeconds(p.Format.Duration)
		}
		return Info{Format: FormatName(p.Format.FormatName), Codec: s.CodecName, Duration: d, SampleRate: rate, Channels: s.Channels}, nil
	}
	if len(p.Streams) > 0 {
		return Info{}, userError(ErrNotAudio, fmt.Errorf("no audio stream in %s", p.Format.FormatName), "audio.no_sound")
	}
	return Info{}, userError(ErrNotAudio, errors.New("no streams"), "audio.unreadable")
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

// checkTail decodes the last tailCheck of the first audio stream (at a low rate: only
// the amount matters) and refuses the file when much less comes out than the headers
// promise.
func checkTail(ctx context.Context, in string, dur time.Duration) error {
	const rate = 8000
	tail := min(tailCheck, dur)
	want := int64(tail.Seconds() * rate)
	if want < 40 { // under 5 ms: nothing to check
		return nil
	}
	var got countWriter
	_, err := runTool(ctx, ffmpegBin, []string{
		"-v", "error", "-nostdin", "-hide_banner",
		"-ss", seconds(dur - tail), "-i", in,
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

// seconds formats d for ffmpeg's time options.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 6, 64)
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
