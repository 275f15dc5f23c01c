package script

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/simplifiedchinese"
)

func TestVTTSpecification(t *testing.T) {
	t.Parallel()
	in := "WEBVTT - legacy header\nRegion: id=fred width=40% lines=3\nX-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000\n\n" +
		"REGION: id=old width=40%\n\n" +
		"STYLE\n::cue(.loud) {\n  color: red;\n}\n\n@media (max-height: 400px) {\n  ::cue { color: green; }\n}\n\n" +
		"NOTE a note\nover two lines\n\n" +
		"cue-1\n00:00:01.000 --> 00:00:02.000 align:start line:10% position:20% size:50% vertical:rl region:fred\n" +
		"<v.loud Mary Ann>Hi <c.yellow>there</c>, <i>you</i> <b>and</b> <u>me</u>&nbsp;&amp; &lt;3 &gt; &#233;&#x4E2D; &lrm;x&rlm;</v>\n\n" +
		"00:00:03.000 --> 00:00:04.000\n<ruby>漢<rt>kan</rt></ruby> <lang fr>oui</lang> <00:00:03.500>now &hellip;\n"
	cues, err := ParseVTT([]byte(in))
	require.NoError(t, err)
	require.Len(t, cues, 2)
	require.Equal(t, "Mary Ann", cues[0].Character)
	require.Equal(t, "Hi there, you and me\u00a0& <3 > é中 \u200ex\u200f", cues[0].Text)
	require.Equal(t, 19, cues[0].SourceLine, "the identifier's line")
	require.Equal(t, "漢kan oui now …", cues[1].Text)
	require.Equal(t, ms(3000), cues[1].Start)
}

func TestVTTBlockWithoutTimingIsReported(t *testing.T) {
	t.Parallel()
	// A broken arrow before the first cue is a cue, not a header block to skip.
	_, err := ParseVTT([]byte("WEBVTT\n\n00:00:01.000 -> 00:00:02.000\nHi\n"))
	require.Equal(t, []Problem{{Line: 4, Key: "script.bad_timing_line", Args: []any{"Hi"}}}, problems(t, err))
}

func TestSRTTagsAndEntities(t *testing.T) {
	t.Parallel()
	in := "1\r\n00:00:01,000 --> 00:00:02,000\r\n{\\an8}<font color=\"#ff0000\">Tom &amp; Jerry</font> <b>b</b> <i>i</i> <u>u</u>\r\n&lt;laughs&gt;&nbsp;ok &copy; &unknown; &#1;\r\n"
	cues, err := ParseSRT([]byte(in))
	require.NoError(t, err)
	require.Equal(t, "Tom & Jerry b i u\n<laughs>\u00a0ok © &unknown; &#1;", cues[0].Text)
}

// TestSRTVTTRoundTripText writes text that looks like markup and reads it back
// byte-identical, in both formats.
func TestSRTVTTRoundTripText(t *testing.T) {
	t.Parallel()
	texts := []string{
		"Tom & Jerry", "&amp; literally", "&lt;i&gt; and &#233; and &nbsp;", "<i>not italic</i>",
		"{\\an8} typed", "a --> b", "<laughs> 2 < 3 > 1", "&&amp;;", "<<i>i>", "{\\i1}<b>x</b>{\\i0}",
		"<v Bob>not a voice", "&#x4E2D;", "r&d <c.x>", "<00:00:01.000>",
	}
	var cues []Cue
	for i, tx := range texts {
		cues = append(cues, Cue{Start: ms(int64(i) * 1000), End: ms(int64(i)*1000 + 500), Text: tx})
	}
	cues = append(cues, Cue{Start: ms(90000), End: ms(91000), Character: "<b>Eve & Co</b>", Text: "x"})
	flag(cues)
	for _, f := range []Format{FormatSRT, FormatVTT} {
		var buf bytes.Buffer
		require.NoError(t, Write(&buf, f, cues))
		got, err := Parse("x", buf.Bytes())
		require.NoError(t, err, buf.String())
		require.Len(t, got, len(cues))
		for i := range cues {
			require.Equal(t, cues[i].Text, got[i].Text, "%s:\n%s", f, buf.String())
			require.Equal(t, cues[i].Character, got[i].Character, "%s:\n%s", f, buf.String())
		}
	}
	var srt bytes.Buffer
	require.NoError(t, WriteSRT(&srt, cues[:1]))
	require.Contains(t, srt.String(), "\r\nTom & Jerry\r\n", "text that needs no escape is written as typed")
}

