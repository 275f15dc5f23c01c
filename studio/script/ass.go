package script

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// assDefaultFormat is the field order of an ASS Dialogue event when the [Events]
// section has no Format line (the ASS v4+ default; SSA's first field is "Marked").
var assDefaultFormat = []string{"layer", "start", "end", "style", "name", "marginl", "marginr", "marginv", "effect", "text"}

// isASSHeader reports whether line opens an SSA/ASS file.
func isASSHeader(line string) bool {
	return strings.EqualFold(strings.TrimSpace(line), "[script info]")
}

// parseASS reads the Dialogue events of an SSA/ASS file's [Events] section, in the
// field order of its Format line. The Name (Actor) field is the character; override
// blocks ({\an8}, {\i1}...) are removed, \N and \n break lines, \h is a space, and
// vector drawings ({\p1}m 0 0 l ...) are not text. Comment events, events that are
// only a drawing (a sign's shape) and every other section (styles, fonts, graphics)
// are skipped.
func parseASS(s *source) []Cue {
	b := cueBuilder{src: s}
	section := ""
	format := assDefaultFormat
	for i, raw := range s.lines {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.ToLower(line)
			continue
		}
		if section != "[events]" {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "format":
			format = nil
			for f := range strings.SplitSeq(value, ",") {
				format = append(format, strings.ToLower(strings.TrimSpace(f)))
			}
			if format[len(format)-1] != "text" || assField(format, "start") < 0 || assField(format, "end") < 0 {
				s.add(i+1, "script.ass_format")
				return nil
			}
		case "dialogue":
			fields := strings.SplitN(value, ",", len(format))
			var lines []string
			var guarded, drawing bool
			if len(fields) == len(format) {
				lines, guarded, drawing = assText(fields[len(fields)-1])
				if drawing && len(lines) == 0 {
					// A shape ({\p1}m 0 0 l ...), a typeset sign's box or mask: nothing to voice.
					continue
				}
			}
			if !b.next(i + 1) {
				return b.cues
			}
			if len(fields) < len(format) {
				s.add(i+1, "script.ass_fields", len(fields), len(format))
				continue
			}
			startText := strings.TrimSpace(fields[assField(format, "start")])
			endText := strings.TrimSpace(fields[assField(format, "end")])
			start, okStart := parseTimecode(startText)
			end, okEnd := parseTimecode(endText)
			switch {
			case !okStart:
				s.add(i+1, "script.bad_timecode", startText)
				continue
			case !okEnd:
				s.add(i+1, "script.bad_timecode", endText)
				continue
			case !b.times(i+1, start, end):
				continue
			}
			name := ""
			if n := max(assField(format, "name"), assField(format, "actor")); n >= 0 {
				name = canonName(fields[n])
			}
			character, text := name, strings.Join(lines, "\n")
			if name == "" && !guarded {
				pl := make([]plainLine, len(lines))
				for k, l := range lines {
					pl[k] = plainLine{text: l}
				}
				character, text = cueText(pl)
			}
			b.add(i+1, Cue{SourceLine: i + 1, Start: start, End: end, Character: character, Text: text})
		}
	}
	return b.cues
}

// assField returns the index of field name in format, or -1.
func assField(format []string, name string) int {
	for i, f := range format {
		if f == name {
			return i
		}
	}
	return -1
}

// assText reads the Text field of an event. It returns its lines, trimmed, with
// every block in braces removed (overrides such as {\an8}, and comments), \N and \n
// as line breaks, \h as a space, \{ and \} as braces, and a backslash before an
// empty block ("\{}") as a backslash; an unclosed "{" is kept as text. What an
// override \p1 (or any \p above 0) makes a vector drawing, up to a \p0, is drawing
// commands ("m 0 0 l 100 0"), not text, and is left out; drawing reports whether
// there was any. guarded reports whether the first line, read with its comment
// blocks left in, is not a name prefix where the plain line is one: a writer's
// "BOB{}: hi", text and no speaker.
func assText(text string) (lines []string, guarded, drawing bool) {
	var plain, kept strings.Builder
	drawn := false // in drawing mode
	for i := 0; i < len(text); i++ {
		c := text[i]
		if drawn && c != '{' {
			continue
		}
		switch {
		case c == '\\' && i+1 < len(text):
			next := text[i+1]
			var s string
			switch next {
			case 'N', 'n':
				s = "\n"
			case 'h':
				s = " "
			case '{':
				s = "{"
				if i+2 < len(text) && text[i+2] == '}' {
					s = "\\"
					i++
				}
			case '}':
				s = "}"
			default:
				plain.WriteByte(c)
				kept.WriteByte(c)
				continue
			}
			plain.WriteString(s)
			kept.WriteString(s)
			i++
		case c == '{':
			end := strings.IndexByte(text[i:], '}')
			if end < 0 {
				plain.WriteString(text[i:])
				kept.WriteString(text[i:])
				i = len(text)
				continue
			}
			block := text[i : i+end+1]
			if !strings.HasPrefix(block, "{\\") {
				kept.WriteString(block)
			} else if p, ok := assDrawingMode(block); ok {
				drawn = p
				drawing = drawing || p
			}
			i += end
		default:
			plain.WriteByte(c)
			kept.WriteByte(c)
		}
	}
	lines = textLines(plain.String())
	if len(lines) > 0 {
		if _, _, ok := splitNamePrefix(lines[0]); ok {
			first := textLines(kept.String())
			_, _, prefix := splitNamePrefix(first[0])
			guarded = !prefix
		}
	}
	return lines, guarded, drawing
}

