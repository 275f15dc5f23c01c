package gpu

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"dubstudio/i18n"
)

// SplitError refuses a line that cannot be split into parts under the limit because
// one sentence (even cut at semicolons) is too long. It unwraps to ErrInvalid.
type SplitError struct {
	Sentence     string
	Seconds      float64
	LimitSeconds float64
}

func (e *SplitError) Error() string {
	return fmt.Sprintf("gpu: a sentence of about %.1f s is over the %.1f s limit: %q",
		e.Seconds, e.LimitSeconds, e.Sentence)
}

// Unwrap returns ErrInvalid.
func (e *SplitError) Unwrap() error { return ErrInvalid }

// In returns the user-facing message in lang.
func (e *SplitError) In(lang i18n.Lang) string {
	s := e.Sentence
	if r := []rune(s); len(r) > 60 {
		s = string(r[:57]) + "…"
	}
	return i18n.T(lang, "gpu.split.sentence_too_long", e.Seconds, e.LimitSeconds, s)
}

// ProportionalEstimate returns an estimator that gives a piece of text its share of
// totalSeconds by the number of non-space characters: the line's slot length spread
// over its text.
func ProportionalEstimate(text string, totalSeconds float64) func(string) float64 {
	total := countChars(text)
	return func(part string) float64 {
		if total == 0 {
			return 0
		}
		return totalSeconds * float64(countChars(part)) / float64(total)
	}
}

func countChars(s string) int {
	n := 0
	for _, r := range s {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}

// SplitText splits a line whose speech would be longer than maxSeconds into parts
// each estimated (by estimate) at most maxSeconds, cutting at sentence ends (. ! ?
// followed by a space, and 。！？), and inside a sentence that is still too long at
// semicolons (; ；). Consecutive sentences are packed into as few parts as fit. A
// line that fits is returned whole. A sentence that cannot be cut small enough is a
// *SplitError.
func SplitText(text string, maxSeconds float64, estimate func(string) float64) ([]string, error) {
	text = strings.TrimSpace(text)
	if text == "" || estimate(text) <= maxSeconds {
		return []string{text}, nil
	}
	var pieces []span
	for _, sent := range cut(text, span{0, len(text)}, isSentenceEnd) {
		if estimate(sent.of(text)) <= maxSeconds {
			pieces = append(pieces, sent)
			continue
		}
		for _, clause := range cut(text, sent, isClauseEnd) {
			if sec := estimate(clause.of(text)); sec > maxSeconds {
				return nil, &SplitError{Sentence: sent.of(text), Seconds: sec, LimitSeconds: maxSeconds}
			}
			pieces = append(pieces, clause)
		}
	}
	var parts []string
	cur := pieces[0]
	for _, p := range pieces[1:] {
		joined := span{cur.start, p.end}
		if estimate(joined.of(text)) <= maxSeconds {
			cur = joined
			continue
		}
		parts = append(parts, cur.of(text))
		cur = p
	}
	return append(parts, cur.of(text)), nil
}

type span struct{ start, end int }

func (s span) of(text string) string { return strings.TrimSpace(text[s.start:s.end]) }

// closers may follow a sentence end and belong to the sentence.
const closers = "\"'”’)]）」』》】"

// isSentenceEnd reports whether the rune at i ends a sentence: CJK enders always,
// ASCII ones when followed (after closing quotes) by a space or the end.
func isSentenceEnd(text string, i int, r rune) bool {
	switch r {
	case '。', '！', '？':
		return true
	case '.', '!', '?':
		j := i + utf8.RuneLen(r)
		for j < len(text) {
			next, size := utf8.DecodeRuneInString(text[j:])
			if strings.ContainsRune(closers, next) || next == '.' || next == '!' || next == '?' {
				j += size
				continue
			}
			return unicode.IsSpace(next)
		}
		return true
	}
	return false
}

func isClauseEnd(_ string, _ int, r rune) bool { return r == ';' || r == '；' }

// cut splits s of text after every rune end says ends a piece, keeping the enders,
// any run of further enders and closing quotes with the piece. Empty pieces are
// dropped.
func cut(text string, s span, end func(string, int, rune) bool) []span {
	var out []span
	start := s.start
	for i := s.start; i < s.end; {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if !end(text, i-size, r) {
			continue
		}
		for i < s.end {
			next, n := utf8.DecodeRuneInString(text[i:])
			if !strings.ContainsRune(closers, next) && !end(text, i, next) {
				break
			}
			i += n
		}
		if strings.TrimSpace(text[start:i]) != "" {
			out = append(out, span{start, i})
		}
		start = i
	}
	if strings.TrimSpace(text[start:s.end]) != "" {
		out = append(out, span{start, s.end})
	}
	return out
}
