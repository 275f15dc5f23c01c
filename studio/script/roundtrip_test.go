package script

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// keepable returns cues as a writer in format f can keep them: without source lines,
// without emotions in SRT, WebVTT and ASS, which have no place for them, in ASS with
// times rounded to the centisecond and commas of names as semicolons, and with the
// dialogue flag only where the text's dashes give it (the flags found again): a cue
// flagged for two voice spans has one character, and a writer gives it one span.
func keepable(cues []Cue, f Format) []Cue {
	out := make([]Cue, len(cues))
	for i, c := range cues {
		c.SourceLine = 0
		c.Flags = slices.DeleteFunc(slices.Clone(c.Flags), func(s string) bool { return s == FlagDialogue })
		if f != FormatCSV {
			c.Emotion = ""
		}
		if f == FormatASS {
			c.Start, c.End = centi(c.Start), centi(c.End)
			c.Character = strings.ReplaceAll(c.Character, ",", ";")
		}
		out[i] = c
	}
	flag(out)
	return out
}

// centi rounds d to the centisecond as WriteASS does.
func centi(d time.Duration) time.Duration {
	const cs = 10 * time.Millisecond
	r := (d + cs/2).Truncate(cs)
	if r > MaxTimecode {
		r = d.Truncate(cs)
	}
	return r
}

var allFormats = []Format{FormatSRT, FormatVTT, FormatCSV, FormatASS}

func TestRoundTripTestdata(t *testing.T) {
	t.Parallel()
	for name, want := range testdataCues {
		for _, f := range allFormats {
			t.Run(name+" as "+string(f), func(t *testing.T) {
				t.Parallel()
				var buf bytes.Buffer
				require.NoError(t, Write(&buf, f, want))
				require.Equal(t, f, Detect("export", buf.Bytes()))
				got, err := Parse("export", buf.Bytes())
				require.NoError(t, err, buf.String())
				require.Equal(t, keepable(want, f), keepable(got, f))
			})
		}
	}
}

func TestRoundTripTricky(t *testing.T) {
	t.Parallel()
	cues := []Cue{
		{Start: 0, End: ms(1), Character: "Bob!", Text: "Not a prefix name"},
		{Start: ms(1), End: ms(2), Character: "A: B", Text: "colon in the name"},
		{Start: ms(2), End: ms(3), Character: "Tom & Jerry", Text: "&amp; stays &amp;; < and > stay"},
		{Start: ms(3), End: ms(4), Character: "ALICE", Text: ""},
		{Start: ms(4), End: ms(5), Character: "ALICE", Text: "BOB: not the speaker"},
		{Start: ms(5), End: ms(6), Text: "a --> b\n42\n\"quoted\", 'single'"},
		{Start: ms(6), End: ms(7), Character: "小明", Text: "你好😀\n第二行"},
		{Start: ms(7), End: ms(8), Character: "<v Eve>", Text: "tab\there"},
		{Start: 99*time.Hour + ms(59_999), End: 499*time.Hour + ms(1), Character: "Narrator (V.O.)", Text: "late"},
	}
	flag(cues)
	for _, f := range allFormats {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			require.NoError(t, Write(&buf, f, cues))
			got, err := Parse("export", buf.Bytes())
			require.NoError(t, err, buf.String())
			require.Equal(t, keepable(cues, f), keepable(got, f))
		})
	}
}

func TestWriteOutput(t *testing.T) {
	t.Parallel()
	cues := []Cue{
		{Start: ms(1200), End: ms(3400), Character: "MARTHA", Text: "  You said <midnight>\n\n& \"now\"  ", Emotion: "angry"},
		{Start: time.Hour, End: time.Hour + ms(500), Character: "Mr. X?", Text: "Who, me?"},
	}
	var srt, vtt, csvOut bytes.Buffer
	require.NoError(t, WriteSRT(&srt, cues))
	require.NoError(t, WriteVTT(&vtt, cues))
	require.NoError(t, WriteCSV(&csvOut, cues))
	require.Equal(t, "1\r\n00:00:01,200 --> 00:00:03,400\r\nMARTHA: You said <midnight>\r\n& \"now\"\r\n\r\n"+
		"2\r\n01:00:00,000 --> 01:00:00,500\r\n<v Mr. X?>Who, me?\r\n\r\n", srt.String())
	require.Equal(t, "WEBVTT\n\n00:00:01.200 --> 00:00:03.400\n<v MARTHA>You said &lt;midnight&gt;\n&amp; \"now\"\n\n"+
		"01:00:00.000 --> 01:00:00.500\n<v Mr. X?>Who, me?\n", vtt.String())
	require.Equal(t, "\uFEFFstart,end,character,text,emotion\n"+
		"00:00:01.200,00:00:03.400,MARTHA,\"You said <midnight>\n& \"\"now\"\"\",angry\n"+
		"01:00:00.000,01:00:00.500,Mr. X?,\"Who, me?\",\n", csvOut.String())
}

func TestWriteRejectsInvalidCues(t *testing.T) {
	t.Parallel()
	for _, f := range allFormats {
		for _, c := range []Cue{{Start: ms(2), End: ms(1)}, {Start: -ms(1), End: ms(1)}} {
			var buf bytes.Buffer
			err := Write(&buf, f, []Cue{{Start: 0, End: ms(1)}, c})
			require.ErrorIs(t, err, ErrInvalidCue)
			require.ErrorContains(t, err, "cue 2")
			require.Zero(t, buf.Len(), "nothing is written when a cue is invalid")
		}
	}
	require.ErrorContains(t, Write(&bytes.Buffer{}, FormatTTML, nil), `unknown format "ttml"`)
}

type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestWriteReportsIOErrors(t *testing.T) {
	t.Parallel()
	for _, f := range allFormats {
		err := Write(failingWriter{}, f, []Cue{{Start: 0, End: ms(1), Text: "x"}})
		require.ErrorIs(t, err, errDiskFull, string(f))
	}
}

func TestContentType(t *testing.T) {
	t.Parallel()
	require.Equal(t, "application/x-subrip; charset=utf-8", FormatSRT.ContentType())
	require.Equal(t, "text/vtt; charset=utf-8", FormatVTT.ContentType())
	require.Equal(t, "text/csv; charset=utf-8", FormatCSV.ContentType())
	require.Equal(t, "text/x-ssa; charset=utf-8", FormatASS.ContentType())
	require.Equal(t, "application/octet-stream", FormatTTML.ContentType())
}
