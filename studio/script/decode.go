package script

import (
	"bytes"
	"container/heap"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	xunicode "golang.org/x/text/encoding/unicode"
)

// maxProblems bounds the problems listed for one file: the first ones by line are
// kept and the rest counted, so that a binary upload cannot make an error list of
// millions of entries.
const maxProblems = 1000

var (
	bomUTF8    = []byte{0xEF, 0xBB, 0xBF}
	bomUTF16LE = []byte{0xFF, 0xFE}
	bomUTF16BE = []byte{0xFE, 0xFF}
	bomUTF32LE = []byte{0xFF, 0xFE, 0x00, 0x00}
	bomUTF32BE = []byte{0x00, 0x00, 0xFE, 0xFF}
)

// boms lists the byte-order marks, UTF-32's before UTF-16's: FF FE 00 00 starts both.
var boms = []struct {
	mark     []byte
	encoding string
}{
	{bomUTF32LE, EncodingUTF32LE}, {bomUTF32BE, EncodingUTF32BE},
	{bomUTF8, EncodingUTF8}, {bomUTF16LE, EncodingUTF16LE}, {bomUTF16BE, EncodingUTF16BE},
}

// source is a decoded file: its lines, without terminators, and the problems found so
// far. lines[i] is line i+1 of the file.
type source struct {
	lines []string
	// problems is a max-heap by position once it holds maxProblems, so that a
	// problem earlier in the file can take the place of the latest one kept.
	problems problemHeap
	seq      int
	// dropped counts the problems not kept, the first of them on line firstDropped.
	dropped      int
	firstDropped int
	// stop is set when the content cannot be parsed at all (empty, not text).
	stop bool
	// encoding is the encoding the file was read in (EncodingUTF8, ...).
	encoding string
	// legacy is set when a code page decoder read the file: its U+FFFD are bytes it
	// could not decode.
	legacy bool
	// fps is the rate timecodes with frames count at (ImportOpts.FPS), "" if none was
	// chosen; frames is set once such a timecode has been seen.
	fps    FPS
	frames bool
}

// numbered is a problem and the order in which it was found, which breaks ties
// between problems of the same line.
type numbered struct {
	Problem
	seq int
}

func (a numbered) after(b numbered) bool {
	return a.Line > b.Line || a.Line == b.Line && a.seq > b.seq
}

type problemHeap []numbered

func (h problemHeap) Len() int           { return len(h) }
func (h problemHeap) Less(i, j int) bool { return h[i].after(h[j]) }
func (h problemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *problemHeap) Push(x any)        { *h = append(*h, x.(numbered)) }
func (h *problemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (s *source) add(line int, key string, args ...any) {
	p := numbered{Problem{Line: line, Key: key, Args: args}, s.seq}
	s.seq++
	if len(s.problems) < maxProblems {
		s.problems = append(s.problems, p)
		if len(s.problems) == maxProblems {
			heap.Init(&s.problems)
		}
		return
	}
	if s.problems[0].after(p) {
		p, s.problems[0] = s.problems[0], p
		heap.Fix(&s.problems, 0)
	}
	if s.dropped == 0 || p.Line < s.firstDropped {
		s.firstDropped = p.Line
	}
	s.dropped++
}

// fatal reports whether parsing is pointless; it returns a non-nil error then.
func (s *source) fatal() error {
	if s.stop {
		return s.err()
	}
	return nil
}

func (s *source) failed() bool { return len(s.problems) > 0 }

// err returns the problems as a *ParseError, in line order, or nil if there are none.
func (s *source) err() error {
	if len(s.problems) == 0 {
		return nil
	}
	sorted := append([]numbered(nil), s.problems...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[j].after(sorted[i]) })
	ps := make([]Problem, 0, len(sorted)+1)
	for _, p := range sorted {
		ps = append(ps, p.Problem)
	}
	if s.dropped > 0 {
		ps = append(ps, Problem{Line: s.firstDropped, Key: "script.more_problems", Args: []any{s.dropped}})
	}
	return &ParseError{Problems: ps}
}

// decode reads data in the encoding it is detected to be in; see decodeAs.
func decode(data []byte) *source { return decodeAs(data, "") }

// decodeAs turns the bytes of a file into lines, read in encoding enc, or, when enc is
// "", in the encoding detected: a byte-order mark (UTF-8, UTF-16, UTF-32), then UTF-16
// without a mark by its NUL pattern (sniffUTF16), then UTF-8 if the bytes are valid,
// else a legacy code page (detectLegacy). A byte-order mark is skipped whatever enc is. Lines
// end with CRLF, LF or a lone CR. Invalid encoding and control characters are problems
// of the line they are on; a NUL byte means the file is not text at all.
func decodeAs(data []byte, enc string) *source {
	s := &source{}
	for _, b := range boms {
		if bytes.HasPrefix(data, b.mark) {
			if enc == "" {
				enc = b.encoding
			}
			// The mark is never text, also when the user reads the file as another
			// encoding than the mark says.
			data = data[len(b.mark):]
			break
		}
	}
	if enc == "" {
		enc = sniffUTF16(data)
	}
	if enc == "" {
		enc = EncodingUTF8
		if !utf8.Valid(data) {
			enc = detectLegacy(data)
		}
	}
	s.encoding = enc
	switch enc {
	case EncodingUTF16LE, EncodingUTF16BE:
		data = s.decodeUTF16(data, enc == EncodingUTF16BE)
	case EncodingUTF32LE, EncodingUTF32BE:
		data = s.decodeUTF32(data, enc == EncodingUTF32BE)
	case EncodingUTF8:
	default:
		out, err := legacy[enc].NewDecoder().Bytes(data)
		if err != nil {
			// The x/text code page decoders replace what they cannot read; kept
			// so that a change in the library cannot pass a file through undecoded.
			s.add(1, "script.invalid_encoding", enc)
			s.stop = true
			return s
		}
		data, s.legacy = out, true
	}
	if s.stop {
		return s
	}
	if len(bytes.TrimSpace(data)) == 0 && !s.failed() {
		s.add(1, "script.empty")
		s.stop = true
		return s
	}
	// One conversion for the whole file: lines are substrings of it.
	text := string(data)
	s.lines = make([]string, 0, strings.Count(text, "\n")+1)
	for len(text) > 0 {
		i := strings.IndexAny(text, "\r\n")
		if i < 0 {
			s.addLine(text)
			break
		}
		s.addLine(text[:i])
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
		if s.stop {
			return s
		}
	}
	return s
}

