package script

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cue counts below were taken with FFmpeg 5.1 as an independent parser
// (`ffprobe -v error -show_packets -of csv FILE | grep -c ^packet,subtitle`, and
// `ffmpeg -i FILE -f srt - | grep -c -- -->`, which agree) and checked against
// `grep -c -- --> FILE`. The exception is tos-zh.srt: FFmpeg reads 76 cues (with
// -f srt; it cannot probe the file), because it drops the first one, which has no
// number and an end time without milliseconds ("00:00:04,000 --> 00:00:06"); the
// file has 77 timing lines, and the studio reads that end as 6 s.
const (
	tosCues      = 76 // Tears of Steel, every language here
	tosZhCues    = 77
	sintelFrCues = 26
	edDeCues     = 77
	// In elephants-dream-de.vtt, `grep -c '^<v Proog>'` and `grep -c '^<v Emo>'`: each
	// cue is one line opened by the voice that speaks first; `grep -c '</v><v'` finds the
	// four cues where a second voice answers, all opened by Emo.
	edDeProog, edDeEmo, edDeTwoVoices = 48, 29, 4
)

// realFilm is one file of testdata/public (see its README for where each comes from).
type realFilm struct {
	file     string
	format   Format
	cues     int
	voices   map[string]int // cues per character; nil: no cue has one
	twins    map[string]string
	language string
}

var realFilms = []realFilm{
	{file: "tos-en.srt", format: FormatSRT, cues: tosCues, language: "en"},
	{file: "tos-de.srt", format: FormatSRT, cues: tosCues, language: "de",
		twins: map[string]string{"tos-de.iso-8859-15.srt": EncodingISO885915}},
	{file: "tos-fr.srt", format: FormatSRT, cues: tosCues, language: "fr",
		twins: map[string]string{"tos-fr.windows-1252.srt": EncodingWindows1252}},
	{file: "tos-ru.srt", format: FormatSRT, cues: tosCues, language: "ru",
		twins: map[string]string{"tos-ru.windows-1251.srt": EncodingWindows1251}},
	{file: "tos-zh.srt", format: FormatSRT, cues: tosZhCues, language: "zh",
		twins: map[string]string{"tos-zh.gb18030.srt": EncodingGB18030}},
	{file: "sintel-fr.vtt", format: FormatVTT, cues: sintelFrCues, language: "fr",
		twins: map[string]string{"sintel-fr.windows-1252.vtt": EncodingWindows1252}},
	{file: "elephants-dream-de.vtt", format: FormatVTT, cues: edDeCues, language: "de",
		voices: map[string]int{"Proog": edDeProog, "Emo": edDeEmo},
		twins:  map[string]string{"elephants-dream-de.windows-1252.vtt": EncodingWindows1252}},
}

// TestRealFilms imports subtitles of the Blender Foundation's open films in five
// languages: each gives the number of cues FFmpeg counts, the characters its voice
// spans name and no others (no line of dialogue is taken for a "NAME:" label: the
// German "Also:" stays text), every word of the file in order, and each legacy-encoded
// twin is detected and gives the cues of its UTF-8 original, byte for byte.
func TestRealFilms(t *testing.T) {
	t.Parallel()
	languages := map[string]bool{}
	formats := map[Format]bool{}
	for _, f := range realFilms {
		languages[f.language], formats[f.format] = true, true
		t.Run(f.file, func(t *testing.T) {
			t.Parallel()
			data := readTestdata(t, "public/"+f.file)
			res, err := Import(f.file, data, ImportOpts{})
			require.NoError(t, err)
			require.Equal(t, f.format, res.Format)
			require.Equal(t, EncodingUTF8, res.Encoding)
			require.Len(t, res.Cues, f.cues)

			voices := map[string]int{}
			var text []string
			for _, c := range res.Cues {
				if c.Character != "" {
					voices[c.Character]++
				}
				text = append(text, c.Text)
			}
			if f.voices == nil {
				require.Empty(t, voices, "no cue of %s names a speaker", f.file)
			} else {
				require.Equal(t, f.voices, voices)
			}
			require.Equal(t, fileText(string(data), f.format), strings.Join(text, "\n"), "every word, in order")

			for twin, enc := range f.twins {
				data := readTestdata(t, "public/"+twin)
				res, err := Import(twin, data, ImportOpts{})
				require.NoError(t, err, twin)
				want := enc
				if enc == EncodingISO885915 {
					want = EncodingWindows1252 // the text uses none of the code points where they differ
				}
				require.Equal(t, want, res.Encoding, twin)
				orig, err := Import(f.file, readTestdata(t, "public/"+f.file), ImportOpts{})
				require.NoError(t, err)
				require.Equal(t, orig.Cues, res.Cues, twin)

				res, err = Import(twin, data, ImportOpts{Encoding: enc})
				require.NoError(t, err, "%s read as %s", twin, enc)
				require.Equal(t, orig.Cues, res.Cues, twin)
			}
		})
	}
	require.GreaterOrEqual(t, len(languages), 4)
	require.GreaterOrEqual(t, len(formats), 2)
}