// assDrawingMode returns what the last \p tag of an override block sets: true for a
// drawing (\p1, \p4: its scale), false for text (\p0, or \p with no number, which
// libass reads as 0); ok is false when the block has no \p tag. \pos and \pbo are
// other tags.
func assDrawingMode(block string) (drawing, ok bool) {
	for rest := block; ; {
		k := strings.Index(rest, `\p`)
		if k < 0 {
			return drawing, ok
		}
		rest = rest[k+2:]
		if strings.HasPrefix(rest, "o") || strings.HasPrefix(rest, "b") {
			continue
		}
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		drawing, ok = strings.TrimLeft(rest[:n], "0") != "", true
	}
}

// assHeader is the head of an ASS file the writer makes: the [Script Info] and one
// Default style that renders the way players show subtitles by default (white text
// with a black outline, bottom centre, on a 1920×1080 canvas), then the [Events]
// Format line, in the field order of the ASS v4+ default.
const assHeader = "\uFEFF[Script Info]\n" +
	"; Written by dubstudio\n" +
	"ScriptType: v4.00+\n" +
	"WrapStyle: 0\n" +
	"ScaledBorderAndShadow: yes\n" +
	"PlayResX: 1920\n" +
	"PlayResY: 1080\n" +
	"YCbCr Matrix: None\n" +
	"\n" +
	"[V4+ Styles]\n" +
	"Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\n" +
	"Style: Default,Arial,54,&H00FFFFFF,&H000000FF,&H00000000,&H80000000,0,0,0,0,100,100,0,0,1,2,1,2,60,60,40,1\n" +
	"\n" +
	"[Events]\n" +
	"Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"

// WriteASS writes cues as an Advanced SubStation Alpha (v4+) file, UTF-8 with a
// byte-order mark (which Windows tools need to tell UTF-8 from a code page): one
// Dialogue event a cue, its character in the Name (Actor) field, the field Aegisub
// shows and dubbing tools assign voices by.
//
// ASS times are in centiseconds: a cue's times are rounded to the nearest 10 ms (its
// end stays at or after its start). Text lines are joined with \N; a literal "{" or
// "}" is written \{ or \}, which libass shows as the brace and the reader reads back,
// and a backslash that would start one of the \N, \n, \h, \{ or \} sequences is
// followed by an empty block "{}" so that it reads back as a backslash. A cue with
// no character whose text starts like a name prefix ("BOB: hi") gets an empty block
// before its colon ("BOB{}: hi"), which no player shows, so that the reader keeps the
// text whole. The Name field cannot hold a comma, which separates the fields: a comma
// in a character's name is written as a semicolon.
func WriteASS(w io.Writer, cues []Cue) error {
	if err := validateForWrite("ASS", cues); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(assHeader)
	for _, c := range cues {
		start, end := assTime(c.Start), assTime(c.End)
		fmt.Fprintf(bw, "Dialogue: 0,%s,%s,Default,%s,0,0,0,,", start, end, assName(c.Character))
		lines := textLines(c.Text)
		for i, l := range lines {
			if i > 0 {
				bw.WriteString(`\N`)
			}
			if i == 0 && canonName(c.Character) == "" {
				if name, _, ok := splitNamePrefix(l); ok {
					// The name has no brace or backslash (isPrefixName): only the rest needs escaping.
					colon := len(name) + strings.IndexAny(l[len(name):], ":：")
					bw.WriteString(l[:colon] + "{}")
					l = l[colon:]
				}
			}
			bw.WriteString(escapeASS(l))
		}
		bw.WriteString("\n")
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("script: writing ASS: %w", err)
	}
	return nil
}

// assTime formats d as an ASS time, H:MM:SS.cc, rounded to the centisecond; a time
// that would round past what a timecode may hold is rounded down instead.
func assTime(d time.Duration) string {
	cs := (d.Milliseconds() + 5) / 10
	if time.Duration(cs)*10*time.Millisecond > MaxTimecode {
		cs = d.Milliseconds() / 10
	}
	return fmt.Sprintf("%d:%02d:%02d.%02d", cs/360000, cs/6000%60, cs/100%60, cs%100)
}

// assName returns a character's name as the Name field can hold it: blanks
// collapsed, commas as semicolons.
func assName(name string) string {
	return strings.ReplaceAll(canonName(name), ",", ";")
}

// escapeASS escapes one line of text for an event's Text field (see WriteASS).
func escapeASS(line string) string {
	if !strings.ContainsAny(line, `{}\`) {
		return line
	}
	var b strings.Builder
	for i := range len(line) {
		switch c := line[i]; c {
		case '{', '}':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\\':
			b.WriteByte('\\')
			if i+1 < len(line) && strings.IndexByte(`Nnh{}`, line[i+1]) >= 0 {
				b.WriteString("{}")
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
