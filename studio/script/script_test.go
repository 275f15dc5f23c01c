package script

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"dubstudio/i18n"
)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

// problems returns the problems of err, which must be a *ParseError.
func problems(t *testing.T, err error) []Problem {
	t.Helper()
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	return pe.Problems
}

// utf8Cue is a last cue of valid UTF-8 text, which makes a file with a few bad bytes
// read as UTF-8 rather than as a legacy code page.
const utf8Cue = "\n\n99\n00:01:00,000 --> 00:01:01,000\nééééééééééééééééééééé\n"

func p(line int, key string, args ...any) Problem { return Problem{Line: line, Key: key, Args: args} }

// utf16LE encodes s as UTF-16LE with a byte-order mark.
func utf16LE(s string) []byte {
	out := []byte{0xFF, 0xFE}
	for _, u := range utf16.Encode([]rune(s)) {
		out = append(out, byte(u), byte(u>>8))
	}
	return out
}

func utf16BE(s string) []byte {
	out := []byte{0xFE, 0xFF}
	for _, u := range utf16.Encode([]rune(s)) {
		out = append(out, byte(u>>8), byte(u))
	}
	return out
}

var testdataCues = map[string][]Cue{
	"film_en.srt": {
		{SourceLine: 1, Start: ms(1200), End: ms(3400), Text: "Previously, on the night shift..."},
		{SourceLine: 5, Start: ms(4000), End: ms(6500), Character: "MARTHA", Text: "You said the boat would be here\nby midnight."},
		{SourceLine: 10, Start: ms(6600), End: ms(9100), Character: "JONAH", Text: "It will be. Trust me."},
		{SourceLine: 14, Start: ms(9000), End: ms(11000), Text: "[distant foghorn]", Flags: []string{FlagOverlap}},
		{SourceLine: 18, Start: ms(11500), End: ms(14250), Character: "MARTHA", Text: "\"Trust me,\" he says.\nLike that ever meant anything <laughs>."},
		{SourceLine: 23, Start: ms(14250), End: ms(14250), Text: "- Wait.\n- What?", Flags: []string{FlagZeroLength, FlagDialogue}},
		{SourceLine: 28, Start: ms(15000), End: ms(18000), Character: "OLD MAN", Text: "Tide's turning. 2 < 3 > 1, remember?"},
		{SourceLine: 32, Start: ms(62345), End: ms(65000), Character: "Dr. Okafor", Text: "The time is 10:30.\nSee https://example.org"},
	},
	"chinese_utf16le.srt": {
		{SourceLine: 1, Start: ms(500), End: ms(2000), Character: "小明", Text: "你好，今天天气真好。"},
		{SourceLine: 5, Start: ms(2100), End: ms(4800), Character: "李老师", Text: "同学们，请把书翻到第三页。\n我们开始上课。"},
		{SourceLine: 10, Start: ms(5000), End: ms(6000), Text: "（远处传来钟声）"},
		{SourceLine: 14, Start: ms(6200), End: ms(8000), Character: "小红", Text: "\"真的吗？太好了😀\""},
	},
	"voices.vtt": {
		{SourceLine: 18, Start: ms(1000), End: ms(4000), Character: "Fred", Text: "Hi, my name is Fred,\nnice to meet you."},
		{SourceLine: 23, Start: ms(4500), End: ms(6000), Character: "Mary Ann", Text: "Hi, I'm Mary Ann & this is my boat."},
		{SourceLine: 28, Start: ms(6000), End: ms(8250), Character: "Fred", Text: "Fish <3 and chips?"},
		{SourceLine: 32, Start: time.Hour, End: time.Hour + ms(2000), Character: "NARRATOR", Text: "An hour later..."},
	},
	"script.csv": {
		{SourceLine: 2, Start: ms(1000), End: ms(3500), Character: "Alice", Text: "Hello, Bob.", Emotion: "happy"},
		{SourceLine: 3, Start: ms(3600), End: ms(5000), Character: "Bob", Text: "Hi."},
		{SourceLine: 4, Start: ms(65250), End: ms(67000), Character: "Bob", Text: "He said \"no\", then left.\nAnd that was that.", Emotion: "sad"},
		{SourceLine: 6, Start: ms(67500), End: ms(69000), Character: "Narrator", Text: "<laughs> 2 < 3, obviously"},
		{SourceLine: 8, Start: ms(70000), End: ms(72000), Character: "Alice", Text: "Wait — what?", Emotion: "surprised"},
	},
}

