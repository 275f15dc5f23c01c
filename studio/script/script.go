// Package script imports and exports dubbing scripts: the timed, per-character lines a
// dubbing editor works on, read from SRT, WebVTT, CSV, SSA/ASS and TTML files and written
// to SRT, WebVTT, CSV and ASS.
//
// Import is all-or-nothing. Parse returns either every cue of the file or a *ParseError
// that lists every problem found, each with its 1-based line number in the source file
// and a message key of the i18n catalog, so that an editor can fix the file in one go
// rather than one error per upload. Things that are legal but worth a look (overlapping
// and zero-length cues) are not errors: they are flagged on the cue and left as they are.
//
// Text is never rewritten beyond what the format requires: known formatting tags (<i>,
// <font ...>, {\an8}, WebVTT's <c>, <v> and timestamp tags) are removed, WebVTT character
// references are decoded, surrounding blanks of each line and empty lines are dropped.
// Quotes, unknown angle-bracket markup such as "<laughs>" and everything else stay.
//
// Characters come from a CSV column, an ASS event's Name field, a TTML agent, a WebVTT
// voice span (<v Alice>) or a name prefix on the first line of a cue ("ALICE: Hello",
// "小明：你好"). Writers put the character back where the format keeps it: the CSV
// column, the ASS Name field, a WebVTT voice span, and in SRT a name prefix, or a voice
// span where a prefix could not carry it ("Bob!"). Parsing what a writer wrote gives
// back the same times, characters and text (emotions too in CSV; ASS keeps times to
// the centisecond). A caller that wants subtitles without speaker names clears the
// cues' characters before writing.
//
// The package is pure: no database, no domain types. A caller that maps errors to HTTP
// statuses wraps a *ParseError with its own sentinel (studio.ErrInvalid).
package script

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"dubstudio/i18n"
)

// Limits on what an import may contain. The size of the file itself is the caller's
// business (it has the bytes before Parse does).
const (
	// MaxCues is the most cues a script may have.
	MaxCues = 20000
	// MaxTextLen is the longest text of one cue, in characters (runes).
	MaxTextLen = 2000
	// MaxNameLen is the longest character name or emotion, in characters (runes).
	MaxNameLen = 100
)

// Flags set on a Cue for findings that are legal but deserve an editor's attention.
const (
	// FlagOverlap marks a cue that starts before an earlier cue of the file has ended.
	FlagOverlap = "overlap"
	// FlagZeroLength marks a cue whose end equals its start.
	FlagZeroLength = "zero_length"
	// FlagDuplicate marks a cue with the times and text of an earlier cue of the file;
	// an import skips it.
	FlagDuplicate = "duplicate"
	// FlagDialogue marks a cue holding two speakers' lines, each opened by a dash
	// ("- Hi.\n- Hello."): a dubbing line has one voice, so it is worth splitting.
	FlagDialogue = "dialogue"
	// FlagLongLine marks a cue with a line of more than LongLine characters.
	FlagLongLine = "long_line"
)

// LongLine is the longest line of cue text, in characters, that is not flagged: the
// 42 of the usual subtitle style guides (Netflix, BBC, EBU). Dubbing does not need
// short lines, so it is a flag, never a limit.
const LongLine = 42

// Format is a script file format.
type Format string

// The supported formats.
const (
	FormatSRT Format = "srt"
	FormatVTT Format = "vtt"
	FormatCSV Format = "csv"
	// FormatASS is SubStation Alpha (SSA) and Advanced SubStation Alpha (ASS); ASS is
	// written (WriteASS).
	FormatASS Format = "ass"
	// FormatTTML is TTML (DFXP, SMPTE-TT, EBU-TT-D, the IMSC text profiles); read only.
	FormatTTML Format = "ttml"
)

// ContentType returns the MIME type to serve an exported file of format f with.
func (f Format) ContentType() string {
	switch f {
	case FormatSRT:
		return "application/x-subrip; charset=utf-8"
	case FormatVTT:
		return "text/vtt; charset=utf-8"
	case FormatCSV:
		return "text/csv; charset=utf-8"
	case FormatASS:
		return "text/x-ssa; charset=utf-8"
	}
	return "application/octet-stream"
}

// Cue is one timed line of a script.
type Cue struct {
	// SourceLine is the 1-based line of the file where the cue starts (its SRT index,
	// WebVTT identifier or timing line, or CSV row). Writers ignore it.
	SourceLine int
	// Start and End are at millisecond precision, 0 <= Start <= End.
	Start, End time.Duration
	// SourceStart and SourceEnd are Start and End as the file wrote them where they
	// count frames (a CSV's HH:MM:SS:FF, read at ImportOpts.FPS), "" otherwise: an
	// import preview shows them beside their reading. Writers ignore them.
	SourceStart, SourceEnd string
	// Character is who speaks the line; empty when the file does not say.
	Character string
	// Text is the line's text, its lines joined with "\n".
	Text string
	// Emotion is the CSV emotion column; SRT and WebVTT have none.
	Emotion string
	// Flags lists findings about the cue (FlagOverlap, FlagZeroLength), nil if none.
	Flags []string
}

