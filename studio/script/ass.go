package script

import (
	"strings"
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
// blocks ({\an8}, {\i1}...) are removed, \N and \n break lines, \h is a space. Comment
// events and every other section (styles, fonts, graphics) are skipped.
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
			if !b.next(i + 1) {
				return b.cues
			}
			fields := strings.SplitN(value, ",", len(format))
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
			var pl []plainLine
			for _, l := range assTextLines(fields[len(fields)-1]) {
				pl = append(pl, plainLine{text: l, voice: name})
			}
			character, text := cueText(pl)
			if character == "" {
				character = name
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

// assTextLines turns the Text field of an event into trimmed lines: override blocks
// removed (an unclosed "{" is kept as text), \N and \n as line breaks, \h as a space.
func assTextLines(text string) []string {
	var b strings.Builder
	for len(text) > 0 {
		open := strings.IndexByte(text, '{')
		if open < 0 {
			b.WriteString(text)
			break
		}
		end := strings.IndexByte(text[open:], '}')
		if end < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:open])
		text = text[open+end+1:]
	}
	t := strings.NewReplacer(`\N`, "\n", `\n`, "\n", `\h`, " ").Replace(b.String())
	return textLines(t)
}
