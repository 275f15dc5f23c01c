package script

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTTMLMetadataIsNotText reads paragraphs and spans that carry metadata, which
// TTML allows in them (<metadata> and the ttm: elements ttm:desc, ttm:title,
// ttm:copyright, ttm:agent): it describes the text and is never shown, so it is not
// the line. Nor is foreign markup in the head's metadata a paragraph.
func TestTTMLMetadataIsNotText(t *testing.T) {
	t.Parallel()
	head := strings.Replace(ttmlHead, "    </metadata>\n", "      <x:p xmlns:x=\"urn:example\" begin=\"9s\">not a line</x:p>\n    </metadata>\n", 1)
	in := head + `  <body><div>
      <p begin="1s" end="2s"><metadata><ebuttm:note xmlns:ebuttm="urn:ebu:tt:metadata">QC: check</ebuttm:note><br/></metadata>Hello<ttm:desc>sound of rain</ttm:desc> there</p>
      <p begin="3s" end="4s"><span><ttm:title>Song</ttm:title>La la</span><ttm:agent xml:id="x"><ttm:name>Nobody</ttm:name></ttm:agent> la.</p>
  </div></body>
</tt>`
	cues, err := ParseTTML([]byte(in))
	require.NoError(t, err)
	require.Equal(t, []Cue{
		{SourceLine: 12, Start: ms(1000), End: ms(2000), Text: "Hello there"},
		{SourceLine: 13, Start: ms(3000), End: ms(4000), Text: "La la la."},
	}, cues)
}

// TestTTMLTimesCannotOverflow nests many timed divisions whose begins add up past
// what a time.Duration holds: the paragraph is too late, never at a negative time.
func TestTTMLTimesCannotOverflow(t *testing.T) {
	t.Parallel()
	const depth = 5200 // 5200 × 499 h is past 2^63 ns
	doc := `<tt xmlns="http://www.w3.org/ns/ttml"><body>` + strings.Repeat(`<div begin="499h">`, depth) +
		`<p begin="0s" dur="1s">x</p>` + strings.Repeat(`</div>`, depth) + `</body></tt>`
	cues, err := ParseTTML([]byte(doc))
	require.Nil(t, cues)
	ps := problems(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "script.ttml_bad_time", ps[0].Key)
}

// TestTTMLLinesOfMultiLineTags reads paragraphs whose start tags have their
// attributes on lines of their own, as pretty-printers write them: a cue is on the
// line of its "<p", and a bad time on the line of its attribute.
func TestTTMLLinesOfMultiLineTags(t *testing.T) {
	t.Parallel()
	doc := `<?xml version="1.0" encoding="UTF-8"?>
<tt xmlns="http://www.w3.org/ns/ttml">
  <body>
    <div>
      <p xml:id="s1"
         begin="00:00:01.000"
         end="00:00:02.000"
         region="bottom">Hello</p>
      <p xml:id="s2"
         begin="00:00:03.000"
         end="00:00:0x.000"
         region="bottom">Bad</p>
    </div>
  </body>
</tt>`
	_, err := ParseTTML([]byte(doc))
	require.Equal(t, []Problem{p(11, "script.ttml_bad_time", "00:00:0x.000")}, problems(t, err))

	cues, err := ParseTTML([]byte(strings.Replace(doc, "0x.000", "04.000", 1)))
	require.NoError(t, err)
	require.Equal(t, 5, cues[0].SourceLine)
	require.Equal(t, 9, cues[1].SourceLine)

	_, err = ParseTTML([]byte(strings.Replace(doc, "\n         end=\"00:00:0x.000\"", "", 1)))
	require.Equal(t, []Problem{p(9, "script.ttml_no_end")}, problems(t, err))
}
