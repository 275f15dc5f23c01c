package studio_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/script"
)

// TestExportTimecodes: a start timecode becomes the Broadcast WAV time reference in
// samples since midnight, exact to the frame; malformed ones are refused.
func TestExportTimecodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tc   string
		fps  script.FPS
		want int64
	}{
		{"00:00:00:00", script.FPS25, 0},
		{"01:00:00:00", script.FPS25, 3600 * 48000},
		{"10:00:00:00", script.FPS30, 36000 * 48000},
		{"00:00:01:12", script.FPS25, 48000 + 12*1920},
		{"00:00:00:23", script.FPS24, 23 * 2000},
		{"23:59:59:29", script.FPS30, (86399)*48000 + 29*1600},
		// Frames of 1001/24000 s and 1001/30000 s, the samples rounded down.
		{"00:00:00:23", script.FPS23976, 23 * 2002},
		{"00:00:01:00", script.FPS2997, 48048},
		{"00:00:00:01", script.FPS2997, 1601},
		// Drop-frame skips two labels a minute but each tenth: an hour is 107 892 frames.
		{"01:00:00;00", script.FPS2997, 107892 * 48000 * 1001 / 30000},
		{"00:01:00;02", script.FPS2997, 1800 * 48000 * 1001 / 30000},
		{"00:10:00;00", script.FPS2997, 17982 * 48000 * 1001 / 30000},
		{"00:00:00:59", script.FPS60, 59 * 800},
	} {
		got, err := studio.TimecodeSamples(c.tc, c.fps, 48000)
		require.NoError(t, err, c.tc)
		require.Equal(t, c.want, got, c.tc)
	}
	for _, bad := range []string{"", "1:00:00:00", "01:00:00", "01:60:00:00", "24:00:00:00", "00:00:00:25", "00:00:00:-1", "aa:bb:cc:dd", "01:00:00:00x"} {
		_, err := studio.TimecodeSamples(bad, script.FPS25, 48000)
		require.ErrorIs(t, err, studio.ErrInvalid, "%q", bad)
	}
	for _, bad := range []string{"00:00:00;30", "00:00:00:30", "00:01:00;01", "100:00:00;00", "24:00:00;00"} {
		_, err := studio.TimecodeSamples(bad, script.FPS2997, 48000)
		require.ErrorIs(t, err, studio.ErrInvalid, "%q", bad)
	}
	_, err := studio.TimecodeSamples("00:00:00;10", script.FPS25, 48000)
	require.ErrorContains(t, err, "drop-frame")
}

// TestExportOptionsDefaults: the zero options are a 16-bit mono export from
// 00:00:00:00 at 25 fps; other bit depths and frame rates are refused.
func TestExportOptionsDefaults(t *testing.T) {
	t.Parallel()
	var o studio.ExportOptions
	require.NoError(t, o.Normalize())
	require.Equal(t, studio.ExportOptions{BitDepth: 16, FPS: script.FPS25, StartTimecode: "00:00:00:00"}, o)
	for _, bad := range []studio.ExportOptions{{BitDepth: 8}, {BitDepth: 32}, {FPS: "29"}, {FPS: "29.970"}, {StartTimecode: "99:00:00:00"}} {
		require.ErrorIs(t, bad.Normalize(), studio.ErrInvalid, "%+v", bad)
	}
}
