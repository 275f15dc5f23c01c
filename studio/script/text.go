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
	// color="red">, <c.yellow>, <v.loud Alice>, <lang en>, <ruby>, <rt>. Anything else in
	// angle brackets ("<laughs>", "a < b > c") is text.
	formatTag = regexp.MustCompile(`(?i)<(/?)(b|i|u|s|font|c|v|lang|ruby|rt)((?:\.[^\s<>.]+)*)(\s[^<>]*)?>`)
	// timestampTag matches WebVTT karaoke timestamps: <00:00:01.500>, <01.500>.
	timestampTag = regexp.MustCompile(`<(?:\d+:)?\d{2}:\d{2}\.\d{3}>`)
	// overrideTag matches SubStation override blocks found in SRT files: {\an8}, {\i1}.
	overrideTag = regexp.MustCompile(`\{\\[^{}]*\}`)
	// entity matches an HTML character reference, which WebVTT text uses.
	entity = regexp.MustCompile(`&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]+);`)
)

var entities = map[string]string{
	"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": `"`, "&apos;": "'",
	"&nbsp;": "\u00a0", "&lrm;": "\u200e", "&rlm;": "\u200f",
}

// stripTags removes formatting tags from one line of cue text and returns the first
// voice name found (<v Alice>). Removal repeats until none is left, so that the result
// holds no tag even for input such as "<<i>i>", and reads back the same when written.
func stripTags(line string) (text, voice string) {
	if !strings.ContainsAny(line, "<{") {
		return line, ""
	}
	for {
		changed := false
		if strings.Contains(line, "<") {
			line = formatTag.ReplaceAllStringFunc(line, func(tag string) string {
				changed = true
				if voice == "" {
					m := formatTag.FindStringSubmatch(tag)
					if m[1] == "" && strings.EqualFold(m[2], "v") {
						voice = m[4]
					}
				}
				return ""
			})
			if s := timestampTag.ReplaceAllString(line, ""); s != line {
				line, changed = s, true
			}
		}
		if strings.Contains(line, "{") {
			if s := overrideTag.ReplaceAllString(line, ""); s != line {
				line, changed = s, true
			}
		}
		if !changed {
			return line, voice
		}
	}
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
