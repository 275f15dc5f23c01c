package audio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAssembleBroadcastWAV24BitStereo assembles a 24-bit dual-mono mix with a bext
// time reference and reads it back: the chunk with our reader and ffprobe, and the
// samples (the 16-bit clip scaled by 256, the same in both channels) from the bytes.
func TestAssembleBroadcastWAV24BitStereo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clip := writeClip(t, dir, "c.wav", 3000, func(i int) int16 { return int16(i%200 - 100) })
	out := filepath.Join(dir, "mix.wav")
	ref := int64(3600 * 48000) // 01:00:00:00
	const frames = 100_000
	require.NoError(t, assemble(ctxT(t), AssembleParams{OutputPath: out, Channels: 2, BitDepth: 24, Samples: frames,
		TimeReference: &ref, Clips: []Clip{{Path: clip, Offset: 70_000}}}))

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	got, ok, err := ReadTimeReference(bytes.NewReader(b))
	require.NoError(t, err)
	require.True(t, ok, "the file has a bext chunk")
	require.Equal(t, ref, got)

	header := 44 + 8 + bextSize
	require.Len(t, b, header+frames*2*3, "24-bit stereo data after the header")
	require.Equal(t, "data", string(b[header-8:header-4]))
	sample := func(frame, ch int) int32 {
		i := header + (frame*2+ch)*3
		v := int32(b[i]) | int32(b[i+1])<<8 | int32(int8(b[i+2]))<<16
		return v
	}
	for k := range 3000 {
		want := int32(k%200-100) * 256
		require.Equal(t, want, sample(70_000+k, 0), "frame %d left", k)
		require.Equal(t, want, sample(70_000+k, 1), "frame %d right", k)
	}
	require.Zero(t, sample(69_999, 0))
	require.Zero(t, sample(frames-1, 1), "silence to the end")

	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Skip("no ffprobe")
	}
	outJSON, err := exec.CommandContext(ctxT(t), "ffprobe", "-v", "error", "-show_entries",
		"stream=sample_rate,channels,bits_per_sample,duration_ts:format_tags=time_reference", "-of", "json", out).Output()
	require.NoError(t, err)
	var probe struct {
		Streams []struct {
			SampleRate    string `json:"sample_rate"`
			Channels      int    `json:"channels"`
			BitsPerSample int    `json:"bits_per_sample"`
			DurationTS    int64  `json:"duration_ts"`
		} `json:"streams"`
		Format struct {
			Tags map[string]string `json:"tags"`
		} `json:"format"`
	}
	require.NoError(t, json.Unmarshal(outJSON, &probe), string(outJSON))
	require.Len(t, probe.Streams, 1)
	require.Equal(t, "48000", probe.Streams[0].SampleRate)
	require.Equal(t, 2, probe.Streams[0].Channels)
	require.Equal(t, 24, probe.Streams[0].BitsPerSample)
	require.EqualValues(t, frames, probe.Streams[0].DurationTS)
	require.Equal(t, strconv.FormatInt(ref, 10), probe.Format.Tags["time_reference"], "ffprobe reads the time reference")
}

// TestWAVHeaderWithoutBextIsCanonical: without a time reference the header stays the
// 44 bytes every reader expects, and a bad format is refused.
func TestWAVHeaderWithoutBextIsCanonical(t *testing.T) {
	t.Parallel()
	h, err := WAVHeader(WAVFormat{SampleRate: 48000, Channels: 1}, 10)
	require.NoError(t, err)
	require.Len(t, h, 44)
	require.EqualValues(t, 16, binary.LittleEndian.Uint16(h[34:]))
	_, ok, err := ReadTimeReference(bytes.NewReader(append(h, make([]byte, 20)...)))
	require.NoError(t, err)
	require.False(t, ok)
	_, err = WAVHeader(WAVFormat{SampleRate: 48000, Channels: 1, BitDepth: 20}, 10)
	require.ErrorIs(t, err, ErrInvalid)
	neg := int64(-1)
	_, err = WAVHeader(WAVFormat{SampleRate: 48000, Channels: 1, TimeReference: &neg}, 10)
	require.ErrorIs(t, err, ErrInvalid)
}