func TestParseTestdata(t *testing.T) {
	t.Parallel()
	formats := map[string]Format{
		"film_en.srt": FormatSRT, "chinese_utf16le.srt": FormatSRT, "voices.vtt": FormatVTT, "script.csv": FormatCSV,
	}
	for name, want := range testdataCues {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data := readTestdata(t, name)
			cues, err := Parse(name, data)
			require.NoError(t, err)
			require.Equal(t, want, cues)

			// The content decides, not the name.
			cues, err = Parse("upload.bin", data)
			require.NoError(t, err)
			require.Equal(t, want, cues)
			require.Equal(t, formats[name], Detect("upload.bin", data))
		})
	}
}

func TestParseBrokenTestdata(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want []Problem
	}{
		{"bad_timecode.srt", []Problem{
			p(10, "script.bad_timecode", "00:00:0B,500"),
			p(18, "script.end_before_start", "00:00:08.500", "00:00:09.000"),
		}},
		{"truncated.srt", []Problem{p(11, "script.bad_timecode", "00:00:0")}},
		{"garbage.bin", []Problem{p(3, "script.not_text")}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			cues, err := Parse(tt.file, readTestdata(t, tt.file))
			require.Nil(t, cues)
			require.Equal(t, tt.want, problems(t, err))
		})
	}
}

