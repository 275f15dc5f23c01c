package script

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// timestampTag matches the inside of a WebVTT karaoke timestamp: <00:00:01.500>.
var timestampTag = regexp.MustCompile(`^(?:\d+:)?\d{2}:\d{2}\.\d{3}$`)

// entity matches an HTML character reference, which WebVTT text uses.
var entity = regexp.MustCompile(`&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]+);`)

// formatTags are the names of the formatting tags of SRT and WebVTT: <i>, <b>, <u>,
// <s>, <font color="red">, <c.yellow>, <v.loud Alice>, <lang en>, <ruby>, <rt>.
var formatTags = map[string]bool{
	"b": true, "i": true, "u": true, "s": true, "font": true,
	"c": true, "v": true, "lang": true, "ruby": true, "rt": true,
}

// maxTagLen bounds the length of a tag, so that stripping stays linear in the length
// of a line whatever it holds.
const maxTagLen = 512

var entities = map[string]string{
	"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": `"`, "&apos;": "'",
	"&nbsp;": "\u00a0", "&lrm;": "\u200e", "&rlm;": "\u200f",
}

// stripTags removes formatting tags from one line of cue text and returns the first
// voice name found (<v Alice>). Tags are the known ones (see formatTags), WebVTT
// karaoke timestamps and SubStation overrides ({\an8}); anything else in brackets
// ("<laughs>", "a < b > c", "{sic}") is text.
//
// Removing a tag can join the text around it into a new tag ("<<i>i>"); that one goes
// too, so that the result holds no tag and reads back the same when written. It works
// in one pass: the output is built as a stack, and when a '>' or '}' arrives, the
// output's tail from the last '<' or '{' is checked for a tag.
func stripTags(line string) (text, voice string) {
	text, voices := stripVoices(line)
	if len(voices) > 0 {
		voice = voices[0]
	}
	return text, voice
}

// stripVoices is stripTags that returns the names of all the voice spans of the line,
// in order.
func stripVoices(line string) (text string, voices []string) {
	if !strings.ContainsAny(line, "<{") {
		return line, nil
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
		// Copy the run up to the next bracket at once.
		k := strings.IndexAny(line[i:], "<>{}")
		if k < 0 {
			out = append(out, line[i:]...)
			break
		}
		out = append(out, line[i:i+k]...)
		i += k
		c := line[i]
		start := -1
		switch c {
		case '>':
			if p := last(lt); p > last(gt) && len(out)-p < maxTagLen {
				if ok, v := isFormatTag(out[p+1:]); ok {
					start = p
					if v != "" {
						voices = append(voices, v)
					}
				}
			}
		case '}':
			// The tail holds no other brace: it is an override if it starts with {\.
			if p := last(lb); p > last(rb) && len(out)-p < maxTagLen && p+1 < len(out) && out[p+1] == '\\' {
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
	if len(out) == len(line) {
		return line, voices
	}
	return string(out), voices
}

// isFormatTag reports whether body, what is between '<' and '>' (and holds neither),
// is a formatting tag or a timestamp, and returns the annotation of an opening <v>.
func isFormatTag(body []byte) (ok bool, voice string) {
	if len(body) > 0 && body[0] >= '0' && body[0] <= '9' {
		return timestampTag.Match(body), ""
	}
	closing := len(body) > 0 && body[0] == '/'
	if closing {
		body = body[1:]
	}
	end := 0
	for end < len(body) && body[end] != '.' && !isTagSpace(body[end]) {
		end++
	}
	if end == 0 || end > 4 || !formatTags[strings.ToLower(string(body[:end]))] {
		return false, ""
	}
	isVoice := end == 1 && (body[0] == 'v' || body[0] == 'V')
	rest := body[end:]
	for len(rest) > 0 && rest[0] == '.' { // classes: .yellow.bg_blue
		n := 1
		for n < len(rest) && rest[n] != '.' && !isTagSpace(rest[n]) {
			n++
		}
		if n == 1 {
			return false, ""
		}
		rest = rest[n:]
	}
	if len(rest) > 0 && !isTagSpace(rest[0]) {
		return false, ""
	}
	if isVoice && !closing {
		return true, string(rest)
	}
	return true, ""
}

// isTagSpace reports whether c separates a tag's name from its annotation.
func isTagSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// decodeEntities decodes the character references of SRT and WebVTT text. References that would produce
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
			// The rest of HTML's named references (&hellip;, &eacute;), which
			// WebVTT text may use too.
			if r := html.UnescapeString(ref); r != ref && !hasControl(r) {
				return r
			}
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
// "-->" out of cue text. A "{" becomes &#123; where the line holds a SubStation
// override ({\an8}), which the reader removes from WebVTT too.
func escapeVTT(line string) string {
	line = vttEscaper.Replace(line)
	if t, _ := stripTags(line); t != line {
		line = strings.ReplaceAll(line, "{", "&#123;")
	}
	return line
}

var vttEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// hasControl reports whether s holds a control character other than a tab or newline.
func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return true
		}
	}
	return false
}

