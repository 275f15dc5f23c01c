package script

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// framesCSV is a dubbing spreadsheet whose TC in and out count frames.
func framesCSV(rows ...string) []byte {
	s := "TC in,TC out,Character,Dialogue\n"
	for _, r := range rows {
		s += r + "\n"
	}
	return []byte(s)
}

// TestCSVFrameTimecodes reads TC in/out with frames at the rate chosen: frames at
// 25 fps, 29.97 drop-frame (";", SMPTE ST 12: frames 00 and 01 skipped each minute
// but every tenth) and non-drop (":", 30 labels a second played at 30000/1001), and
// 23.976; milliseconds in the same file keep their meaning.
func TestCSVFrameTimecodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fps        FPS
		in, out    string
		start, end int64 // ms
	}{
		{"25", FPS25, "00:00:01:12", "00:00:02:24", 1480, 2960},
		{"25, hours", FPS25, "10:00:00:00", "10:00:00:01", 36000000, 36000040},
		{"24", FPS24, "00:00:01:12", "00:00:02:00", 1500, 2000},
		{"29.97 drop-frame, frame 1800", FPS2997, "00:01:00;02", "00:01:00;03", 60060, 60093},
		{"29.97 drop-frame, tenth minute", FPS2997, "00:09:59;29", "00:10:00;00", 599966, 599999},
		{"29.97 drop-frame, an hour", FPS2997, "00:59:59;29", "01:00:00;00", 3599963, 3599996},
		{"29.97 non-drop", FPS2997, "00:00:00:00", "01:00:00:00", 0, 3603600},
		{"23.976", FPS23976, "00:00:01:00", "00:00:02:00", 1001, 2002},
		{"59.94 non-drop", FPS5994, "00:00:01:00", "00:00:01:06", 1001, 1101},
		{"milliseconds with frames", FPS25, "00:00:01.500", "00:00:02:00", 1500, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := Import("dub.csv", framesCSV(tt.in+","+tt.out+",Bob,Hi"), ImportOpts{FPS: tt.fps})
			require.NoError(t, err)
			require.Equal(t, tt.fps, res.FPS, "the rate frames were counted at")
			// The file's own timecodes are kept where they count frames.
			want := Cue{SourceLine: 2, Start: ms(tt.start), End: ms(tt.end), SourceStart: tt.in, SourceEnd: tt.out, Character: "Bob", Text: "Hi"}
			if strings.Contains(tt.in, ".") {
				want.SourceStart = ""
			}
			require.Equal(t, []Cue{want}, res.Cues)
		})
	}

	// Milliseconds alone: whatever the rate, and none needed; no rate reported.
	for _, fps := range append(FrameRates(), "") {
		res, err := Import("dub.csv", framesCSV("00:00:01.000,00:00:02.500,Bob,Hi"), ImportOpts{FPS: fps})
		require.NoError(t, err, fps)
		require.Equal(t, FPS(""), res.FPS)
		require.Equal(t, ms(2500), res.Cues[0].End)
		require.Empty(t, res.Cues[0].SourceStart+res.Cues[0].SourceEnd)
	}
}

// TestCSVFrameTimecodeProblems refuses what a rate cannot count, each on its line,
// and a file with frames but no rate with one message naming the setting.
func TestCSVFrameTimecodeProblems(t *testing.T) {
	t.Parallel()
	_, err := Import("dub.csv", framesCSV(
		"00:00:01:00,00:00:01:25,Bob,Hi",  // 25 is no frame at 25 fps
		"00:00:02:00,00:00:02:24,Bob,Ok",  // fine
		"00:00:03;00,00:00:03;10,Bob,Yes", // drop-frame is 29.97's
		"00:00:04:00,00:00:04:99,Bob,No",
		"00:61:00:00,00:61:00:01,Bob,Eh",
	), ImportOpts{FPS: FPS25})
	require.Equal(t, []Problem{
		p(2, "script.frame_too_high", "00:00:01:25", "25", 24),
		p(4, "script.drop_frame_rate", "00:00:03;00", "25"),
		p(4, "script.drop_frame_rate", "00:00:03;10", "25"),
		p(5, "script.frame_too_high", "00:00:04:99", "25", 24),
		p(6, "script.bad_frame_timecode", "00:61:00:00"),
		p(6, "script.bad_frame_timecode", "00:61:00:01"),
	}, problems(t, err))

	// 29.97 drop-frame has no frames 00 and 01 at the start of a minute but each tenth.
	_, err = Import("dub.csv", framesCSV("00:01:00;00,00:01:00;05,Bob,Hi", "00:10:00;00,00:10:00;01,Bob,Ok"), ImportOpts{FPS: FPS2997})
	require.Equal(t, []Problem{p(2, "script.dropped_frame", "00:01:00;00")}, problems(t, err))

	// Past the latest timecode.
	_, err = Import("dub.csv", framesCSV("499:59:59:24,500:00:00:00,Bob,Hi"), ImportOpts{FPS: FPS25})
	require.Equal(t, []Problem{p(2, "script.bad_frame_timecode", "500:00:00:00")}, problems(t, err))

	// No rate: one message, on the first line with frames, whatever else follows.
	_, err = Parse("dub.csv", framesCSV("00:00:01.000,00:00:02.000,Bob,Hi", "00:00:03:00,00:00:04:00,Bob,Ok", "00:00:05:00,00:00:06:00,Bob,Yes"))
	require.Equal(t, []Problem{p(3, "script.no_fps", "00:00:03:00")}, problems(t, err))

	// A rate that is none of FrameRates, as an unknown encoding.
	_, err = Import("dub.csv", framesCSV("00:00:01:00,00:00:02:00,Bob,Hi"), ImportOpts{FPS: "29.976"})
	require.Equal(t, []Problem{p(1, "script.unknown_fps", "29.976")}, problems(t, err))

	// Frames belong to CSV spreadsheets: an SRT timing line still refuses them.
	_, err = Import("a.srt", []byte("1\n00:00:01:00 --> 00:00:02:00\nHi\n"), ImportOpts{FPS: FPS25})
	require.Error(t, err)
}

// TestFPSOf maps a picture's probed rate to the rate an import counts frames at.
func TestFPSOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		num, den int
		want     FPS
		ok       bool
	}{
		{24000, 1001, FPS23976, true},
		{24, 1, FPS24, true},
		{25, 1, FPS25, true},
		{30000, 1001, FPS2997, true},
		{2997, 100, FPS2997, true},
		{30, 1, FPS30, true},
		{50, 1, FPS50, true},
		{60000, 1001, FPS5994, true},
		{60, 1, FPS60, true},
		{15, 1, "", false},
		{0, 0, "", false},
	} {
		got, ok := FPSOf(tt.num, tt.den)
		require.Equal(t, tt.ok, ok, "%d/%d", tt.num, tt.den)
		require.Equal(t, tt.want, got, "%d/%d", tt.num, tt.den)
	}
	for _, f := range FrameRates() {
		require.True(t, KnownFPS(f), f)
	}
	require.False(t, KnownFPS(""))
}
