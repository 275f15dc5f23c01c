package script

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStripTags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, text, voice string
	}{
		{"plain text", "plain text", ""},
		{"<i>italic</i> and <B>bold</B> and <u>u</u>", "italic and bold and u", ""},
		{`<font color="#ff0000" size="3">red</font>`, "red", ""},
		{"{\\an8}top {\\i1}it{\\i0}", "top it", ""},
		{"<v Alice>Hi</v>", "Hi", " Alice"},
		{"<v.loud.first Mary Ann>Hi <v Bob>there", "Hi there", " Mary Ann"},
		{"<c.yellow.bg_blue>x</c> <lang en>y</lang> <ruby>漢<rt>kan</rt></ruby>", "x y 漢kan", ""},
		{"karaoke <00:00:01.000>one <01:02.500>two", "karaoke one two", ""},
		{"<laughs> a < b > c <br> <iframe> <bold>", "<laughs> a < b > c <br> <iframe> <bold>", ""},
		{"<<i>i>nested</i>", "nested", ""},
		{"{{\\a}\\b}x", "x", ""},
		{"{not a tag} {an8}", "{not a tag} {an8}", ""},
		{"a <i", "a <i", ""},
		{"<<<i>i>i>x</i>", "x", ""},
		{"<{\\x}i>y", "y", ""},
		{"{\\<i>}z", "z", ""},
		{"<v " + strings.Repeat("n", maxTagLen) + ">long", "<v " + strings.Repeat("n", maxTagLen) + ">long", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			text, voice := stripTags(tt.in)
			require.Equal(t, tt.text, text)
			require.Equal(t, tt.voice, voice)
		})
	}
}

// BenchmarkStripTagsNested shows that stripping stays linear on hostile input.
func BenchmarkStripTagsNested(b *testing.B) {
	line := strings.Repeat("<", 50000) + strings.Repeat("i>", 50000)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if text, _ := stripTags(line); text != "" {
			b.Fatal(text)
		}
	}
}

func TestSplitNamePrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, name, rest string
		ok             bool
	}{
		{"ALICE: Hello", "ALICE", "Hello", true},
		{"Alice: Hello: again", "Alice", "Hello: again", true},
		{"ALICE:", "ALICE", "", true},
		{"ALICE :  Hello", "ALICE", "Hello", true},
		{"Dr. Who: Hi", "Dr. Who", "Hi", true},
		{"Guard #2: Halt", "Guard #2", "Halt", true},
		{"Narrator (V.O.): Once", "Narrator (V.O.)", "Once", true},
		{"Jean-Luc O'Neil: Engage", "Jean-Luc O'Neil", "Engage", true},
		{"小明：你好", "小明", "你好", true},
		{"小明: 你好", "小明", "你好", true},
		{"Zoë: ça va", "Zoë", "ça va", true},
		{"The Old Man Of The Sea: too many words", "", "", false},
		{"10:30 tomorrow", "", "", false},
		{"10: thirty", "", "", false},
		{"See https://example.org", "", "", false},
		{"Well, here's the thing: no", "", "", false},
		{"Really?: no", "", "", false},
		{": nothing", "", "", false},
		{"-Bob: hi", "", "", false},
		{"<i>: hi", "", "", false},
		{"Ratio 2:1", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			name, rest, ok := splitNamePrefix(tt.in)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.name, name)
			require.Equal(t, tt.rest, rest)
		})
	}
}

func TestDecodeEntities(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a & b < c > d \"e\" 'f' \u00a0 \u200e\u200f", decodeEntities("a &amp; b &lt; c &gt; d &quot;e&quot; &apos;f&apos; &nbsp; &lrm;&rlm;"))
	require.Equal(t, "中 中 😀", decodeEntities("&#20013; &#x4e2d; &#x1F600;")) //nolint:dupword // one character, written in decimal and in hex
	require.Equal(t, "&#0; &#9; &#x7f; &#xD800; &#x110000; &bogus; & ;", decodeEntities("&#0; &#9; &#x7f; &#xD800; &#x110000; &bogus; & ;"))
}