// fileText is the text of a subtitle file's cues, one line each, as a reader who knows
// nothing of the studio's parser would take it: for SRT every line that is not blank, a
// cue number or a timing line; for WebVTT the lines after each timing line up to the
// next blank, without the header and NOTE blocks; tags (<...>) removed, lines trimmed.
// The files here have no markup beyond tags, and no text line that is only digits.
func fileText(data string, format Format) string {
	tag := regexp.MustCompile(`<[^>]*>`)
	number := regexp.MustCompile(`^[0-9]+$`)
	var out []string
	inCue := false
	for l := range strings.SplitSeq(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(data), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(l, "\ufeff"))
		switch {
		case strings.Contains(l, "-->"):
			inCue = true
		case l == "":
			inCue = false
		case format == FormatSRT && number.MatchString(l):
		case format == FormatSRT || inCue:
			if l = strings.TrimSpace(tag.ReplaceAllString(l, "")); l != "" {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestRealFilmTwoVoices checks the four cues of the German Elephants Dream where Emo
// asks and Proog answers in one cue (<v Emo>Warum? - </v><v Proog>Sofort!</v>): they
// keep both turns' text and the first voice, and are flagged as dialogue, to split;
// the cues of one voice are not.
func TestRealFilmTwoVoices(t *testing.T) {
	t.Parallel()
	cues, err := Parse("elephants-dream-de.vtt", readTestdata(t, "public/elephants-dream-de.vtt"))
	require.NoError(t, err)
	var two []Cue
	for _, c := range cues {
		if strings.Contains(strings.Join(c.Flags, " "), FlagDialogue) {
			two = append(two, c)
		}
	}
	require.Len(t, two, edDeTwoVoices)
	require.Equal(t, Cue{SourceLine: 139, Start: 5*60e9 + 44917e6, End: 5*60e9 + 46583e6, Character: "Emo",
		Text: "Warum? - Sofort!", Flags: []string{FlagDialogue}}, two[0])
	for _, c := range two {
		require.Equal(t, "Emo", c.Character)
	}

	// The same in SRT, which the studio reads voice spans in too; one name twice is one voice.
	cues, err = ParseSRT([]byte("1\n00:00:01,000 --> 00:00:02,000\n<v Emo>Warum? - </v><v Proog>Sofort!</v>\n\n" +
		"2\n00:00:03,000 --> 00:00:04,000\n<v Emo>Ja.</v>\n<v Emo>Gut.</v>\n"))
	require.NoError(t, err)
	require.Equal(t, []string{FlagDialogue}, cues[0].Flags)
	require.Nil(t, cues[1].Flags)
	require.Equal(t, "Emo", cues[1].Character)
}

// TestDoubledLineBreaks covers the shape of Blender's Chinese Tears of Steel file,
// where every line is followed by an empty one: a blank line is a line break, and a
// run of them ends the cue. Problems are reported on the file's own lines, and a
// normal file with a cue whose text is cut off by a blank line is still refused.
func TestDoubledLineBreaks(t *testing.T) {
	t.Parallel()
	doubled := "1\r\n\r\n00:00:01,000 --> 00:00:02,000\r\n\r\n你好\r\n\r\n第二行\r\n\r\n \r\n\r\n" +
		"2\r\n\r\n00:00:03,000 --> 00:00:04,000\r\n\r\n再见\r\n\r\n"
	cues, err := ParseSRT([]byte(doubled))
	require.NoError(t, err)
	require.Equal(t, []Cue{
		{SourceLine: 1, Start: 1e9, End: 2e9, Text: "你好\n第二行"},
		{SourceLine: 11, Start: 3e9, End: 4e9, Text: "再见"},
	}, cues)

	_, err = ParseSRT([]byte(strings.Replace(doubled, "00:00:04,000", "00:00:0x,000", 1)))
	require.Equal(t, []Problem{{Line: 13, Key: "script.bad_timecode", Args: []any{"00:00:0x,000"}}}, problems(t, err))

	_, err = ParseSRT([]byte("1\n00:00:01,000 --> 00:00:02,000\n\nstray text\n"))
	require.Equal(t, []Problem{{Line: 4, Key: "script.missing_timecode"}}, problems(t, err))
}

// TestWindows1251 checks that Russian in Windows-1251 is told from Western text in
// Windows-1252, where every byte also decodes: Russian words are runs of Cyrillic
// letters there, Western accents decode to lone Cyrillic letters among Latin ones.
func TestWindows1251(t *testing.T) {
	t.Parallel()
	srt := func(text []byte) []byte {
		return append([]byte("1\n00:00:01,000 --> 00:00:02,000\n"), text...)
	}
	ru := []byte{0xDF, 0x20, 0xE7, 0xED, 0xE0, 0xFE, 0x2E} // "Я знаю." in Windows-1251
	res, err := Import("ru.srt", srt(ru), ImportOpts{})
	require.NoError(t, err)
	require.Equal(t, EncodingWindows1251, res.Encoding)
	require.Equal(t, "Я знаю.", res.Cues[0].Text)

	de := []byte("Gr\xf6\xdfe, s\xfc\xdf und Caf\xe9 cr\xe9\xe9e") // umlauts and ß side by side: "öß", "üß", "éé"
	res, err = Import("de.srt", srt(de), ImportOpts{})
	require.NoError(t, err)
	require.Equal(t, EncodingWindows1252, res.Encoding)
	require.Equal(t, "Größe, süß und Café créée", res.Cues[0].Text)
}