// decodeUTF32 returns data, UTF-32 without its byte-order mark, as UTF-8. A unit
// that is no Unicode scalar value (a surrogate, beyond U+10FFFF) or a last unit cut
// short is a problem of its line and becomes U+FFFD.
func (s *source) decodeUTF32(data []byte, big bool) []byte {
	out := make([]byte, 0, len(data)/2)
	line, reported := 1, 0
	var prev rune
	for i := 0; i < len(data); i += 4 {
		if i+4 > len(data) {
			if reported != line {
				s.add(line, "script.invalid_utf32")
			}
			break
		}
		var r rune
		if big {
			r = rune(uint32(data[i])<<24 | uint32(data[i+1])<<16 | uint32(data[i+2])<<8 | uint32(data[i+3]))
		} else {
			r = rune(uint32(data[i+3])<<24 | uint32(data[i+2])<<16 | uint32(data[i+1])<<8 | uint32(data[i]))
		}
		if !utf8.ValidRune(r) {
			if reported != line {
				s.add(line, "script.invalid_utf32")
				reported = line
			}
			r = utf8.RuneError
		}
		if r == '\r' || r == '\n' && prev != '\r' {
			line++
		}
		prev = r
		out = utf8.AppendRune(out, r)
	}
	return out
}

// addLine checks and appends the next line.
func (s *source) addLine(line string) {
	n := len(s.lines) + 1
	if strings.IndexByte(line, 0) >= 0 {
		s.problems, s.dropped = nil, 0
		s.add(n, "script.not_text")
		s.stop = true
		return
	}
	if s.legacy && strings.ContainsRune(line, utf8.RuneError) {
		s.add(n, "script.invalid_encoding", s.encoding)
	}
	if !utf8.ValidString(line) {
		s.add(n, "script.invalid_utf8")
		line = strings.ToValidUTF8(line, "\uFFFD")
	}
	if r, ok := controlChar(line); ok {
		s.add(n, "script.control_char", fmt.Sprintf("U+%04X", r))
	}
	s.lines = append(s.lines, line)
}

// decodeUTF16 returns data, UTF-16 without its byte-order mark, as UTF-8.
// golang.org/x/text replaces broken surrogates with U+FFFD silently, so they are found
// first, with the line they are on.
func (s *source) decodeUTF16(data []byte, big bool) []byte {
	unit := func(i int) uint16 {
		if big {
			return uint16(data[i])<<8 | uint16(data[i+1])
		}
		return uint16(data[i+1])<<8 | uint16(data[i])
	}
	line, reported := 1, 0
	bad := func() {
		if reported != line {
			s.add(line, "script.invalid_utf16")
			reported = line
		}
	}
	var prev uint16
	for i := 0; i+1 < len(data); i += 2 {
		u := unit(i)
		switch {
		case u == '\n' && prev != '\r', u == '\r':
			line++
		case u >= 0xD800 && u <= 0xDBFF:
			if i+3 >= len(data) {
				bad()
				break
			}
			if next := unit(i + 2); next < 0xDC00 || next > 0xDFFF {
				bad()
				break
			}
			i += 2
		case u >= 0xDC00 && u <= 0xDFFF:
			bad()
		}
		prev = u
	}
	if len(data)%2 != 0 {
		bad()
	}
	end := xunicode.LittleEndian
	if big {
		end = xunicode.BigEndian
	}
	out, err := xunicode.UTF16(end, xunicode.IgnoreBOM).NewDecoder().Bytes(data)
	if err != nil {
		// Not reached: the decoder replaces what it cannot read; kept so that a
		// change in the library cannot pass a file through undecoded.
		s.add(1, "script.invalid_utf16")
		s.stop = true
		return nil
	}
	return out
}

// controlChar returns the first control character of valid UTF-8 line other than a
// tab: C0 (U+0000 to U+001F), DEL, or C1 (U+0080 to U+009F, encoded C2 80 to C2 9F).
func controlChar(line string) (rune, bool) {
	for i := range len(line) {
		switch c := line[i]; {
		case c < 0x20 && c != '\t', c == 0x7F:
			return rune(c), true
		case c == 0xC2 && i+1 < len(line) && line[i+1] <= 0x9F:
			return rune(line[i+1]), true
		}
	}
	return 0, false
}

func isBlank(line string) bool { return strings.TrimSpace(line) == "" }
