package script

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	// formatTag matches the formatting tags of SRT and WebVTT: <i>, </b>, <font
	// color="red">, <c.yellow>, <v.loud Alice>, <lang en>, <ruby>, <rt>, and WebVTT's
	// karaoke timestamps (<00:00:01.500>). Anything else in angle brackets ("<laughs>",
	// "a < b > c") is text.
	formatTag = regexp.MustCompile(`(?i)^(?:<(/?)(b|i|u|s|font|c|v|lang|ruby|rt)((?:\.[^\s<>.]+)*)(\s[^<>]*)?>|<(?:\d+:)?\d{2}:\d{2}\.\d{3}>)$`)
	// overrideTag matches SubStation override blocks found in SRT files: {\an8}, {\i1}.
	overrideTag = regexp.MustCompile(`^\{\\[^{}]*\}$`)
	// entity matches an HTML character reference, which WebVTT text uses.
	entity = regexp.MustCompile(`&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]+);`)
)

// maxTagLen bounds the length of a tag, so that stripping stays linear in the length
// of a line whatever it holds.
const maxTagLen = 512

var entities = map[string]string{
	"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": `"`, "&apos;": "'",
	"&nbsp;": "\u00a0", "&lrm;": "\u200e", "&rlm;": "\u200f",
}

// stripTags removes formatting tags from one line of cue text and returns the first
// voice name found (<v Alice>). Removing a tag can join the text around it into a new
// tag ("<<i>i>"); that one goes too, so that the result holds no tag and reads back the
// same when written. It works in one pass: the output is built on a stack, and when a
// '>' or '}' arrives, the output's tail from the last '<' or '{' is checked for a tag.
func stripTags(line string) (text, voice string) {
	if !strings.ContainsAny(line, "<{") {
		return line, ""
	}
	out := make([]byte, 0, len(line))
	// Positions in out of the brackets still there, innermost last.
	var lt, gt, lb, rb []int
	last := func(s []int) int {
		if len(s) == 0 {
			return -1
		}
		return s[len(s)-1]
	}
	pop := func(s []int, p int) []int {
		for len(s) > 0 && s[len(s)-1] >= p {
			s = s[:len(s)-1]
		}
		return s
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		start := -1
		switch c {
		case '>':
			if p := last(lt); p > last(gt) && len(out)-p < maxTagLen {
				if m := formatTag.FindSubmatch(append(out[p:len(out):len(out)], c)); m != nil {
					start = p
					if voice == "" && len(m[1]) == 0 && strings.EqualFold(string(m[2]), "v") {
						voice = string(m[4])
					}
				}
			}
		case '}':
			if p := last(lb); p > last(rb) && len(out)-p < maxTagLen &&
				overrideTag.Match(append(out[p:len(out):len(out)], c)) {
				start = p
			}
		}
		if start >= 0 {
			out = out[:start]
			lt, gt, lb, rb = pop(lt, start), pop(gt, start), pop(lb, start), pop(rb, start)
			continue
		}
		switch c {
		case '<':
			lt = append(lt, len(out))
		case '>':
			gt = append(gt, len(out))
		case '{':
			lb = append(lb, len(out))
		case '}':
			rb = append(rb, len(out))
		}
		out = append(out, c)
	}
	return string(out), voice
}

// decodeEntities decodes WebVTT character references. References that would produce
// a control character, or none, stay as they are.
func decodeEntities(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	return entity.ReplaceAllStringFunc(s, func(ref string) string {
		if r, ok := entities[ref]; ok {
			return r
		}
		if ref[1] != '#' {
			return ref
		}
		var n uint64
		var err error
		if ref[2] == 'x' || ref[2] == 'X' {
			n, err = strconv.ParseUint(ref[3:len(ref)-1], 16, 32)
		} else {
			n, err = strconv.ParseUint(ref[2:len(ref)-1], 10, 32)
		}
		r := rune(n)
		if err != nil || !utf8.ValidRune(r) || unicode.IsControl(r) {
			return ref
		}
		return string(r)
	})
}

// escapeVTT escapes what WebVTT cue text cannot hold as is. Escaping ">" too keeps
// "-->" out of cue text.
var escapeVTT = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// cueText turns the raw lines of an SRT or WebVTT cue into the cue's character and
// text: tags removed, references decoded (WebVTT), lines trimmed, empty ones dropped,
// and the character taken from the first voice span or else from a name prefix.
func cueText(raw []string, vtt bool) (character, text string) {
	lines := make([]string, 0, len(raw))
	for _, l := range raw {
		l, v := stripTags(l)
		if vtt {
			l = decodeEntities(l)
			v = decodeEntities(v)
		}
		if character == "" {
			character = canonName(v)
		}
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if character == "" && len(lines) > 0 {
		if name, rest, ok := splitNamePrefix(lines[0]); ok {
			character = name
			if rest == "" {
				lines = lines[1:]
			} else {
				lines[0] = rest
			}
		}
	}
	return character, strings.Join(lines, "\n")
}

// canonText is the text as the parsers return it: lines trimmed, empty lines dropped.
func canonText(s string) string {
	return strings.Join(textLines(s), "\n")
}

// textLines splits text into trimmed, non-empty lines.
func textLines(s string) []string {
	var out []string
	for l := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// canonName collapses the blanks of a character name or emotion.
func canonName(s string) string { return strings.Join(strings.Fields(s), " ") }

// maxPrefixName bounds a name prefix, so that a sentence with a colon is not taken
// for a character.
const (
	maxPrefixName  = 40
	maxPrefixWords = 4
)

// splitNamePrefix splits "NAME: text" (also "NAME：text" with a full-width colon). The
// name must look like one: at most four words and 40 characters, a letter among them,
// letters, digits and . ' ’ - _ # ( ) & / only, starting with a letter or digit. After
// an ASCII colon a blank or the end of the line must follow, which keeps "10:30" and
// "https://" out.
func splitNamePrefix(line string) (name, rest string, ok bool) {
	i := strings.IndexAny(line, ":：")
	if i <= 0 {
		return "", "", false
	}
	after := line[i:]
	if after[0] == ':' {
		after = after[1:]
		if r, _ := utf8.DecodeRuneInString(after); after != "" && !unicode.IsSpace(r) {
			return "", "", false
		}
	} else {
		after = after[len("："):]
	}
	name = strings.TrimSpace(line[:i])
	if !isPrefixName(name) {
		return "", "", false
	}
	return name, strings.TrimSpace(after), true
}

// isPrefixName reports whether name can be written as a name prefix and read back.
func isPrefixName(name string) bool {
	if name == "" || utf8.RuneCountInString(name) > maxPrefixName || name != canonName(name) ||
		strings.Count(name, " ") >= maxPrefixWords {
		return false
	}
	letter := false
	for i, r := range name {
		switch {
		case unicode.IsLetter(r):
			letter = true
		case unicode.IsDigit(r):
		case i == 0:
			return false
		case unicode.IsMark(r), r == ' ', strings.ContainsRune(".'’-_#()&/", r):
		default:
			return false
		}
	}
	return letter
}
