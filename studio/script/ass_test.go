package script

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// FuzzParseASS checks that ParseASS never panics, that what it accepts is sound, that
// what it refuses comes with problems on lines of the file, and that writing what it
// accepted with WriteASS reads back the same (times to the centisecond).
func FuzzParseASS(f *testing.F) {
	f.Add(readTestdata(f, "cafe.ass"))
	f.Add([]byte("[Script Info]\n[Events]\nFormat: Start, End, Text\nDialogue: 0:00:01.00,0:00:02.00,{\\an8\n"))
	f.Add([]byte("[Script Info]\n[Events]\nDialogue: 0,0:00:01.00,0:00:02.00,Default,,0,0,0,,BOB{}: hi \\{x\\} a\\{}N\n"))
	f.Add([]byte("[Script Info]\n[Events]\nDialogue: 0,0:00:01.00,0:00:02.00,Sign,,0,0,0,,{\\pos(1,1)\\p1}m 0 0 l 1 1{\\p0}EXIT{\\p2}m 0 0\n"))
	fuzzParse(f, ParseASS, WriteASS, ParseASS, FormatASS)
}

// FuzzWriteASS writes one cue of any character and text as ASS and reads it back.
func FuzzWriteASS(f *testing.F) {
	f.Add("MARTHA", "Hello\nthere", uint32(1234), uint32(2345))
	f.Add("", "BOB: not a speaker", uint32(0), uint32(10))
	f.Add("Tom, Jr.", `{\an8} a\N b \h {} }{ \`, uint32(5), uint32(5))
	f.Add("", "小明：你好", uint32(999), uint32(1000))
	f.Fuzz(func(t *testing.T, character, text string, start, end uint32) {
		c := Cue{Start: time.Duration(min(start, end)) * time.Millisecond, End: time.Duration(max(start, end)) * time.Millisecond,
			Character: canonName(character), Text: canonText(text)}
		if !utf8.ValidString(character) || !utf8.ValidString(text) || hasControl(character+text) || strings.ContainsRune(character, '\n') ||
			utf8.RuneCountInString(c.Text) > MaxTextLen || utf8.RuneCountInString(c.Character) > MaxNameLen {
			t.Skip("not what a project holds")
		}
		if c.Character == "" && textLines(c.Text) != nil {
			// A line that reads as "NAME: text" keeps its text whole only when the writer
			// marks it; what the parsers would split is not a project's text.
			if _, err := Parse("x.srt", []byte("1\n00:00:00,000 --> 00:00:01,000\n"+c.Text+"\n")); err != nil {
				t.Skip()
			}
		}
		var buf bytes.Buffer
		require.NoError(t, WriteASS(&buf, []Cue{c}))
		got, err := ParseASS(buf.Bytes())
		require.NoError(t, err, buf.String())
		want := keepable([]Cue{c}, FormatASS)
		require.Equal(t, want, keepable(got, FormatASS), buf.String())
	})
}

func TestWriteASSOutput(t *testing.T) {
	t.Parallel()
	cues := []Cue{
		{Start: ms(1204), End: ms(3405), Character: "MARTHA", Text: "You said {midnight}\nat 10:30"},
		{Start: time.Hour, End: time.Hour + ms(500), Text: "BOB: not the speaker"},
		{Start: time.Hour + ms(500), End: time.Hour + ms(999), Character: "Tom, Jr.", Text: `C:\New \h`},
	}
	var buf bytes.Buffer
	require.NoError(t, WriteASS(&buf, cues))
	out := buf.String()
	require.True(t, strings.HasPrefix(out, "\uFEFF[Script Info]\n"), "a byte-order mark, then the script info")
	for _, want := range []string{"\nScriptType: v4.00+\n", "\n[V4+ Styles]\n", "\nStyle: Default,", "\n[Events]\n",
		"\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"} {
		require.Contains(t, out, want)
	}
	_, events, ok := strings.Cut(out, "Effect, Text\n")
	require.True(t, ok)
	require.Equal(t, "Dialogue: 0,0:00:01.20,0:00:03.41,Default,MARTHA,0,0,0,,You said \\{midnight\\}\\Nat 10:30\n"+
		"Dialogue: 0,1:00:00.00,1:00:00.50,Default,,0,0,0,,BOB{}: not the speaker\n"+
		"Dialogue: 0,1:00:00.50,1:00:01.00,Default,Tom; Jr.,0,0,0,,C:\\{}New \\{}h\n", events)

	require.Equal(t, FormatASS, Detect("export", buf.Bytes()))
	got, err := Parse("export", buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, []Cue{
		{SourceLine: 16, Start: ms(1200), End: ms(3410), Character: "MARTHA", Text: "You said {midnight}\nat 10:30"},
		{SourceLine: 17, Start: time.Hour, End: time.Hour + ms(500), Text: "BOB: not the speaker"},
		{SourceLine: 18, Start: time.Hour + ms(500), End: time.Hour + ms(1000), Character: "Tom; Jr.", Text: `C:\New \h`},
	}, got)
}

// TestASSTextEscapes reads the escapes of the Text field as libass shows them.
func TestASSTextEscapes(t *testing.T) {
	t.Parallel()
	tests := []struct{ field, character, text string }{
		{`{\an8}\{not an override\}`, "", "{not an override}"},
		{`a\{}N b`, "", `a\N b`},
		{`back\slash\`, "", `back\slash\`},
		{`one\ntwo\Nthree`, "", "one\ntwo\nthree"},
		{`{a comment}BOB: hi`, "", "BOB: hi"},
		{`{\i1}BOB{\i0}: hi`, "BOB", "hi"},
		{`BOB{}: hi`, "", "BOB: hi"},
		{`open { brace`, "", "open { brace"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			t.Parallel()
			cues, err := ParseASS([]byte("[Script Info]\n[Events]\nDialogue: 0,0:00:01.00,0:00:02.00,Default,,0,0,0,," + tt.field + "\n"))
			require.NoError(t, err)
			require.Equal(t, tt.character, cues[0].Character)
			require.Equal(t, tt.text, cues[0].Text)
		})
	}
}
