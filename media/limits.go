package media

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"dubstudio/audio"
	"dubstudio/i18n"
	"dubstudio/studio"
)

// Defaults of Limits, matching the settings REFERENCE_MIN_SECONDS,
// REFERENCE_MAX_SECONDS, SOURCE_MAX_SECONDS and MIN_FREE_MB.
const (
	DefaultReferenceMinMs = 3_000
	DefaultReferenceMaxMs = 30_000
	DefaultSourceMaxMs    = 4 * 3600_000
	DefaultMinFreeBytes   = 1 << 30
	// referenceMinSoundMs is how much of a reference must be sound, not silence.
	referenceMinSoundMs = 1_000
	// silenceLevel is the level under which a reference counts as silent.
	silenceLevel = "-45dB"
)

// Limits bound what an upload may be, beyond its size. Zero fields take the defaults.
type Limits struct {
	// ReferenceMinMs and ReferenceMaxMs bound a reference voice's (and an emotion
	// reference's) length: a shorter one clones badly, and IndexTTS only uses the
	// first 15 s of a longer one.
	ReferenceMinMs, ReferenceMaxMs int
	// SourceMaxMs bounds a project's source: its extracted 48 kHz WAV grows with the
	// length, not with the upload's size (two hours of Opus silence were 1.4 GB).
	SourceMaxMs int
	// MinFreeBytes is the free space the data directory must keep after an
	// extraction; one that would leave less is refused before it starts.
	MinFreeBytes int64
	// PeaksCacheEntries is how many takes' waveforms TakePeaks keeps in memory
	// (DefaultPeaksCache when zero).
	PeaksCacheEntries int
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReferenceMinMs, DefaultReferenceMinMs)
	def(&l.ReferenceMaxMs, DefaultReferenceMaxMs)
	def(&l.SourceMaxMs, DefaultSourceMaxMs)
	if l.MinFreeBytes <= 0 {
		l.MinFreeBytes = DefaultMinFreeBytes
	}
	return l
}

// seconds formats a length for a message ("2.5").
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }

// checkReferenceLength refuses a reference outside the limits, saying both.
func (l Limits) checkReferenceLength(d time.Duration) error {
	l = l.withDefaults()
	lo, hi := time.Duration(l.ReferenceMinMs)*time.Millisecond, time.Duration(l.ReferenceMaxMs)*time.Millisecond
	if d < lo || d > hi {
		return i18n.Errorf(studio.ErrInvalid, "upload.reference_length", seconds(d), seconds(lo), seconds(hi))
	}
	return nil
}

// freeBytes is the space left to unprivileged writers on the file system of dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("error reading the free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil //nolint:gosec // block counts fit int64
}

// soundDuration is how much of the recording at path is louder than silenceLevel,
// by ffmpeg's silencedetect, given its probed length total. The detections are read
// from ffmpeg's stdout (ametadata) as they come, whatever their number.
func soundDuration(ctx context.Context, path string, total time.Duration) (time.Duration, error) {
	silent := time.Duration(0)
	open := time.Duration(-1) // start of a silence not ended yet
	out := &lineWriter{line: func(line string) {
		if v, ok := field(line, "lavfi.silence_start="); ok {
			open = v
		} else if v, ok := field(line, "lavfi.silence_end="); ok && open >= 0 {
			silent += v - open
			open = -1
		}
	}}
	if _, err := audio.RunFFmpeg(ctx, []string{"-hide_banner", "-nostdin", "-v", "error", "-i", "file:" + path,
		"-af", "silencedetect=noise=" + silenceLevel + ":d=0.2,ametadata=mode=print:file=-", "-f", "null", "-"}, nil, out); err != nil {
		return 0, fmt.Errorf("error measuring the silence of %s: %w", path, err)
	}
	if open >= 0 && total > open {
		silent += total - open // a silence to the end is never ended
	}
	return max(0, total-silent), nil
}

// field reads the seconds after key at the start of an ffmpeg line.
func field(line, key string) (time.Duration, bool) {
	rest, ok := strings.CutPrefix(line, key)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(max(0, f) * float64(time.Second)), true
}