func TestParseProblems(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", MaxTextLen+1)
	tests := []struct {
		name  string
		parse func([]byte) ([]Cue, error)
		in    string
		want  []Problem
	}{
		{"srt empty", ParseSRT, "", []Problem{p(1, "script.empty")}},
		{"srt blank", ParseSRT, "\r\n \n\t\n", []Problem{p(1, "script.empty")}},
		{"srt only BOM", ParseSRT, "\uFEFF", []Problem{p(1, "script.empty")}},
		{"srt text without timing", ParseSRT, "Hello there\n", []Problem{p(1, "script.missing_timecode")}},
		{"srt index without timing", ParseSRT, "1\nHello there\n", []Problem{p(2, "script.bad_timing_line", "Hello there")}},
		{"srt index at end", ParseSRT, "1\n00:00:01,000 --> 00:00:02,000\nHi\n\n2\n", []Problem{p(5, "script.missing_timecode")}},
		{"srt one-dash arrow", ParseSRT, "1\n00:00:01,000 -> 00:00:02,000\nHi\n", []Problem{p(2, "script.bad_timing_line", "00:00:01,000 -> 00:00:02,000")}},
		{"srt no end", ParseSRT, "1\n00:00:01,000 -->\nHi\n", []Problem{p(2, "script.bad_timecode", "00:00:01,000 -->")}},
		{"srt bad start", ParseSRT, "1\n0:0:1,000 --> 00:00:02,000\nHi\n", []Problem{p(2, "script.bad_timecode", "0:0:1,000")}},
		{"srt minutes over 59", ParseSRT, "1\n00:60:00,000 --> 01:00:00,000\nHi\n", []Problem{p(2, "script.bad_timecode", "00:60:00,000")}},
		{"srt end before start", ParseSRT, "1\n00:00:03,000 --> 00:00:02,000\nHi\n", []Problem{p(2, "script.end_before_start", "00:00:02.000", "00:00:03.000")}},
		{"srt control character", ParseSRT, "1\n00:00:01,000 --> 00:00:02,000\nbell\a\n", []Problem{p(3, "script.control_char", "U+0007")}},
		{"srt escape character", ParseSRT, "1\n00:00:01,000 --> 00:00:02,000\nx\x1b[31m\n", []Problem{p(3, "script.control_char", "U+001B")}},
		{"srt C1 control", ParseSRT, "1\n00:00:01,000 --> 00:00:02,000\nnext\u0085line\n", []Problem{p(3, "script.control_char", "U+0085")}},
		{"srt text too long", ParseSRT, "1\n00:00:01,000 --> 00:00:02,000\n" + long + "\n", []Problem{p(3, "script.text_too_long", MaxTextLen+1, MaxTextLen)}},
		{"srt name too long", ParseSRT, "1\n00:00:01,000 --> 00:00:02,000\n<v " + long[:MaxNameLen+1] + ">Hi\n", []Problem{p(3, "script.name_too_long", MaxNameLen+1, MaxNameLen)}},
		// A few bad bytes in a file that is otherwise UTF-8 (the last cue) are
		// problems, not the sign of a legacy code page.
		{"srt invalid utf-8", ParseSRT, "1\n00:00:01,000 --> 00:00:02,000\n\xff\xfeHi\n" + utf8Cue, []Problem{p(3, "script.invalid_utf8")}},
		{"srt every problem, in line order", ParseSRT,
			"1\r\n00:00:01,000 --> 00:00:0X,000\r\nOne\r\n\r\n2\r\nTwo\r\n\r\n3\r\n00:00:05,000 --> 00:00:06,000\r\nbad \xc3\x28 byte\r\n\r\n4\r\n00:00:09,000 --> 00:00:07,000\r\nFour\r\n" + utf8Cue,
			[]Problem{
				p(2, "script.bad_timecode", "00:00:0X,000"),
				p(6, "script.bad_timing_line", "Two"),
				p(10, "script.invalid_utf8"),
				p(13, "script.end_before_start", "00:00:07.000", "00:00:09.000"),
			}},
		{"utf-16 lone surrogate", ParseSRT,
			string(utf16LE("1\r\n00:00:01,000 --> 00:00:02,000\r\nHi")) + "\x00\xd8" + string(utf16LE("\r\n")[2:]),
			[]Problem{p(3, "script.invalid_utf16")}},
		{"utf-16 odd length", ParseSRT,
			string(utf16LE("1\n00:00:01,000 --> 00:00:02,000\nHi\n")) + "\x41",
			[]Problem{p(4, "script.invalid_utf16")}},

		{"vtt without header", ParseVTT, "00:01.000 --> 00:02.000\nHi\n", []Problem{p(1, "script.vtt_header")}},
		{"vtt header only", ParseVTT, "WEBVTT\n\nNOTE nothing yet\n", []Problem{p(1, "script.no_cues")}},
		{"vtt WEBVTTX", ParseVTT, "WEBVTTX\n\n00:01.000 --> 00:02.000\nHi\n", []Problem{p(1, "script.vtt_header")}},
		{"vtt identifier without timing", ParseVTT, "WEBVTT\n\nid\nHello\n", []Problem{p(4, "script.bad_timing_line", "Hello")}},
		{"vtt identifier alone", ParseVTT, "WEBVTT\n\nid\n\n00:01.000 --> 00:02.000\nHi\n", []Problem{p(3, "script.missing_timecode")}},
		{"vtt end before start", ParseVTT, "WEBVTT\n\n00:01.000 --> 00:00.500 align:end\nHi\n", []Problem{p(3, "script.end_before_start", "00:00:00.500", "00:00:01.000")}},
		{"vtt bad timecode", ParseVTT, "WEBVTT\n\n00:01.000 --> 00:02.0000x\nHi\n", []Problem{p(3, "script.bad_timecode", "00:02.0000x")}},

		{"csv no header", ParseCSV, "00:00:01.000,00:00:02.000,Bob,Hi\n", []Problem{p(1, "script.csv_missing_columns", "start, end, character, text")}},
		{"csv missing character", ParseCSV, "start,end,text\n1,2,Hi\n", []Problem{p(1, "script.csv_missing_columns", "character")}},
		{"csv duplicate column", ParseCSV, "start,end,speaker,Character,text\n1,2,A,B,Hi\n", []Problem{p(1, "script.csv_duplicate_column", "Character")}},
		{"csv header only", ParseCSV, "start,end,character,text\n\n", []Problem{p(1, "script.no_cues")}},
		{"csv column count", ParseCSV, "start,end,character,text\n1,2,Bob,Hi, there\n3,4,Bob\n5,6,Bob,ok\n",
			[]Problem{p(2, "script.csv_column_count", 5, 4), p(3, "script.csv_column_count", 3, 4)}},
		{"csv timecodes", ParseCSV, "start,end,character,text\n,2,Bob,Hi\n1,2:3,Bob,Hi\n\"3\n\",\"4\",Bob,Hi\n",
			[]Problem{p(2, "script.missing_timecode"), p(3, "script.bad_timecode", "2:3")}},
		{"csv end before start", ParseCSV, "start,end,character,text\n00:00:02.000,00:00:01.000,Bob,Hi\n", []Problem{p(2, "script.end_before_start", "00:00:01.000", "00:00:02.000")}},
		{"csv unterminated quote", ParseCSV, "start,end,character,text\n1,2,Bob,\"Hi\n3,4,Bob,Ho\n", []Problem{p(2, "script.csv_unterminated_quote")}},
		{"csv text after closing quote", ParseCSV, "start,end,character,text\n1,2,Bob,\"Hi\" there\n", []Problem{p(2, "script.csv_bad_quote")}},
		{"csv text too long on its line", ParseCSV, "start,end,character,text\n1,2,Bob,\"a\n" + long + "\"\n",
			[]Problem{p(2, "script.text_too_long", MaxTextLen+3, MaxTextLen)}},
		{"csv emotion too long", ParseCSV, "start,end,character,text,emotion\n1,2,Bob,Hi," + long[:MaxNameLen+1] + "\n",
			[]Problem{p(2, "script.emotion_too_long", MaxNameLen+1, MaxNameLen)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cues, err := tt.parse([]byte(tt.in))
			require.Nil(t, cues)
			require.Equal(t, tt.want, problems(t, err))
		})
	}
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	hi := []Cue{{SourceLine: 1, Start: ms(1000), End: ms(2500), Text: "Hi"}}
	tests := []struct {
		name  string
		parse func([]byte) ([]Cue, error)
		in    string
		want  []Cue
	}{
		{"srt LF", ParseSRT, "1\n00:00:01,000 --> 00:00:02,500\nHi\n", hi},
		{"srt CRLF with BOM", ParseSRT, "\uFEFF1\r\n00:00:01,000 --> 00:00:02,500\r\nHi\r\n", hi},
		{"srt lone CR", ParseSRT, "1\r00:00:01,000 --> 00:00:02,500\rHi\r", hi},
		{"srt no trailing newline", ParseSRT, "1\n00:00:01,000 --> 00:00:02,500\nHi", hi},
		{"srt dot separator", ParseSRT, "1\n00:00:01.000 --> 00:00:02.500\nHi", hi},
		{"srt without index", ParseSRT, "00:00:01,000 --> 00:00:02,500\nHi", hi},
		{"srt one-digit hours and fraction", ParseSRT, "1\n0:00:01,0 --> 0:00:02,5\nHi", hi},
		{"srt sub-millisecond rounded", ParseSRT, "1\n00:00:00,9996 --> 00:00:02,5004\nHi", hi},
		{"utf-16 LE", ParseSRT, string(utf16LE("1\r\n00:00:01,000 --> 00:00:02,500\r\nHi\r\n")), hi},
		{"utf-16 LE without BOM", ParseSRT, string(utf16LE("1\n00:00:01,000 --> 00:00:02,500\nHi\n")[2:]), hi},
		{"utf-16 BE", ParseSRT, string(utf16BE("1\n00:00:01,000 --> 00:00:02,500\nHi")), hi},
		{"srt tab kept inside text", ParseSRT, "1\n00:00:01,000 --> 00:00:02,500\n\tA\tB \n", []Cue{{SourceLine: 1, Start: ms(1000), End: ms(2500), Text: "A\tB"}}},
		{"srt text of exactly the limit", ParseSRT, "1\n00:00:01,000 --> 00:00:02,500\n" + strings.Repeat("語", MaxTextLen),
			[]Cue{{SourceLine: 1, Start: ms(1000), End: ms(2500), Text: strings.Repeat("語", MaxTextLen), Flags: []string{FlagLongLine}}}},
		{"srt empty cue", ParseSRT, "1\n00:00:01,000 --> 00:00:02,500\n\n2\n00:00:03,000 --> 00:00:04,000\n<i></i>\n",
			[]Cue{{SourceLine: 1, Start: ms(1000), End: ms(2500)}, {SourceLine: 4, Start: ms(3000), End: ms(4000)}}},
		{"srt missing blank line between cues", ParseSRT, "1\n00:00:01,000 --> 00:00:02,500\nHi\n2\n00:00:03,000 --> 00:00:04,000\nHo\n00:00:05,000 --> 00:00:06,000\nHu",
			[]Cue{
				{SourceLine: 1, Start: ms(1000), End: ms(2500), Text: "Hi"},
				{SourceLine: 4, Start: ms(3000), End: ms(4000), Text: "Ho"},
				{SourceLine: 7, Start: ms(5000), End: ms(6000), Text: "Hu"},
			}},
		{"srt arrow and numbers in text", ParseSRT, "1\n00:00:01,000 --> 00:00:02,500\nA --> B\n42\n",
			[]Cue{{SourceLine: 1, Start: ms(1000), End: ms(2500), Text: "A --> B\n42"}}},
		{"srt name prefixes", ParseSRT, "1\n00:00:01,000 --> 00:00:02,500\nALICE:\nHello\n\n2\n00:00:03,000 --> 00:00:04,000\nNote, this: is no name\n\n3\n00:00:05,000 --> 00:00:06,000\nAt 10:30 sharp\n",
			[]Cue{
				{SourceLine: 1, Start: ms(1000), End: ms(2500), Character: "ALICE", Text: "Hello"},
				{SourceLine: 6, Start: ms(3000), End: ms(4000), Text: "Note, this: is no name"},
				{SourceLine: 10, Start: ms(5000), End: ms(6000), Text: "At 10:30 sharp"},
			}},
		{"vtt minimal", ParseVTT, "WEBVTT\n\n00:01.000 --> 00:02.500\nHi\n", []Cue{{SourceLine: 3, Start: ms(1000), End: ms(2500), Text: "Hi"}}},
		{"vtt header directly followed by a cue", ParseVTT, "WEBVTT\n00:01.000 --> 00:02.500\nHi\n", []Cue{{SourceLine: 2, Start: ms(1000), End: ms(2500), Text: "Hi"}}},
		{"vtt arrow line ends a cue", ParseVTT, "WEBVTT\n\n00:01.000 --> 00:02.500\nHi\n00:03.000 --> 00:04.000\nHo\n",
			[]Cue{{SourceLine: 3, Start: ms(1000), End: ms(2500), Text: "Hi"}, {SourceLine: 5, Start: ms(3000), End: ms(4000), Text: "Ho"}}},
		{"vtt entities and unknown tags", ParseVTT, "WEBVTT\n\n00:01.000 --> 00:02.500\n&lt;i&gt; is &quot;italic&quot; &#x4E2D;&#25991; &#7; <laughs>\n",
			[]Cue{{SourceLine: 3, Start: ms(1000), End: ms(2500), Text: "<i> is \"italic\" 中文 &#7; <laughs>"}}},
		{"vtt voice wins over prefix", ParseVTT, "WEBVTT\n\n00:01.000 --> 00:02.500\n<v Bob>Alice: hi</v>\n",
			[]Cue{{SourceLine: 3, Start: ms(1000), End: ms(2500), Character: "Bob", Text: "Alice: hi"}}},
		{"csv semicolons, Chinese header", ParseCSV, "开始;结束;角色;台词;情绪\n1,5;2,5;小明;你好;开心\n",
			[]Cue{{SourceLine: 2, Start: ms(1500), End: ms(2500), Character: "小明", Text: "你好", Emotion: "开心"}}},
		{"csv tabs, mixed case aliases", ParseCSV, "TC_In\tTC-Out\tSPEAKER\tDialogue\n00:01.000\t00:02.500\tBob\tHi\n",
			[]Cue{{SourceLine: 2, Start: ms(1000), End: ms(2500), Character: "Bob", Text: "Hi"}}},
		{"csv CRLF, quotes kept in unquoted field", ParseCSV, "start,end,character,text\r\n1,2.5,Bob,He said \"hi\"\r\n",
			[]Cue{{SourceLine: 2, Start: ms(1000), End: ms(2500), Character: "Bob", Text: "He said \"hi\""}}},
		{"csv blank rows skipped", ParseCSV, "start,end,character,text\n,,,\n\n1,2.5,,Hi\n",
			[]Cue{{SourceLine: 4, Start: ms(1000), End: ms(2500), Text: "Hi"}}},
		{"csv quoted field spanning lines, CR only", ParseCSV, "start,end,character,text\r1,2.5,Bob,\"a\r\rb\"\r3,4,Bob,c",
			[]Cue{
				{SourceLine: 2, Start: ms(1000), End: ms(2500), Character: "Bob", Text: "a\nb"},
				{SourceLine: 5, Start: ms(3000), End: ms(4000), Character: "Bob", Text: "c"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cues, err := tt.parse([]byte(tt.in))
			require.NoError(t, err)
			require.Equal(t, tt.want, cues)
		})
	}
}

func TestParseDetect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, filename, in string
		want               Format
	}{
		{"vtt by content", "x.srt", "WEBVTT\n\n00:01.000 --> 00:02.000\nHi\n", FormatVTT},
		{"srt by content", "x.vtt", "\n\n1\n00:00:01,000 --> 00:00:02,000\nHi\n", FormatSRT},
		{"srt without index", "x", "00:00:01,000 --> 00:00:02,000\nHi\n", FormatSRT},
		{"csv by content", "x.txt", "Start,End,Speaker,Text\n1,2,A,Hi\n", FormatCSV},
		{"extension decides", "x.CSV", "nonsense\n", FormatCSV},
		{"tsv extension", "x.tsv", "nonsense\n", FormatCSV},
		{"unknown", "notes.txt", "Dear diary,\ntoday nothing happened.\n", ""},
		{"empty", "x.srt", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Detect(tt.filename, []byte(tt.in)))
		})
	}
}

