package script

import (
	"bytes"
	"io"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"dubstudio/i18n"
)

// The seed corpora are in testdata/fuzz/<FuzzName>/.

func FuzzParseSRT(f *testing.F) { fuzzParse(f, ParseSRT, WriteSRT, ParseSRT, FormatSRT) }
func FuzzParseVTT(f *testing.F) { fuzzParse(f, ParseVTT, WriteVTT, ParseVTT, FormatVTT) }
func FuzzParseCSV(f *testing.F) { fuzzParse(f, ParseCSV, WriteCSV, ParseCSV, FormatCSV) }

// FuzzParseTTML checks the TTML reader; what it accepts is written as WebVTT (TTML
// has no writer) and must read back the same.
func FuzzParseTTML(f *testing.F) { fuzzParse(f, ParseTTML, WriteVTT, ParseVTT, FormatVTT) }

// fuzzParse checks that parse never panics, that what it accepts is sound, that what
// it rejects comes with problems that can be shown, and that writing what it accepted
// and reading that again (reparse) gives the same cues.
func fuzzParse(f *testing.F, parse func([]byte) ([]Cue, error), write func(io.Writer, []Cue) error,
	reparse func([]byte) ([]Cue, error), format Format) {
	f.Fuzz(func(t *testing.T, data []byte) {
		cues, err := parse(data)
		if err != nil {
			require.Nil(t, cues)
			ps := problems(t, err)
			require.NotEmpty(t, ps)
			lines := bytes.Count(data, []byte{'\n'}) + bytes.Count(data, []byte{'\r'}) + 1
			for _, p := range ps {
				require.GreaterOrEqual(t, p.Line, 1, "%+v", p)
				require.LessOrEqual(t, p.Line, lines, "%+v", p)
				require.True(t, i18n.Has(p.Key), "%+v", p)
			}
			return
		}
		require.NotEmpty(t, cues)
		require.LessOrEqual(t, len(cues), MaxCues)
		for _, c := range cues {
			require.GreaterOrEqual(t, c.SourceLine, 1)
			require.GreaterOrEqual(t, c.Start, 0*c.Start)
			require.GreaterOrEqual(t, c.End, c.Start)
			require.Zero(t, c.Start%1e6, "millisecond precision")
			require.Zero(t, c.End%1e6, "millisecond precision")
			for _, s := range []string{c.Text, c.Character, c.Emotion} {
				require.True(t, utf8.ValidString(s), "%q", s)
				for _, r := range s {
					require.False(t, unicode.IsControl(r) && r != '\n' && r != '\t', "control character in %q", s)
				}
			}
			require.LessOrEqual(t, utf8.RuneCountInString(c.Text), MaxTextLen)
		}
		var buf bytes.Buffer
		require.NoError(t, write(&buf, cues))
		again, err := reparse(buf.Bytes())
		require.NoError(t, err, "written:\n%s", buf.String())
		require.Equal(t, keepable(cues, format), keepable(again, format), "written:\n%s", buf.String())
	})
}
