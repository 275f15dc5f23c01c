package script

import (
	"time"
	"unicode/utf8"
)

// cueBuilder collects the cues of a file and checks what every format shares: times,
// lengths and the number of cues.
type cueBuilder struct {
	src   *source
	cues  []Cue
	count int
}

// next counts a cue starting on line; it returns false, after reporting it once, when
// the file has more than MaxCues cues, and parsing should stop.
func (b *cueBuilder) next(line int) bool {
	b.count++
	if b.count > MaxCues {
		b.src.add(line, "script.too_many_cues", MaxCues)
		return false
	}
	return true
}

// times checks a cue's start and end, read on line.
func (b *cueBuilder) times(line int, start, end time.Duration) bool {
	if end < start {
		b.src.add(line, "script.end_before_start", FormatTimecode(end), FormatTimecode(start))
		return false
	}
	return true
}

// add checks the lengths of a cue, its text read from line textLine, and keeps it.
func (b *cueBuilder) add(textLine int, c Cue) {
	ok := true
	if n := utf8.RuneCountInString(c.Text); n > MaxTextLen {
		b.src.add(textLine, "script.text_too_long", n, MaxTextLen)
		ok = false
	}
	if n := utf8.RuneCountInString(c.Character); n > MaxNameLen {
		b.src.add(textLine, "script.name_too_long", n, MaxNameLen)
		ok = false
	}
	if n := utf8.RuneCountInString(c.Emotion); n > MaxNameLen {
		b.src.add(textLine, "script.emotion_too_long", n, MaxNameLen)
		ok = false
	}
	if ok && !b.src.failed() {
		b.cues = append(b.cues, c)
	}
}