func TestParseUnknownFormat(t *testing.T) {
	t.Parallel()
	_, err := Parse("notes.txt", []byte("Dear diary,\ntoday nothing happened.\n"))
	require.Equal(t, []Problem{p(1, "script.unknown_format")}, problems(t, err))

	// The extension decides when the content does not, and the format's own problems
	// are the ones reported.
	_, err = Parse("notes.csv", []byte("Dear diary,\ntoday nothing happened.\n"))
	require.Equal(t, []Problem{p(1, "script.csv_missing_columns", "start, end, character, text")}, problems(t, err))
}

func TestParseTooManyCues(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	for i := range MaxCues + 5 {
		srtCue(&b, i)
	}
	_, err := ParseSRT(b.Bytes())
	require.Equal(t, []Problem{p(MaxCues*4+1, "script.too_many_cues", MaxCues)}, problems(t, err))

	end := bytes.Index(b.Bytes(), []byte("\n20001\n"))
	require.Positive(t, end)
	cues, err := ParseSRT(b.Bytes()[:end])
	require.NoError(t, err)
	require.Len(t, cues, MaxCues)
}

func TestParseProblemsAreBounded(t *testing.T) {
	t.Parallel()
	// A control character on every line, and one block without a timing line, found
	// after all of them but on line 1: the first problems by line are the ones listed.
	in := strings.Repeat("x\x01\n", maxProblems+10)
	_, err := ParseSRT([]byte(in))
	ps := problems(t, err)
	require.Len(t, ps, maxProblems+1)
	require.Equal(t, p(1, "script.control_char", "U+0001"), ps[0])
	require.Equal(t, p(1, "script.missing_timecode"), ps[1])
	require.Equal(t, p(maxProblems-1, "script.control_char", "U+0001"), ps[maxProblems-1])
	require.Equal(t, p(maxProblems, "script.more_problems", 11), ps[maxProblems])
}