// ErrInvalidCue is what a writer's error unwraps to when a cue cannot be written
// because its times are negative or its end is before its start.
var ErrInvalidCue = errors.New("invalid cue")

// Problem is one reason why a file cannot be imported.
type Problem struct {
	// Line is the 1-based line of the source file; problems with the whole file
	// (empty, unknown format) are reported on line 1.
	Line int
	// Key is the i18n message key ("script.bad_timecode"), Args its arguments.
	Key  string
	Args []any
}

// In returns the problem's text, with its line number, in lang.
func (p Problem) In(lang i18n.Lang) string {
	return i18n.T(lang, "script.problem_at_line", p.Line, i18n.T(lang, p.Key, p.Args...))
}

// ParseError is returned by the parsers when a file cannot be imported. It lists every
// problem found, ordered by line.
type ParseError struct {
	Problems []Problem
}

// Error returns the problems in English, on one line.
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("script: ")
	if len(e.Problems) == 1 {
		b.WriteString("1 problem: ")
	} else {
		fmt.Fprintf(&b, "%d problems: ", len(e.Problems))
	}
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.TrimSuffix(p.In(i18n.EN), "."))
	}
	return b.String()
}

// Parse reads a script in any supported format. The format is recognised from the
// content (a WEBVTT header, an SRT cue, a CSV header row); the extension of filename
// decides only when the content does not.
func Parse(filename string, data []byte) ([]Cue, error) {
	res, err := Import(filename, data, ImportOpts{})
	return res.Cues, err
}

// Result is what Import read from a file.
type Result struct {
	// Cues are the cues of the file, nil when it cannot be imported.
	Cues []Cue
	// Format is the format recognised, "" if none.
	Format Format
	// Encoding is the encoding the file was read in (EncodingUTF8, EncodingGB18030, ...):
	// the one asked for, or the one detected.
	Encoding string
	// FPS is the rate the file's timecodes with frames were counted at (ImportOpts.FPS);
	// "" when it has none.
	FPS FPS
}

// ImportOpts say how Import reads a file; the zero value is what Parse does.
type ImportOpts struct {
	// Encoding is one of Encodings, or "" for the encoding detected from the content.
	Encoding string
	// FPS is the frame rate that a CSV's timecodes with frames (HH:MM:SS:FF, and
	// HH:MM:SS;FF drop-frame at 29.97) count at, one of FrameRates. With "" such a
	// timecode is a problem that names the setting; timecodes in milliseconds are
	// read whatever it is.
	FPS FPS
}

// Import reads a script as Parse does, with opts. It reports the format and the
// encoding even when the file cannot be imported, so that a user can pick another.
func Import(filename string, data []byte, opts ImportOpts) (Result, error) {
	if opts.Encoding != "" && !KnownEncoding(opts.Encoding) {
		return Result{}, &ParseError{Problems: []Problem{{Line: 1, Key: "script.unknown_encoding", Args: []any{opts.Encoding}}}}
	}
	if opts.FPS != "" && !KnownFPS(opts.FPS) {
		return Result{}, &ParseError{Problems: []Problem{{Line: 1, Key: "script.unknown_fps", Args: []any{string(opts.FPS)}}}}
	}
	src := decodeAs(data, opts.Encoding)
	src.fps = opts.FPS
	res := Result{Format: detect(filename, src), Encoding: src.encoding}
	if res.Format == "" && src.fatal() == nil {
		src.add(1, "script.unknown_format")
	}
	cues, err := parseSource(res.Format, src)
	res.Cues = cues
	if src.frames {
		res.FPS = src.fps
	}
	return res, err
}

// Detect returns the format of a script, recognised as Parse does, or "" if it is
// none of the supported ones.
func Detect(filename string, data []byte) Format {
	src := decode(data)
	return detect(filename, src)
}

// ParseSRT reads a SubRip file.
func ParseSRT(data []byte) ([]Cue, error) { return parseSource(FormatSRT, decode(data)) }

// ParseVTT reads a WebVTT file.
func ParseVTT(data []byte) ([]Cue, error) { return parseSource(FormatVTT, decode(data)) }

// ParseASS reads the Dialogue events of an SSA/ASS file.
func ParseASS(data []byte) ([]Cue, error) { return parseSource(FormatASS, decode(data)) }

// ParseTTML reads the paragraphs of a TTML document.
func ParseTTML(data []byte) ([]Cue, error) { return parseSource(FormatTTML, decode(data)) }

// ParseCSV reads a CSV file whose first row names the columns: start, end, character,
// text and, optionally, emotion (in any order and case; common aliases such as "speaker"
// or "dialogue" are accepted, other columns are ignored). The separator is a comma, a
// semicolon or a tab, whichever the header row uses, or the one named by a first line
// "sep=;", which tools write for Excel.
func ParseCSV(data []byte) ([]Cue, error) { return parseSource(FormatCSV, decode(data)) }