func TestDialogueFlag(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]bool{
		"- Hi.\n- Hello.":        true,
		"– Bonjour.\n– Salut.":   true,
		"- Hi. - Hello.":         true,
		"-Hi.\n-Hello.":          true,
		"- and then...":          false,
		"Well - maybe.\nOr not":  false,
		"well-known\n-3 degrees": false,
	} {
		require.Equal(t, want, isDialogue(text), "%q", text)
	}
}

const ttmlHead = `<?xml version="1.0" encoding="UTF-8"?>
<tt xmlns="http://www.w3.org/ns/ttml" xmlns:ttm="http://www.w3.org/ns/ttml#metadata" xmlns:ttp="http://www.w3.org/ns/ttml#parameter"
    ttp:frameRate="25" ttp:tickRate="10000000" xml:lang="en">
  <head>
    <metadata>
      <ttm:agent xml:id="a1" type="character"><ttm:name type="full">Mary Ann</ttm:name></ttm:agent>
      <ttm:agent xml:id="a2" type="character"><ttm:name>JONAH</ttm:name></ttm:agent>
    </metadata>
  </head>
`

func TestTTML(t *testing.T) {
	t.Parallel()
	in := ttmlHead + `  <body>
    <div begin="10s">
      <p begin="00:00:01.000" end="00:00:02.500" ttm:agent="a1">Hello <span tts:color="red">there</span>,<br/>
        second   line &amp; more&nbsp;!</p>
      <p begin="3s" dur="500ms" ttm:agent="a2 a1">Short.</p>
      <p begin="100f" end="125f">Frames.</p>
      <p begin="50000000t" end="00:00:06:05">Ticks and clock frames.</p>
      <p begin="7s" end="8s">NARRATOR: a prefix</p>
    </div>
    <div timeContainer="seq" begin="1m">
      <p dur="1s">one</p>
      <p dur="2s">two</p>
    </div>
  </body>
</tt>`
	cues, err := ParseTTML([]byte(in))
	require.NoError(t, err)
	want := []Cue{
		{SourceLine: 12, Start: ms(11000), End: ms(12500), Character: "Mary Ann", Text: "Hello there,\nsecond line & more\u00a0!"},
		{SourceLine: 14, Start: ms(13000), End: ms(13500), Character: "JONAH", Text: "Short."},
		{SourceLine: 15, Start: ms(14000), End: ms(15000), Text: "Frames."},
		{SourceLine: 16, Start: ms(15000), End: ms(16200), Text: "Ticks and clock frames."},
		{SourceLine: 17, Start: ms(17000), End: ms(18000), Character: "NARRATOR", Text: "a prefix"},
		{SourceLine: 20, Start: time.Minute, End: time.Minute + ms(1000), Text: "one"},
		{SourceLine: 21, Start: time.Minute + ms(1000), End: time.Minute + ms(3000), Text: "two"},
	}
	require.Equal(t, want, cues)
	require.Equal(t, FormatTTML, Detect("upload.bin", []byte(in)))
}

func TestTTMLProblems(t *testing.T) {
	t.Parallel()
	p := func(line int, key string, args ...any) Problem { return Problem{Line: line, Key: key, Args: args} }
	tests := []struct {
		name string
		in   string
		want []Problem
	}{
		{"bad time", ttmlHead + "<body><div>\n<p begin=\"1x\" end=\"2s\">a</p>\n<p begin=\"1s\" end=\"00:00:99.000\">b</p>\n</div></body></tt>",
			[]Problem{p(11, "script.ttml_bad_time", "1x"), p(12, "script.ttml_bad_time", "00:00:99.000")}},
		{"no end", ttmlHead + "<body>\n<p begin=\"1s\">a</p></body></tt>", []Problem{p(11, "script.ttml_no_end")}},
		{"not well-formed", ttmlHead + "<body>\n<p begin=\"1s\" end=\"2s\">a</div></body></tt>",
			[]Problem{p(11, "script.ttml_syntax", "element <p> closed by </div>")}},
		{"wrong root", "<?xml version=\"1.0\"?>\n<html><tt/></html>", []Problem{p(2, "script.ttml_root", "html")}},
		{"bad rate", "<tt xmlns:ttp=\"x\" ttp:frameRate=\"0\"><body/></tt>", []Problem{p(1, "script.ttml_rates")}},
		{"end before start", ttmlHead + "<body>\n<p begin=\"3s\" end=\"2s\">a</p></body></tt>", nil},
		{"control character", ttmlHead + "<body>\n<p begin=\"1s\" end=\"2s\">a&#x85;b</p></body></tt>", []Problem{p(11, "script.control_char", "U+0085")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cues, err := ParseTTML([]byte(tt.in))
			if tt.want == nil {
				// An end before the begin is clipped to a zero-length cue, as players do.
				require.NoError(t, err)
				require.Equal(t, []string{FlagZeroLength}, cues[0].Flags)
				return
			}
			require.Equal(t, tt.want, problems(t, err))
		})
	}
}

