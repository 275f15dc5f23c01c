package media

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"dubstudio/audio"
	"dubstudio/studio"
)

// What CheckVoice warns about. A reference voice too short or silent is refused
// before (Limits, soundDuration); these make a worse clone, not an impossible one,
// so the voice is kept and the character's card says what was found.
const (
	// clipLevel is a sample at or above 99.9 % of full scale; clipFraction is the
	// share of such samples (of the sound, not the silence) that counts as clipped.
	clipLevel    = 32735
	clipFraction = 0.001
	// voiceFrameMs is the frame the levels are measured over.
	voiceFrameMs = 20
	// noiseFloorDB: the quietest tenth of the frames (the pauses between words, where
	// only the room and the microphone are heard) louder than this is noisy;
	// minSNRDB: the loudest tenth under this many dB above them too (a voice that
	// hardly rises over its noise, or noise alone).
	noiseFloorDB = -50.0
	minSNRDB     = 20.0
	// checkSampleRate and checkSeconds: the voice's levels are measured at 16 kHz
	// mono, over its first 30 s (the longest reference accepted).
	checkSampleRate = 16000
	checkSeconds    = 30
)

// VoiceCheck is what CheckVoice measured of a reference voice.
type VoiceCheck struct {
	// ClippedFraction is the share of samples at full scale, in the channel that
	// has most of them.
	ClippedFraction float64
	// NoiseFloorDB is the mean level of the quietest tenth of the 20 ms frames, and
	// SpeechDB that of the loudest tenth, in dBFS (-120 for digital silence).
	NoiseFloorDB, SpeechDB float64
}

// Warnings are what the check found that makes a bad clone, for the character card.
// More than one speaker is not among them: telling speakers apart needs a speaker
// embedding model, which the CPU path has not, and the simple measures (pitch, level)
// change as much within one expressive speaker as between two (docs/limits.md).
func (v VoiceCheck) Warnings() []studio.VoiceWarning {
	var w []studio.VoiceWarning
	if v.ClippedFraction >= clipFraction {
		w = append(w, studio.VoiceWarning{Key: "voice.clipped", Args: []string{strconv.FormatFloat(100*v.ClippedFraction, 'f', 1, 64)}})
	}
	if v.NoiseFloorDB > noiseFloorDB || v.SpeechDB-v.NoiseFloorDB < minSNRDB {
		w = append(w, studio.VoiceWarning{Key: "voice.noisy", Args: []string{
			strconv.FormatFloat(v.NoiseFloorDB, 'f', 0, 64), strconv.FormatFloat(v.SpeechDB-v.NoiseFloorDB, 'f', 0, 64)}})
	}
	return w
}

// CheckVoice decodes a reference voice (its first 30 s, through ffmpeg) and
// measures its clipping and its noise floor. The levels are measured at 16 kHz
// mono; the clipping at the file's own rate with its own channels, since a
// channel that clips averaged with a clean one, or resampled, no longer reaches
// full scale.
func CheckVoice(ctx context.Context, path string) (VoiceCheck, error) {
	clipped, err := clippedFraction(ctx, path)
	if err != nil {
		return VoiceCheck{}, err
	}
	m := &levelMeter{frame: make([]byte, 0, 2*checkSampleRate*voiceFrameMs/1000)}
	if _, err := audio.RunFFmpeg(ctx, []string{"-hide_banner", "-nostdin", "-v", "error", "-i", "file:" + path,
		"-t", strconv.Itoa(checkSeconds), "-ac", "1", "-ar", strconv.Itoa(checkSampleRate), "-f", "s16le", "-"}, nil, m); err != nil {
		return VoiceCheck{}, fmt.Errorf("error checking the voice: %w", err)
	}
	levels := m.levels // a last partial frame is left out
	if len(levels) == 0 {
		return VoiceCheck{ClippedFraction: clipped, NoiseFloorDB: -120, SpeechDB: -120}, nil
	}
	sort.Float64s(levels)
	tenth := max(1, len(levels)/10)
	return VoiceCheck{ClippedFraction: clipped,
		NoiseFloorDB: mean(levels[:tenth]), SpeechDB: mean(levels[len(levels)-tenth:])}, nil
}

// clippedFraction decodes the first checkSeconds of path's first audio stream as it
// is (its rate, its channels) and returns the share of clipped samples in the
// channel that has most.
func clippedFraction(ctx context.Context, path string) (float64, error) {
	info, err := audio.Probe(ctx, path)
	if err != nil {
		return 0, fmt.Errorf("error checking the voice: %w", err)
	}
	c := &clipCounter{clipped: make([]int, max(1, info.Channels))}
	if _, err := audio.RunFFmpeg(ctx, []string{"-hide_banner", "-nostdin", "-v", "error", "-i", "file:" + path,
		"-map", "0:a:0", "-t", strconv.Itoa(checkSeconds), "-f", "s16le", "-"}, nil, c); err != nil {
		return 0, fmt.Errorf("error checking the voice: %w", err)
	}
	frames := c.samples / len(c.clipped)
	if frames == 0 {
		return 0, nil
	}
	return float64(slices.Max(c.clipped)) / float64(frames), nil
}

// clipCounter reads interleaved 16-bit little-endian samples as ffmpeg writes them
// and counts, per channel, those at or past clipLevel.
type clipCounter struct {
	clipped []int // per channel
	samples int   // read, of all channels
	half    []byte
}

func (c *clipCounter) Write(p []byte) (int, error) {
	n := len(p)
	if len(c.half) == 1 && len(p) > 0 { // a sample split between two writes
		c.count(int16(uint16(c.half[0]) | uint16(p[0])<<8)) //nolint:gosec // the sample's bits
		c.half, p = c.half[:0], p[1:]
	}
	for ; len(p) >= 2; p = p[2:] {
		c.count(int16(binary.LittleEndian.Uint16(p))) //nolint:gosec // the sample's bits, as ffmpeg wrote them
	}
	if len(p) == 1 {
		c.half = append(c.half[:0], p[0])
	}
	return n, nil
}

func (c *clipCounter) count(s int16) {
	if s >= clipLevel || s <= -clipLevel {
		c.clipped[c.samples%len(c.clipped)]++
	}
	c.samples++
}

// levelMeter reads 16-bit little-endian mono samples as ffmpeg writes them, one
// frame (cap(frame) bytes) at a time: each frame's level.
type levelMeter struct {
	frame  []byte // the frame being filled
	levels []float64
}

func (m *levelMeter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(m.frame)-len(m.frame))
		m.frame, p = append(m.frame, p[:k]...), p[k:]
		if len(m.frame) < cap(m.frame) {
			break
		}
		var sum float64
		for i := 0; i < len(m.frame); i += 2 {
			s := int16(binary.LittleEndian.Uint16(m.frame[i:])) //nolint:gosec // the sample's bits, as ffmpeg wrote them
			x := float64(s)
			sum += x * x
		}
		samples := len(m.frame) / 2
		m.levels = append(m.levels, dbfs(math.Sqrt(sum/float64(samples))))
		m.frame = m.frame[:0]
	}
	return n, nil
}

// dbfs is an RMS of 16-bit samples in dB of full scale, -120 for silence.
func dbfs(rms float64) float64 {
	if rms < 1e-3 {
		return -120
	}
	return max(-120, 20*math.Log10(rms/32768))
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