func TestFlags(t *testing.T) {
	t.Parallel()
	in := "1\n00:00:00,000 --> 00:00:10,000\nA\n\n" +
		"2\n00:00:02,000 --> 00:00:03,000\nB\n\n" + // inside A
		"3\n00:00:05,000 --> 00:00:05,000\nC\n\n" + // inside A and zero-length
		"4\n00:00:10,000 --> 00:00:11,000\nD\n\n" + // starts as A ends: fine
		"5\n00:00:11,000 --> 00:00:11,000\nE\n\n" + // zero-length at D's end
		"6\n00:00:01,000 --> 00:00:02,000\nF\n\n" + // out of order: sorted after A
		"7\n00:00:02,000 --> 00:00:03,000\nB\n" // B again
	cues, err := ParseSRT([]byte(in))
	require.NoError(t, err)
	var flags [][]string
	var texts []string
	for _, c := range cues {
		flags = append(flags, c.Flags)
		texts = append(texts, c.Text)
	}
	require.Equal(t, []string{"A", "F", "B", "B", "C", "D", "E"}, texts, "sorted by start time")
	require.Equal(t, [][]string{
		nil, {FlagOverlap}, {FlagOverlap}, {FlagDuplicate}, {FlagOverlap, FlagZeroLength}, nil, {FlagZeroLength},
	}, flags)
}

func TestParseErrorText(t *testing.T) {
	t.Parallel()
	_, err := ParseSRT(readTestdata(t, "bad_timecode.srt"))
	require.EqualError(t, err, `script: 2 problems: line 10: Bad timecode "00:00:0B,500": write it as 00:01:02,345, 00:01:02.345, 01:02.345 or 62.345; `+
		`line 18: The end 00:00:08.500 is before the start 00:00:09.000`)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, `第 10 行：时间码 "00:00:0B,500" 无效：应写作 00:01:02,345、00:01:02.345、01:02.345 或 62.345。`, pe.Problems[0].In(i18n.ZH))

	_, err = ParseSRT(nil)
	require.EqualError(t, err, "script: 1 problem: line 1: The file is empty")
}

// TestMessageKeys checks that every message key the package uses is in the catalog.
func TestMessageKeys(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	key := regexp.MustCompile(`"(script\.[a-z0-9_]+)"`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range key.FindAllStringSubmatch(string(src), -1) {
			require.True(t, i18n.Has(m[1]), "%s: %s is not in the i18n catalog", f, m[1])
			seen++
		}
	}
	require.Greater(t, seen, 20)
}
