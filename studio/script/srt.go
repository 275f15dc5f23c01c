package script

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// parseSRT reads SubRip cues: an optional index line, a timing line, text lines, and a
// blank line. A missing blank line between two cues is tolerated when the next cue's
// index and timing line are unmistakable, and so is a file whose every line is followed
// by a blank one (undouble).
func parseSRT(s *source) []Cue {
	lines, at := undouble(s.lines)
	n := len(lines)
	// num is the line number, in the file, of lines[i].
	num := func(i int) int {
		if i < n {
			return at[i] + 1
		}
		return at[n-1] + 1 + i - (n - 1)
	}
	// plain holds the lines with tags removed, which is how the structure is read:
	// a line is a timing line or an index by what it says, not by its markup.
	pl := make([]plainLine, n)
	for i, l := range lines {
		pl[i] = plain(l)
	}
	isTiming := func(i int) bool {
		_, _, ok := parseTimingLine(pl[i].text)
		return ok
	}
	cueStart := func(i int) bool {
		return isTiming(i) || isIndex(pl[i].text) && i+1 < n && isTiming(i+1)
	}
	skip := func(i int) int {
		for i++; i < n && !isBlank(lines[i]) && !cueStart(i); i++ {
		}
		return i
	}
	b := cueBuilder{src: s}
	for i := 0; i < n; {
		if isBlank(lines[i]) {
			i++
			continue
		}
		block := i
		if !b.next(num(block)) {
			break
		}
		timing := i
		if !strings.Contains(pl[i].text, "-->") {
			switch {
			case i+1 < n && !isBlank(lines[i+1]) && (strings.Contains(pl[i+1].text, "-->") || isIndex(pl[i].text)):
				timing = i + 1
				if !strings.Contains(pl[timing].text, "-->") {
					s.add(num(timing), "script.bad_timing_line", pl[timing].text)
					i = skip(timing)
					continue
				}
			default:
				s.add(num(block), "script.missing_timecode")
				i = skip(i)
				continue
			}
		}
		start, end, bad, ok := timingLine(pl[timing].text)
		if !ok {
			s.add(num(timing), "script.bad_timecode", bad)
		} else {
			ok = b.times(num(timing), start, end)
		}
		j := timing + 1
		for j < n && !isBlank(lines[j]) && !cueStart(j) {
			j++
		}
		if ok {
			character, text := cueText(pl[timing+1 : j])
			c := Cue{SourceLine: num(block), Start: start, End: end, Character: character, Text: text}
			if twoVoices(pl[timing+1 : j]) {
				c.Flags = []string{FlagDialogue}
			}
			b.add(num(timing+1), c)
		}
		i = j
	}
	return b.cues
}

// undouble returns the lines of a file written with every line break doubled (each
// line followed by a blank one, as an editor writes "\r\r\n"), with those blank lines
// taken out and a longer run of blank lines, which stood for the blank line between two
// cues, kept as one; at holds the index in lines of each returned line. Any other file
// is returned as it is. A file is doubled when no two of its non-blank lines are
// adjacent and some timing line has its text after one blank line, which in a normal
// file would leave the text without a timing line.
func undouble(lines []string) (out []string, at []int) {
	n := len(lines)
	doubled := false
	for i := range n {
		if isBlank(lines[i]) {
			continue
		}
		if i+1 < n && !isBlank(lines[i+1]) {
			doubled = false
			break
		}
		if i+2 < n && isBlank(lines[i+1]) && !isBlank(lines[i+2]) && strings.Contains(plain(lines[i]).text, "-->") &&
			!strings.Contains(plain(lines[i+2]).text, "-->") && !isIndex(plain(lines[i+2]).text) {
			doubled = true
		}
	}
	at = make([]int, 0, n)
	if !doubled {
		for i := range lines {
			at = append(at, i)
		}
		return lines, at
	}
	for i := 0; i < n; {
		if !isBlank(lines[i]) {
			out, at = append(out, lines[i]), append(at, i)
			i++
			continue
		}
		j := i
		for j < n && isBlank(lines[j]) {
			j++
		}
		if j-i > 1 || i == 0 || j == n {
			out, at = append(out, lines[i]), append(at, i)
		}
		i = j
	}
	return out, at
}

// isIndex reports whether s is an SRT cue number.
func isIndex(s string) bool { return s != "" && len(s) <= 9 && allDigits(s) }

// WriteSRT writes cues as a SubRip file, numbered from 1, with CRLF line ends. A cue's
// character is written as a "NAME: " prefix of its first line, or as a voice span
// (<v NAME>) when a prefix could not carry the name back. Text is escaped only where
// reading it back would change it (escapeSRT), so that text typed with a tag or a
// reference in it ("<i>", "&amp;") reads back as it was, and other text is as typed.
func WriteSRT(w io.Writer, cues []Cue) error {
	if err := validateForWrite("SRT", cues); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for i, c := range cues {
		fmt.Fprintf(bw, "%d\r\n%s --> %s\r\n", i+1, formatTimecode(c.Start, ','), formatTimecode(c.End, ','))
		lines, voice := namedLines(c)
		if voice != "" {
			bw.WriteString("<v " + escapeSRTVoice(voice) + ">")
			if len(lines) == 0 {
				bw.WriteString("\r\n")
			}
		}
		for _, l := range lines {
			bw.WriteString(escapeSRT(l))
			bw.WriteString("\r\n")
		}
		bw.WriteString("\r\n")
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("script: writing SRT: %w", err)
	}
	return nil
}

// namedLines returns the text lines of c with its character as a name prefix. A
// character that a prefix cannot carry back ("Bob!", "A: B", a name of six words) is
// returned as voiceName instead, for the caller to write as a voice span, which both
// parsers read.
func namedLines(c Cue) (lines []string, voiceName string) {
	lines = textLines(c.Text)
	name := canonName(c.Character)
	switch {
	case name == "":
		return lines, ""
	case len(lines) == 0 || !isPrefixName(name):
		// A prefix alone ("ALICE:") is read as text: a name needs text after it.
		return lines, name
	}
	lines[0] = name + ": " + lines[0]
	return lines, ""
}