// escapeSRT escapes a line of SRT cue text just enough that reading it back (tags
// stripped, then references decoded, as plain does) gives the line again, and leaves
// it as typed otherwise, since not every player decodes references: an "&" that
// starts a reference becomes &amp;, every "<" becomes &lt; when the line holds a
// formatting tag, a "{" becomes &#123; when it holds an override ({\an8}), and "-->"
// becomes --&gt; so that text cannot pass for a timing line. Each replacement starts
// with "&", which a reference cannot contain, so no new reference is formed.
func escapeSRT(line string) string {
	if strings.Contains(line, "&") {
		line = entity.ReplaceAllStringFunc(line, func(ref string) string { return "&amp;" + ref[1:] })
	}
	if t, _ := stripTags(line); t != line {
		line = strings.ReplaceAll(line, "<", "&lt;")
		if t, _ := stripTags(line); t != line {
			line = strings.ReplaceAll(line, "{", "&#123;")
		}
	}
	return strings.ReplaceAll(line, "-->", "--&gt;")
}

// escapeSRTVoice escapes a voice span's annotation in SRT: as escapeSRT, and "<" and
// ">" always, which would end or nest the span.
func escapeSRTVoice(name string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(escapeSRT(name))
}

// plainLine is one line of SRT or WebVTT cue text as it reads: tags removed,
// character references decoded, trimmed; voice is the name of its first voice span,
// if any, and voices the names of all of them.
type plainLine struct {
	text, voice string
	voices      []string
}

func plain(raw string) plainLine {
	t, vs := stripVoices(raw)
	l := plainLine{text: strings.TrimSpace(decodeEntities(t))}
	for _, v := range vs {
		if v = canonName(decodeEntities(v)); v != "" {
			l.voices = append(l.voices, v)
		}
	}
	if len(l.voices) > 0 {
		l.voice = l.voices[0]
	}
	return l
}

// twoVoices reports whether lines hold voice spans of two different names: two
// speakers' turns in one cue ("<v Emo>Warum? - </v><v Proog>Sofort!</v>"), which
// the cue's one character cannot say, so the cue is flagged as dialogue, to split.
func twoVoices(lines []plainLine) bool {
	first := ""
	for _, l := range lines {
		for _, v := range l.voices {
			switch {
			case first == "":
				first = v
			case v != first:
				return true
			}
		}
	}
	return false
}

// cueText turns the lines of an SRT or WebVTT cue into the cue's character and text:
// empty lines dropped, and the character taken from the first voice span or else from
// a name prefix of the first line.
func cueText(lines []plainLine) (character, text string) {
	kept := make([]string, 0, len(lines))
	for _, l := range lines {
		if character == "" {
			character = l.voice
		}
		if l.text != "" {
			kept = append(kept, l.text)
		}
	}
	if character == "" && len(kept) > 0 {
		// A prefix is a name only when text is left after it.
		if name, rest, ok := splitNamePrefix(kept[0]); ok && (rest != "" || len(kept) > 1) {
			character = name
			if rest == "" {
				kept = kept[1:]
			} else {
				kept[0] = rest
			}
		}
	}
	if len(kept) == 1 {
		return character, kept[0]
	}
	return character, strings.Join(kept, "\n")
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
	maxPrefixName  = 32
	maxPrefixWords = 3
)

// splitNamePrefix splits "NAME: text" (also "NAME：text" with a full-width colon). The
// name must look like one (isPrefixName): at most three words and 32 characters, each
// word starting with a capital, a digit or a letter without case (CJK), so that a
// sentence such as "Règle numéro un: ..." or "J'ai dit: ..." keeps its words; no
// terminal punctuation (. ! ? …) before the colon. After an ASCII colon a blank or the
// end of the line must follow, which keeps "10:30" and "https://" out.
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
	if last, _ := utf8.DecodeLastRuneInString(name); strings.ContainsRune(".!?…", last) {
		return false
	}
	for word := range strings.SplitSeq(name, " ") {
		if first, _ := utf8.DecodeRuneInString(word); unicode.IsLower(first) {
			return false
		}
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
