package script

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// parseVTT reads WebVTT: the WEBVTT header and its header lines, then blocks separated
// by blank lines: NOTE, STYLE and REGION blocks (skipped) and cues (an optional
// identifier, a timing line with optional cue settings, text lines). As in the
// specification's parser, a line containing "-->" ends a cue's text.
func parseVTT(s *source) []Cue {
	lines := s.lines
	n := len(lines)
	i := 0
	for i < n && isBlank(lines[i]) {
		i++
	}
	if i < n && !isVTTHeader(lines[i]) {
		s.add(i+1, "script.vtt_header")
		if strings.Contains(lines[i], "-->") {
			i-- // no header at all: the file starts with a cue
		}
	}
	// Skip the header line and the header block under it (Kind:, Language:).
	for i++; i < n && !isBlank(lines[i]) && !strings.Contains(lines[i], "-->"); i++ {
	}
	skip := func(i int) int {
		for i < n && !isBlank(lines[i]) {
			i++
		}
		return i
	}
	b := cueBuilder{src: s}
	// inStyle is set from a STYLE block to the first cue: CSS may hold blank lines.
	inStyle := false
	for i < n {
		if isBlank(lines[i]) {
			i++
			continue
		}
		if isVTTBlock(lines[i]) || b.count == 0 && isVTTHeaderBlock(lines[i:skip(i)], inStyle) {
			inStyle = inStyle || strings.TrimRight(lines[i], " \t") == "STYLE"
			i = skip(i)
			continue
		}
		block := i
		if !b.next(block + 1) {
			break
		}
		timing := i
		if !strings.Contains(lines[i], "-->") {
			if i+1 >= n || isBlank(lines[i+1]) {
				s.add(block+1, "script.missing_timecode")
				i++
				continue
			}
			timing = i + 1
			if !strings.Contains(lines[timing], "-->") {
				s.add(timing+1, "script.bad_timing_line", strings.TrimSpace(lines[timing]))
				i = skip(timing)
				continue
			}
		}
		start, end, bad, ok := timingLine(lines[timing])
		if !ok {
			s.add(timing+1, "script.bad_timecode", bad)
		} else {
			ok = b.times(timing+1, start, end)
		}
		j := timing + 1
		for j < n && !isBlank(lines[j]) && !strings.Contains(lines[j], "-->") {
			j++
		}
		if ok {
			pl := make([]plainLine, 0, j-timing-1)
			for _, l := range lines[timing+1 : j] {
				pl = append(pl, plain(l))
			}
			character, text := cueText(pl)
			c := Cue{SourceLine: block + 1, Start: start, End: end, Character: character, Text: text}
			if twoVoices(pl) {
				c.Flags = []string{FlagDialogue}
			}
			b.add(timing+2, c)
		}
		i = j
	}
	return b.cues
}

// isVTTHeaderBlock reports whether block, a block before the first cue holding no
// "-->", is one that WebVTT parsers skip there and that is not a cue missing its
// timing line: the rest of a STYLE block's CSS after a blank line (afterStyle), or
// header lines of legacy files (Region: id=..., X-TIMESTAMP-MAP=...) set apart from
// the header by a blank line. A line starting with a timecode (a cue with a broken
// arrow) makes it a cue, which is reported.
func isVTTHeaderBlock(block []string, afterStyle bool) bool {
	for _, l := range block {
		if strings.Contains(l, "-->") {
			return false
		}
		if f := strings.Fields(l); len(f) > 0 {
			if _, ok := parseTimecode(f[0]); ok {
				return false
			}
		}
		if !afterStyle && !vttHeaderLine.MatchString(l) {
			return false
		}
	}
	return true
}

// vttHeaderLine matches a metadata line of a WebVTT header: "Name: value" or
// "NAME=value" with no blank in the name.
var vttHeaderLine = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*(?::|=)\s*\S`)

// isVTTHeader reports whether line is a WebVTT file's first line.
func isVTTHeader(line string) bool {
	rest, ok := strings.CutPrefix(line, "WEBVTT")
	return ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t')
}

// isVTTBlock reports whether line starts a NOTE, STYLE or REGION block.
func isVTTBlock(line string) bool {
	if rest, ok := strings.CutPrefix(line, "NOTE"); ok {
		return rest == "" || rest[0] == ' ' || rest[0] == '\t'
	}
	t := strings.TrimRight(line, " \t")
	return t == "STYLE" || t == "REGION"
}

// WriteVTT writes cues as a WebVTT file. A cue's character is written as a voice span
// (<v NAME>), the way WebVTT names a speaker, which players can show or hide and the
// reader reads back as the character; text is escaped as WebVTT requires (&amp; &lt;
// &gt;).
func WriteVTT(w io.Writer, cues []Cue) error {
	if err := validateForWrite("WebVTT", cues); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.WriteString("WEBVTT\n")
	for _, c := range cues {
		fmt.Fprintf(bw, "\n%s --> %s\n", FormatTimecode(c.Start), FormatTimecode(c.End))
		lines := textLines(c.Text)
		if voice := canonName(c.Character); voice != "" {
			bw.WriteString("<v " + escapeVTT(voice) + ">")
			if len(lines) == 0 {
				bw.WriteString("\n")
			}
		}
		for _, l := range lines {
			bw.WriteString(escapeVTT(l))
			bw.WriteString("\n")
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("script: writing WebVTT: %w", err)
	}
	return nil
}