// TestPublicTestFiles reads files from public test suites (testdata/public/README.md).
func TestPublicTestFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file       string
		format     Format
		texts      []string
		characters []string
	}{
		{"wpt-regions-old.vtt", FormatVTT, []string{"text1", "text2"}, []string{"", ""}},
		{"wpt-embedded-style-media-queries.vtt", FormatVTT, []string{"This is a test subtitle", "Here is a second subtitle"}, []string{"Voice1", "Voice2"}},
		{"wpt-settings-multiple.vtt", FormatVTT, []string{"text1", "text2"}, []string{"", ""}},
		{"imsc-br-in-p-001.ttml", FormatTTML, []string{"Two-\nline Subtitle."}, []string{""}},
		{"imsc-TimeExpressions001.ttml", FormatTTML, []string{"1.2s = 1.2s", "1.2m = 72s", "1.2h = 4320s", "24f = 1.001s", "120t = 2s",
			"01:02:03 = 3723s", "01:02:03.235 = 3723.235s", "01:02:03.2350 = 3723.235s", "01:02:03:20 = 3723.83416667s",
			"100:00:00.1 = 360000.1s", "100:00:00:100 = 360000s"}, nil},
		{"imsc-BasicTiming010.ttml", FormatTTML, []string{"This text must appear at 10 seconds and disappear at 24.4 seconds\n" +
			"This text must appear at 25 seconds and disappear at 35 seconds"}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			data := readTestdata(t, "public/"+tt.file)
			require.Equal(t, tt.format, Detect("upload", data))
			cues, err := Parse("upload", data)
			require.NoError(t, err)
			require.Len(t, cues, len(tt.texts))
			for i, c := range cues {
				require.Equal(t, tt.texts[i], c.Text)
				if tt.characters != nil {
					require.Equal(t, tt.characters[i], c.Character)
				}
			}
		})
	}
	// The durations of the seq container add up, each in its unit.
	cues, err := Parse("upload", readTestdata(t, "public/imsc-TimeExpressions001.ttml"))
	require.NoError(t, err)
	durs := []time.Duration{ms(1200), ms(72000), ms(4320000), ms(1001), ms(2000), ms(3723000), ms(3723235), ms(3723235), ms(3723834)}
	var at time.Duration
	for i, d := range durs {
		require.Equal(t, at, cues[i].Start, "cue %d", i)
		require.Equal(t, at+d, cues[i].End, "cue %d", i)
		at += d
	}
}

// TestTTMLSpanTiming: a paragraph is one cue whatever timing its spans have (see
// parseTTML); the public roll-up sample, with no end anywhere, is refused on its
// paragraph's line.
func TestTTMLSpanTiming(t *testing.T) {
	t.Parallel()
	cues, err := Parse("upload", readTestdata(t, "public/imsc-BasicTiming010.ttml"))
	require.NoError(t, err)
	require.Equal(t, ms(10000), cues[0].Start, "the paragraph's begin")
	require.Equal(t, ms(40000), cues[0].End, "the paragraph's end, not its last span's (35 s)")

	_, err = Parse("upload", readTestdata(t, "public/imsc-BasicTiming011.ttml"))
	require.Equal(t, []Problem{p(21, "script.ttml_no_end")}, problems(t, err))

	in := ttmlHead + `  <body><div begin="1m">
      <p><span begin="1s" end="2s">Hello</span> <span begin="2s" end="3.5s">world,</span><br/><span begin="2.5s" end="3s">Mary.</span></p>
      <p begin="10s" end="12s">Shown <span begin="1s">later</span> <span begin="2s">never</span> <span begin="5s" end="6s">nor this</span>.</p>
      <p begin="20s" end="22s" timeContainer="seq"><span dur="1s">one</span> <span dur="1s">two</span> <span dur="1s">three</span></p>
      <p begin="30s" end="30s">zero <span begin="0s">length</span></p>
    </div></body>
</tt>`
	cues, err = ParseTTML([]byte(in))
	require.NoError(t, err)
	require.Equal(t, []Cue{
		{SourceLine: 11, Start: time.Minute + ms(1000), End: time.Minute + ms(3500), Text: "Hello world,\nMary."},
		{SourceLine: 12, Start: time.Minute + ms(10000), End: time.Minute + ms(12000), Text: "Shown later ."},
		{SourceLine: 13, Start: time.Minute + ms(20000), End: time.Minute + ms(22000), Text: "one two", Flags: nil},
		{SourceLine: 14, Start: time.Minute + ms(30000), End: time.Minute + ms(30000), Text: "zero length", Flags: []string{FlagZeroLength}},
	}, cues)
}

