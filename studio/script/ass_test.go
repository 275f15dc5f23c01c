package script

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseASSFile(t *testing.T) {
	t.Parallel()
	data := readTestdata(t, "cafe.ass")
	require.Equal(t, FormatASS, Detect("x.txt", data))
	cues, err := Parse("cafe.ass", data)
	require.NoError(t, err)
	s := time.Second
	require.Equal(t, []Cue{
		{SourceLine: 14, Start: s, End: 3500 * time.Millisecond, Character: "Marie", Text: "Un café, s'il vous plaît."},
		{SourceLine: 16, Start: 4 * s, End: 6250 * time.Millisecond, Character: "Paul", Text: "Tout de suite,\nmadame."},
		{SourceLine: 17, Start: 7 * s, End: 8 * s, Text: "Règle numéro un, pas de sucre !"},
		{SourceLine: 18, Start: 9 * s, End: 10 * s, Character: "Marie", Text: "Merci, vraiment, à plus."},
	}, cues)
}

func TestParseASSProblems(t *testing.T) {
	t.Parallel()
	head := "[Script Info]\nScriptType: v4.00+\n\n[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
	tests := []struct {
		name, data string
		want       []Problem
	}{
		{"bad start", head + "Dialogue: 0,0:00:0x.00,0:00:02.00,Default,,0,0,0,,Hi\n", []Problem{p(6, "script.bad_timecode", "0:00:0x.00")}},
		{"end before start", head + "Dialogue: 0,0:00:03.00,0:00:02.00,Default,,0,0,0,,Hi\n", []Problem{p(6, "script.end_before_start", "00:00:02.000", "00:00:03.000")}},
		{"too few fields", head + "Dialogue: 0,0:00:01.00,0:00:02.00\n", []Problem{p(6, "script.ass_fields", 3, 10)}},
		{"format without text", "[Script Info]\n[Events]\nFormat: Start, End\n", []Problem{p(3, "script.ass_format")}},
		{"comments only", head + "Comment: 0,0:00:01.00,0:00:02.00,Default,,0,0,0,,Hi\n", []Problem{p(1, "script.no_cues")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cues, err := ParseASS([]byte(tt.data))
			require.Nil(t, cues)
			require.Equal(t, tt.want, problems(t, err))
		})
	}
}

// FuzzParseASS checks that ParseASS never panics, that what it accepts is sound and
// that what it refuses comes with problems on lines of the file.
func FuzzParseASS(f *testing.F) {
	f.Add(readTestdata(f, "cafe.ass"))
	f.Add([]byte("[Script Info]\n[Events]\nFormat: Start, End, Text\nDialogue: 0:00:01.00,0:00:02.00,{\\an8\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cues, err := ParseASS(data)
		if err != nil {
			require.Nil(t, cues)
			ps := problems(t, err)
			require.NotEmpty(t, ps)
			for _, pr := range ps {
				require.GreaterOrEqual(t, pr.Line, 1)
			}
			return
		}
		require.NotEmpty(t, cues)
		for _, c := range cues {
			require.LessOrEqual(t, c.Start, c.End)
			require.GreaterOrEqual(t, c.Start, time.Duration(0))
		}
	})
}
