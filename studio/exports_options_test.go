package studio_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestExportTimecodes: a start timecode becomes the Broadcast WAV time reference in
// samples since midnight, exact to the frame; malformed ones are refused.
func TestExportTimecodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tc   string
		fps  int
		want int64
	}{
		{"00:00:00:00", 25, 0},
		{"01:00:00:00", 25, 3600 * 48000},
		{"10:00:00:00", 30, 36000 * 48000},
		{"00:00:01:12", 25, 48000 + 12*1920},
		{"00:00:00:23", 24, 23 * 2000},
		{"23:59:59:29", 30, (86399)*48000 + 29*1600},
	} {
		got, err := studio.TimecodeSamples(c.tc, c.fps, 48000)
		require.NoError(t, err, c.tc)
		require.Equal(t, c.want, got, c.tc)
	}
	for _, bad := range []string{"", "1:00:00:00", "01:00:00", "01:60:00:00", "24:00:00:00", "00:00:00:25", "00:00:00:-1", "aa:bb:cc:dd", "01:00:00:00x"} {
		_, err := studio.TimecodeSamples(bad, 25, 48000)
		require.ErrorIs(t, err, studio.ErrInvalid, "%q", bad)
	}
}

// TestExportOptionsDefaults: the zero options are a 16-bit mono export from
// 00:00:00:00 at 25 fps; other bit depths and frame rates are refused.
func TestExportOptionsDefaults(t *testing.T) {
	t.Parallel()
	var o studio.ExportOptions
	require.NoError(t, o.Normalize())
	require.Equal(t, studio.ExportOptions{BitDepth: 16, FPS: 25, StartTimecode: "00:00:00:00"}, o)
	for _, bad := range []studio.ExportOptions{{BitDepth: 8}, {BitDepth: 32}, {FPS: 29}, {StartTimecode: "99:00:00:00"}} {
		require.ErrorIs(t, bad.Normalize(), studio.ErrInvalid, "%+v", bad)
	}
}