// TestTTMLSMPTETimeBase reads SMPTE timecodes as TTML converts them: labels counted at
// the nominal frame rate, less the dropped ones, at the effective rate. The figures
// are those of TTML 1 §6.2.4 and SMPTE ST 12-1: 00:01:00;02 drop-frame is frame 1800,
// 00:10:00;00 frame 17982.
func TestTTMLSMPTETimeBase(t *testing.T) {
	t.Parallel()
	doc := func(params, begin, end string) string {
		return `<tt xmlns="http://www.w3.org/ns/ttml" xmlns:ttp="http://www.w3.org/ns/ttml#parameter" ` + params +
			`><body><div><p begin="` + begin + `" end="` + end + `">x</p></div></body></tt>`
	}
	ntsc := `ttp:timeBase="smpte" ttp:frameRate="30" ttp:frameRateMultiplier="1000 1001"`
	at := func(frames, rate float64) time.Duration {
		return time.Duration(math.Round(frames/rate*1000)) * time.Millisecond
	}
	tests := []struct {
		name, params, begin, end string
		start, stop              time.Duration
	}{
		{"non-drop", ntsc + ` ttp:dropMode="nonDrop"`, "01:02:03:20", "01:02:04:00", at(3723*30+20, 30000.0/1001), at(3724*30, 30000.0/1001)},
		{"non-drop by default", ntsc, "01:00:00:00", "01:00:00:15", ms(3603600), at(108015, 30000.0/1001)},
		{"drop NTSC", ntsc + ` ttp:dropMode="dropNTSC"`, "00:01:00:02", "00:10:00:00", at(1800, 30000.0/1001), at(17982, 30000.0/1001)},
		{"drop NTSC, an hour", ntsc + ` ttp:dropMode="dropNTSC"`, "01:00:00:00", "01:00:00:01", at(107892, 30000.0/1001), at(107893, 30000.0/1001)},
		{"drop PAL", ntsc + ` ttp:dropMode="dropPAL"`, "00:02:00:04", "00:20:00:00", at(3600, 30000.0/1001), at(36000-9*4, 30000.0/1001)},
		{"25 fps", `ttp:timeBase="smpte" ttp:frameRate="25"`, "10:00:00:12", "10:00:01:00", 10*time.Hour + ms(480), 10*time.Hour + ms(1000)},
		{"media time base ignores dropMode", `ttp:frameRate="30" ttp:frameRateMultiplier="1000 1001" ttp:dropMode="dropNTSC"`,
			"00:01:00:02", "00:01:01:00", time.Minute + at(2, 30000.0/1001), time.Minute + ms(1000)},
		{"offsets in smpte", ntsc, "30f", "2s", at(30, 30000.0/1001), 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cues, err := ParseTTML([]byte(doc(tt.params, tt.begin, tt.end)))
			require.NoError(t, err)
			require.Equal(t, tt.start, cues[0].Start)
			require.Equal(t, tt.stop, cues[0].End)
		})
	}
	for _, params := range []string{`ttp:timeBase="wall"`, `ttp:timeBase="smpte" ttp:dropMode="drop"`} {
		_, err := ParseTTML([]byte(doc(params, "1s", "2s")))
		require.Equal(t, []Problem{p(1, "script.ttml_rates")}, problems(t, err), params)
	}
}

// TestTTMLEncodings reads the same TTML document in UTF-16 (with its byte-order mark
// and an XML declaration saying so) and in GB18030 as its UTF-8 twin.
func TestTTMLEncodings(t *testing.T) {
	t.Parallel()
	doc := `<?xml version="1.0" encoding="%s"?>
<tt xmlns="http://www.w3.org/ns/ttml"><body><div>
<p begin="1s" end="2s">小明：你好，今天天气真好。</p>
<p begin="2.5s" end="4s">同学们，<br/>请把书翻到第三页。</p>
</div></body></tt>`
	want, err := ParseTTML([]byte(fmt.Sprintf(doc, "UTF-8")))
	require.NoError(t, err)
	require.Len(t, want, 2)
	require.Equal(t, "小明", want[0].Character)
	got, err := ParseTTML(utf16LE(fmt.Sprintf(doc, "UTF-16")))
	require.NoError(t, err)
	require.Equal(t, want, got)
	gb, err := simplifiedchinese.GB18030.NewEncoder().String(fmt.Sprintf(doc, "GB18030"))
	require.NoError(t, err)
	res, err := Import("subs.ttml", []byte(gb), ImportOpts{})
	require.NoError(t, err)
	require.Equal(t, EncodingGB18030, res.Encoding)
	require.Equal(t, FormatTTML, res.Format)
	require.Equal(t, want, res.Cues)
}