// Write writes cues to w in format f.
func Write(w io.Writer, f Format, cues []Cue) error {
	switch f {
	case FormatSRT:
		return WriteSRT(w, cues)
	case FormatVTT:
		return WriteVTT(w, cues)
	case FormatCSV:
		return WriteCSV(w, cues)
	case FormatASS:
		return WriteASS(w, cues)
	}
	return fmt.Errorf("script: unknown format %q", string(f))
}

func parseSource(f Format, src *source) ([]Cue, error) {
	var cues []Cue
	if src.fatal() == nil {
		switch f {
		case FormatSRT:
			cues = parseSRT(src)
		case FormatVTT:
			cues = parseVTT(src)
		case FormatCSV:
			cues = parseCSV(src)
		case FormatASS:
			cues = parseASS(src)
		case FormatTTML:
			cues = parseTTML(src)
		}
		if len(cues) == 0 && !src.failed() {
			src.add(1, "script.no_cues")
		}
	}
	if err := src.err(); err != nil {
		return nil, err
	}
	flag(cues)
	return cues, nil
}

// detect recognises the format from the first non-blank line, then from the extension.
func detect(filename string, src *source) Format {
	if src.fatal() != nil {
		return ""
	}
	lines := src.lines
	i := 0
	for i < len(lines) && isBlank(lines[i]) {
		i++
	}
	if i < len(lines) {
		first := lines[i]
		switch {
		case isVTTHeader(first):
			return FormatVTT
		case isASSHeader(first):
			return FormatASS
		case strings.Contains(first, "-->"):
			if _, _, ok := parseTimingLine(first); ok {
				return FormatSRT
			}
		case i+1 < len(lines) && strings.Contains(lines[i+1], "-->"):
			if _, _, ok := parseTimingLine(lines[i+1]); ok {
				return FormatSRT
			}
		}
		if isTTML(lines, i) {
			return FormatTTML
		}
		if looksLikeCSVHeader(lines[i:]) {
			return FormatCSV
		}
	}
	switch strings.ToLower(filepath.Ext(filename)) {
	case ".srt":
		return FormatSRT
	case ".vtt", ".webvtt":
		return FormatVTT
	case ".csv", ".tsv":
		return FormatCSV
	case ".ass", ".ssa":
		return FormatASS
	case ".ttml", ".dfxp", ".xml":
		return FormatTTML
	}
	return ""
}

// flag sorts the cues by start time (stable: cues starting together keep the file's
// order), then sets FlagDuplicate, FlagOverlap, FlagZeroLength, FlagDialogue and
// FlagLongLine. A duplicate is not counted as an overlap of the cue it repeats, nor
// flagged otherwise. FlagDialogue set by a parser (two voice spans, twoVoices) stays.
func flag(cues []Cue) {
	sort.SliceStable(cues, func(i, j int) bool { return cues[i].Start < cues[j].Start })
	type key struct {
		start, end time.Duration
		text       string
	}
	seen := map[key]bool{}
	var maxEnd time.Duration
	for i := range cues {
		c := &cues[i]
		voiced := slices.Contains(c.Flags, FlagDialogue)
		c.Flags = nil
		k := key{c.Start, c.End, c.Text}
		if seen[k] {
			c.Flags = append(c.Flags, FlagDuplicate)
			continue
		}
		seen[k] = true
		if i > 0 && c.Start < maxEnd {
			c.Flags = append(c.Flags, FlagOverlap)
		}
		if c.End == c.Start {
			c.Flags = append(c.Flags, FlagZeroLength)
		}
		if voiced || isDialogue(c.Text) {
			c.Flags = append(c.Flags, FlagDialogue)
		}
		if hasLongLine(c.Text) {
			c.Flags = append(c.Flags, FlagLongLine)
		}
		maxEnd = max(maxEnd, c.End)
	}
}

// dialogueDash matches a dash opening a speaker's turn: a hyphen, en dash or em dash
// at the start of a line, or after a sentence's end on the same line, then a blank.
var dialogueDash = regexp.MustCompile(`(?:^|[.!?…。！？]["”’»]?\s+)[-‐–—]\s*\S`)

// isDialogue reports whether text holds two speakers' turns marked with dashes:
// "- Hi.\n- Hello.", or "- Hi. - Hello." on one line. A dash on the first line
// alone does not count ("- and then...").
func isDialogue(text string) bool {
	turns := 0
	for _, l := range strings.Split(text, "\n") {
		turns += len(dialogueDash.FindAllStringIndex(l, -1))
	}
	return turns >= 2
}

// hasLongLine reports whether a line of text is longer than LongLine characters.
func hasLongLine(text string) bool {
	for l := range strings.SplitSeq(text, "\n") {
		if utf8.RuneCountInString(l) > LongLine {
			return true
		}
	}
	return false
}

// validateForWrite checks what every writer needs: times that can be written.
func validateForWrite(format string, cues []Cue) error {
	for i, c := range cues {
		if c.Start < 0 || c.End < c.Start {
			return fmt.Errorf("script: writing %s: cue %d: start %s, end %s: %w",
				format, i+1, FormatTimecode(c.Start), FormatTimecode(c.End), ErrInvalidCue)
		}
	}
	return nil
}
