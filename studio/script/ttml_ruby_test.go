package script

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTTMLRubyPublic reads the ruby samples of the W3C IMSC 1.1 tests: each cue keeps
// the base text and leaves out the annotations (ruby text, text containers, the
// fallback delimiters), and the white space between a container's parts.
func TestTTMLRubyPublic(t *testing.T) {
	t.Parallel()
	for file, want := range map[string][]string{
		// Two text containers (before and after) on one base, text after the container.
		"imsc-ruby002.ttml": {"東南の方角"},
		// A container between line breaks.
		"imsc-ruby003.ttml": {"Lorem ipsum\n利用許諾\ndolor sit amet"},
		// Delimiters around the ruby text, for renderers without ruby.
		"imsc-ruby004.ttml": {"利用許諾"},
		// With and without base and text containers, white space inside a base kept.
		"imsc-ruby005.ttml": slices.Repeat([]string{strings.Repeat("base ", 2) + "base"}, 6),
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			data := readTestdata(t, "public/"+file)
			require.Equal(t, FormatTTML, Detect("upload", data))
			cues, err := Parse("upload", data)
			require.NoError(t, err)
			var texts []string
			for _, c := range cues {
				texts = append(texts, c.Text)
			}
			require.Equal(t, want, texts)
		})
	}
}

// TestTTMLRuby: ruby set inline and through referenced styles (chained, the later
// reference winning, a cycle ignored), a bare ruby text span, a line break inside an
// annotation, timed annotations as karaoke files have them, and a speaker's agent.
func TestTTMLRuby(t *testing.T) {
	t.Parallel()
	in := `<?xml version="1.0" encoding="UTF-8"?>
<tt xmlns="http://www.w3.org/ns/ttml" xmlns:tts="http://www.w3.org/ns/ttml#styling"
    xmlns:ttm="http://www.w3.org/ns/ttml#metadata" xml:lang="ja">
  <head>
    <metadata>
      <ttm:agent xml:id="k" type="character"><ttm:name>健太</ttm:name></ttm:agent>
    </metadata>
    <styling>
      <style xml:id="rc" tts:ruby="container"/>
      <style xml:id="rb" tts:ruby="base"/>
      <style xml:id="rt" tts:ruby="text" tts:fontSize="50%"/>
      <style xml:id="small" tts:fontSize="50%"/>
      <style xml:id="annotation" style="small rt"/>
      <style xml:id="loop1" style="loop2"/>
      <style xml:id="loop2" style="loop1"/>
    </styling>
  </head>
  <body>
    <div>
      <p begin="1s" end="3s" ttm:agent="k"><span style="rc"><span style="rb">今日</span><span style="annotation">きょう</span></span>は<span tts:ruby="container"> <span tts:ruby="base">晴</span> <span tts:ruby="text">は</span> </span>れ。</p>
      <p begin="4s" end="5s">漢字<span tts:ruby="text">かんじ</span>です</p>
      <p begin="6s" end="7s"><span tts:ruby="container"><span tts:ruby="base">明日</span><span tts:ruby="textContainer"><span tts:ruby="text">あ<br/>した</span></span></span>も</p>
      <p begin="8s" end="9s"><span style="rt rb">残る</span><span style="rb rt">消える</span><span style="loop1">回る</span></p>
      <p><span tts:ruby="container"><span tts:ruby="base" begin="10s" end="11s">歌</span><span tts:ruby="text" begin="10s" end="10.5s">うた</span></span><span begin="11s" end="12s">う</span></p>
    </div>
  </body>
</tt>`
	cues, err := ParseTTML([]byte(in))
	require.NoError(t, err)
	want := []Cue{
		{SourceLine: 20, Start: ms(1000), End: ms(3000), Character: "健太", Text: "今日は晴れ。"},
		{SourceLine: 21, Start: ms(4000), End: ms(5000), Text: "漢字です"},
		{SourceLine: 22, Start: ms(6000), End: ms(7000), Text: "明日も"},
		{SourceLine: 23, Start: ms(8000), End: ms(9000), Text: "残る回る"},
		{SourceLine: 24, Start: ms(10000), End: ms(12000), Text: "歌う"},
	}
	require.Equal(t, want, cues)
}
