package tts

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// GlossaryEntry says how the engines should pronounce a term: a name, an acronym, a
// word written in pinyin.
type GlossaryEntry struct {
	Term   string
	Spoken string
}

// ApplyGlossary replaces each glossary term in text with its spoken form. Longer terms
// win over shorter ones they contain; matching is case-sensitive. In scripts with word
// spacing a term only matches whole words ("Ann" does not change "Anna"); in Chinese,
// Japanese and other text without spaces it matches anywhere. The result is what the
// engine is asked to say, and what a take records.
func ApplyGlossary(text string, glossary []GlossaryEntry) string {
	if len(glossary) == 0 || text == "" {
		return text
	}
	entries := make([]GlossaryEntry, 0, len(glossary))
	for _, g := range glossary {
		if g.Term != "" {
			entries = append(entries, g)
		}
	}
	sort.SliceStable(entries, func(i, j int) bool { return len(entries[i].Term) > len(entries[j].Term) })
	var b strings.Builder
	for i := 0; i < len(text); {
		matched := false
		for _, g := range entries {
			if strings.HasPrefix(text[i:], g.Term) && boundaryBefore(text, i, g.Term) && boundaryAfter(text, i+len(g.Term), g.Term) {
				b.WriteString(g.Spoken)
				i += len(g.Term)
				matched = true
				break
			}
		}
		if !matched {
			_, size := utf8.DecodeRuneInString(text[i:])
			b.WriteString(text[i : i+size])
			i += size
		}
	}
	return b.String()
}

// wordRune is a rune that belongs to a space-separated word.
func wordRune(r rune) bool {
	return (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') && !unspaced(r)
}

// unspaced reports runes of scripts written without spaces between words.
func unspaced(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai, unicode.Lao, unicode.Khmer)
}

func boundaryBefore(text string, i int, term string) bool {
	first, _ := utf8.DecodeRuneInString(term)
	if i == 0 || !wordRune(first) {
		return true
	}
	prev, _ := utf8.DecodeLastRuneInString(text[:i])
	return !wordRune(prev)
}

func boundaryAfter(text string, j int, term string) bool {
	last, _ := utf8.DecodeLastRuneInString(term)
	if j >= len(text) || !wordRune(last) {
		return true
	}
	next, _ := utf8.DecodeRuneInString(text[j:])
	return !wordRune(next)
}
