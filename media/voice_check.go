package media

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
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
	// checkSampleRate and checkSeconds: the voice is decoded to 16 kHz mono, its first
	// 30 s (the longest reference accepted).
	checkSampleRate = 16000
	checkSeconds    = 30
)

// VoiceCheck is what CheckVoice measured of a reference voice.
type VoiceCheck struct {
	// ClippedFraction is the share of samples at full scale.
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

// CheckVoice decodes a reference voice (its first 30 s, 16 kHz mono, through
// ffmpeg) and measures its clipping and its noise floor.
func CheckVoice(ctx context.Context, path string) (VoiceCheck, error) {
	m := &levelMeter{frame: make([]byte, 0, 2*checkSampleRate*voiceFrameMs/1000)}
	if _, err := audio.RunFFmpeg(ctx, []string{"-hide_banner", "-nostdin", "-v", "error", "-i", "file:" + path,
		"-t", strconv.Itoa(checkSeconds), "-ac", "1", "-ar", strconv.Itoa(checkSampleRate), "-f", "s16le", "-"}, nil, m); err != nil {
		return VoiceCheck{}, fmt.Errorf("error checking the voice: %w", err)
	}
	levels := m.levels // a last partial frame is left out
	if len(levels) == 0 {
		return VoiceCheck{NoiseFloorDB: -120, SpeechDB: -120}, nil
	}
	sort.Float64s(levels)
	tenth := max(1, len(levels)/10)
	return VoiceCheck{ClippedFraction: float64(m.clipped) / float64(m.total),
		NoiseFloorDB: mean(levels[:tenth]), SpeechDB: mean(levels[len(levels)-tenth:])}, nil
}

// levelMeter reads 16-bit little-endian mono samples as ffmpeg writes them, one
// frame (cap(frame) bytes) at a time: each frame's level, and the samples clipped.
type levelMeter struct {
	frame          []byte // the frame being filled
	levels         []float64
	clipped, total int
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
			if s >= clipLevel || s <= -clipLevel {
				m.clipped++
			}
		}
		samples := len(m.frame) / 2
		m.total += samples
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
