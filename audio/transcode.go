package audio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"
)

// Export formats Transcode writes.
var encoders = map[string][]string{
	FormatWAV:  {"-c:a", "pcm_s16le", "-f", "wav"},
	FormatFLAC: {"-c:a", "flac", "-f", "flac"},
	FormatMP3:  {"-c:a", "libmp3lame", "-q:a", "2", "-f", "mp3"}, // VBR around 190 kbit/s
	FormatOGG:  {"-c:a", "libvorbis", "-q:a", "5", "-f", "ogg"},  // around 160 kbit/s
}

// TranscodeParams describes a conversion of the first audio stream of a file.
type TranscodeParams struct {
	InputPath  string
	OutputPath string
	// Format of the output: wav (16-bit PCM, the default), flac, mp3 or ogg (Vorbis).
	Format string
	// SampleRate of the output (default 48000).
	SampleRate int
	// Channels of the output: 0 keeps the source's, down-mixed to stereo when it has
	// more than two.
	Channels int
	// Probed is what Probe found of InputPath, when the caller has probed it already:
	// Transcode then does not probe it again. Nil: Transcode probes it.
	Probed *Info
}

// Transcode converts the first audio stream of p.InputPath (audio or video: the
// picture is dropped, and a sound that starts after it, Info.Start, is padded with
// silence so that it starts at the picture's first frame) into p.Format. An input
// that is not audio, or a video without a sound track, gives an error that unwraps
// to ErrNotAudio; the output appears only when complete, and a full disk gives an
// error that unwraps to ErrNoSpace.
// Output carries no encoder tags or metadata, so WAV and FLAC output is
// byte-reproducible.
func Transcode(ctx context.Context, p TranscodeParams) error {
	if p.Format == "" {
		p.Format = FormatWAV
	}
	enc, ok := encoders[p.Format]
	if !ok {
		return fmt.Errorf("%w: transcode to %q", ErrInvalid, p.Format)
	}
	if p.SampleRate == 0 {
		p.SampleRate = DefaultSampleRate
	}
	if p.SampleRate < 8000 || p.SampleRate > 192000 || p.Channels < 0 || p.Channels > 8 {
		return fmt.Errorf("%w: transcode to %d Hz, %d channels", ErrInvalid, p.SampleRate, p.Channels)
	}
	info := p.Probed
	if info == nil {
		probed, err := Probe(ctx, p.InputPath)
		if err != nil {
			return err
		}
		info = &probed
	}
	ch := p.Channels
	if ch == 0 {
		ch = min(info.Channels, 2)
	}
	output := []string{"-map", "0:a:0", "-vn", "-sn", "-dn"}
	if info.Start > 0 {
		// A sound that starts after the picture is padded with silence to the
		// picture's first frame: a file of samples has no timestamps, and ffmpeg
		// starts it at its first sample (or, given only the audio of an MPEG-TS,
		// moves that to 0 itself), so what is laid against the picture would be
		// early by the offset.
		pad := int64(math.Round(info.Start.Seconds() * float64(p.SampleRate)))
		output = append(output, "-af", fmt.Sprintf("aresample=%d,adelay=delays=%dS:all=1", p.SampleRate, pad))
	}
	output = append(output, "-ar", strconv.Itoa(p.SampleRate), "-ac", strconv.Itoa(ch))
	return ffmpegToFile(ctx, p.OutputPath, []string{"-i", p.InputPath}, append(output, enc...))
}

// ExtractAudio writes the sound track of a video (or the audio of an audio file) to
// outWav as 16-bit PCM WAV at 48 kHz, keeping the source's channels (at most two):
// the source audio a project is dubbed against.
func ExtractAudio(ctx context.Context, videoOrAudioPath, outWav string) error {
	return Transcode(ctx, TranscodeParams{InputPath: videoOrAudioPath, OutputPath: outWav})
}

// Segment cuts [start, end) of src's first audio stream into out: a 16-bit PCM WAV
// at 48 kHz with the source's channels (at most two) and exactly
// (end-start) × 48000 samples, padded with silence where src ends before end.
// src may be a video. Seeking is done before decoding, so cutting near the end of a
// long file is quick.
func Segment(ctx context.Context, src string, start, end time.Duration, out string) error {
	if start < 0 || end <= start {
		return fmt.Errorf("%w: segment %v-%v", ErrInvalid, start, end)
	}
	info, err := Probe(ctx, src)
	if err != nil {
		return err
	}
	if info.Duration > 0 && start >= info.Duration {
		return fmt.Errorf("%w: segment starts at %v, after the end of %s (%v)", ErrInvalid, start, src, info.Duration)
	}
	n := strconv.FormatInt(int64((end-start)*DefaultSampleRate/time.Second), 10)
	return ffmpegToFile(ctx, out, []string{"-ss", seconds(start), "-i", src}, append([]string{
		"-map", "0:a:0", "-vn", "-sn", "-dn",
		// Timestamps restart at 0 after the seek: keep exactly n samples, padding a
		// source that ends early.
		"-af", "aresample=" + strconv.Itoa(DefaultSampleRate) + ",atrim=end_sample=" + n + ",apad=whole_len=" + n,
		"-ac", strconv.Itoa(min(info.Channels, 2)),
	}, encoders[FormatWAV]...))
}

// PictureOnly copies the first video stream of the MP4 at in to an MP4 at out,
// without its sound track (no re-encoding; the index first). A media element
// playing a file with a sound track, even muted, keeps time by its audio output,
// whose clock stands still for the output's latency after each start; without one
// it keeps time by the wall clock and starts at once, so the dub can be started
// ahead and the picture joined to it (docs/picture.md).
func PictureOnly(ctx context.Context, in, out string) error {
	return ffmpegToFile(ctx, out, []string{"-i", in}, []string{
		"-map", "0:v:0", "-an", "-sn", "-dn", "-c:v", "copy", "-movflags", "+faststart", "-f", "mp4"})
}

// ffmpegToFile runs ffmpeg with input args (in which the value after each "-i" is
// one of our paths) and output args, writing to a temporary file next to path that
// is renamed to path only when ffmpeg succeeds.
func ffmpegToFile(ctx context.Context, path string, input, output []string) (err error) {
	args := []string{"-v", "error", "-nostdin", "-hide_banner"}
	for i := 0; i < len(input); i++ {
		args = append(args, input[i])
		if input[i] == "-i" && i+1 < len(input) {
			i++
			in, err := mediaArg(input[i])
			if err != nil {
				return err
			}
			args = append(args, in)
		}
	}
	f, err := createTemp(path)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	args = append(args, output...)
	args = append(args, "-map_metadata", "-1", "-fflags", "+bitexact", "-flags:a", "+bitexact", "-y", "file:"+tmp)
	stderr, err := runTool(ctx, ffmpegBin, args, nil, nil)
	if err != nil {
		var te *toolError
		if errors.As(err, &te) && noSpace(nil, stderr) {
			return writeError(path, err, stderr)
		}
		return fmt.Errorf("error writing %s: %w", path, err)
	}
	// ffmpeg wrote through its own descriptor; ours is still at 0 and only syncs.
	return commitTemp(f, path)
}
