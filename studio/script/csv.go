package script

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// CSV column roles.
const (
	colStart     = "start"
	colEnd       = "end"
	colCharacter = "character"
	colText      = "text"
	colEmotion   = "emotion"
)

// requiredColumns are the roles a CSV header must name, in the order they are listed
// when missing.
var requiredColumns = []string{colStart, colEnd, colCharacter, colText}

// columnAliases maps normalised header names (lower case, "_" and "-" as spaces) to
// roles: the names spreadsheets from dubbing and subtitling tools use, English and
// Chinese.
var columnAliases = map[string]string{}

func init() {
	for role, names := range map[string][]string{
		colStart:     {"start", "start time", "starttime", "begin", "in", "tc in", "timecode in", "from", "开始", "开始时间", "起始时间", "入点"},
		colEnd:       {"end", "end time", "endtime", "stop", "out", "tc out", "timecode out", "to", "结束", "结束时间", "出点"},
		colCharacter: {"character", "char", "speaker", "name", "role", "voice", "角色", "角色名", "说话人", "人物"},
		colText:      {"text", "line", "dialogue", "dialog", "content", "subtitle", "transcript", "台词", "文本", "内容", "对白"},
		colEmotion:   {"emotion", "mood", "tone", "情绪", "情感", "语气"},
	} {
		for _, n := range names {
			columnAliases[n] = role
		}
	}
}

func columnRole(header string) (string, bool) {
	h := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return ' '
		}
		return r
	}, strings.ToLower(header))
	role, ok := columnAliases[canonName(h)]
	return role, ok
}

// csvField is one field of a CSV row and the line it starts on.
type csvField struct {
	line  int
	value string
}

// csvRow is one CSV record, which may span lines when a quoted field holds newlines.
type csvRow struct {
	line   int
	fields []csvField
}

func (r csvRow) blank() bool {
	for _, f := range r.fields {
		if strings.TrimSpace(f.value) != "" {
			return false
		}
	}
	return true
}

// parseCSV reads a CSV script: a header row, then one cue per row.
func parseCSV(s *source) []Cue {
	first, delim, ok := csvHeader(s.lines)
	if !ok {
		return nil
	}
	rows := readCSV(s, first, delim)
	if len(rows) == 0 {
		return nil // the header's quote is never closed, which is reported
	}
	header := rows[0]
	cols := map[string]int{}
	for k, f := range header.fields {
		role, ok := columnRole(f.value)
		if !ok {
			continue
		}
		if _, dup := cols[role]; dup {
			s.add(header.line, "script.csv_duplicate_column", strings.TrimSpace(f.value))
			continue
		}
		cols[role] = k
	}
	var missing []string
	for _, role := range requiredColumns {
		if _, ok := cols[role]; !ok {
			missing = append(missing, role)
		}
	}
	if len(missing) > 0 {
		s.add(header.line, "script.csv_missing_columns", strings.Join(missing, ", "))
		return nil
	}
	b := cueBuilder{src: s}
	for _, r := range rows[1:] {
		if r.blank() {
			continue
		}
		if !b.next(r.line) {
			break
		}
		if len(r.fields) != len(header.fields) {
			s.add(r.line, "script.csv_column_count", len(r.fields), len(header.fields))
			continue
		}
		start, okStart := csvTimecode(s, r.fields[cols[colStart]])
		end, okEnd := csvTimecode(s, r.fields[cols[colEnd]])
		if !okStart || !okEnd || !b.times(r.line, start, end) {
			continue
		}
		c := Cue{
			SourceLine:  r.line,
			Start:       start,
			End:         end,
			SourceStart: frameSource(r.fields[cols[colStart]]),
			SourceEnd:   frameSource(r.fields[cols[colEnd]]),
			Character:   canonName(r.fields[cols[colCharacter]].value),
			Text:        canonText(r.fields[cols[colText]].value),
		}
		if k, ok := cols[colEmotion]; ok {
			c.Emotion = canonName(r.fields[k].value)
		}
		b.add(r.fields[cols[colText]].line, c)
	}
	return b.cues
}

func csvTimecode(s *source, f csvField) (time.Duration, bool) {
	v := strings.TrimSpace(f.value)
	if v == "" {
		s.add(f.line, "script.missing_timecode")
		return 0, false
	}
	if isFrameTimecode(v) {
		return csvFrameTimecode(s, f.line, v)
	}
	d, ok := parseTimecode(v)
	if !ok {
		s.add(f.line, "script.bad_timecode", v)
	}
	return d, ok
}

// frameSource returns f's timecode as the file wrote it where it counts frames (Cue.SourceStart), else "".
func frameSource(f csvField) string {
	if v := strings.TrimSpace(f.value); isFrameTimecode(v) {
		return v
	}
	return ""
}

// csvFrameTimecode reads v, a timecode with frames on line, at the rate chosen. With
// none chosen, the first one of the file is reported (the setting is missing, not
// the line wrong) and the others are refused without a word.
func csvFrameTimecode(s *source, line int, v string) (time.Duration, bool) {
	first := !s.frames
	s.frames = true
	if s.fps == "" {
		if first {
			s.add(line, "script.no_fps", v)
		}
		return 0, false
	}
	d, key, args := parseFrameTimecode(v, s.fps)
	if key != "" {
		s.add(line, key, args...)
		return 0, false
	}
	return d, true
}

// csvHeader returns the index of the header line of lines, a CSV file, and the
// separator: the first non-blank line and the separator it uses most (csvDelimiter),
// or, after Excel's "sep=;" line, which names the separator for Excel to open the
// file with, the next non-blank line and that separator. ok is false when no line is
// left for a header.
func csvHeader(lines []string) (header int, delim byte, ok bool) {
	i := 0
	for i < len(lines) && isBlank(lines[i]) {
		i++
	}
	if i == len(lines) {
		return 0, 0, false
	}
	if d, sep := excelSeparator(lines[i]); sep {
		for i++; i < len(lines) && isBlank(lines[i]); i++ {
		}
		return i, d, i < len(lines)
	}
	return i, csvDelimiter(lines[i]), true
}

// excelSeparator reads Excel's separator line, "sep=" (in any case) and one
// character, possibly quoted as a cell: "sep=;".
func excelSeparator(line string) (delim byte, ok bool) {
	line = strings.TrimRight(line, " ")
	if len(line) > 2 && line[0] == '"' && line[len(line)-1] == '"' {
		line = line[1 : len(line)-1]
	}
	if len(line) != len("sep=;") || !strings.EqualFold(line[:4], "sep=") {
		return 0, false
	}
	switch d := line[4]; d {
	case '"', '\r', '\n':
		return 0, false
	default:
		return d, d < utf8.RuneSelf
	}
}

// csvDelimiter picks the separator a header line uses most: a comma, a semicolon (what
// spreadsheets write where the comma is the decimal mark) or a tab.
func csvDelimiter(header string) byte {
	counts := map[byte]int{}
	quoted := false
	for i := range len(header) {
		switch c := header[i]; {
		case c == '"':
			quoted = !quoted
		case !quoted && (c == ',' || c == ';' || c == '\t'):
			counts[c]++
		}
	}
	best := byte(',')
	for _, d := range []byte{';', '\t'} {
		if counts[d] > counts[best] {
			best = d
		}
	}
	return best
}

// looksLikeCSVHeader reports whether the header of lines, a file whose first line
// is not blank, names at least two known columns (see csvHeader).
func looksLikeCSVHeader(lines []string) bool {
	i, delim, ok := csvHeader(lines[:min(len(lines), 64)])
	if !ok {
		return false
	}
	src := &source{lines: []string{lines[i]}}
	rows := readCSV(src, 0, delim)
	if len(rows) == 0 {
		return false
	}
	known := map[string]bool{}
	for _, f := range rows[0].fields {
		if role, ok := columnRole(f.value); ok {
			known[role] = true
		}
	}
	return len(known) >= 2
}

// CSV reader states.
const (
	fieldStart = iota // at the start of a field, blanks only so far
	unquoted          // inside a field without quotes
	quoted            // inside a quoted field
	afterQuote        // after a quoted field's closing quote
)

// readCSV reads the records of s.lines from line index from (which is not blank), as
// RFC 4180 with a few kindnesses: blanks around a quoted field are ignored, and a quote
// inside an unquoted field is kept as text. Unlike encoding/csv it knows the line of
// every field and goes on after a problem, so that all of them are reported.
func readCSV(s *source, from int, delim byte) []csvRow {
	var (
		rows      []csvRow
		row       csvRow
		b         strings.Builder
		state     = fieldStart
		fieldLine int
		quoteLine int
	)
	endField := func(next int) {
		row.fields = append(row.fields, csvField{line: fieldLine, value: b.String()})
		b.Reset()
		state = fieldStart
		fieldLine = next
	}
	for li := from; li < len(s.lines); li++ {
		line := s.lines[li]
		if state == quoted {
			b.WriteByte('\n')
		} else {
			row = csvRow{line: li + 1}
			fieldLine = li + 1
		}
		for j := 0; j < len(line); j++ {
			c := line[j]
			switch state {
			case fieldStart:
				switch c {
				case delim:
					endField(li + 1)
				case '"':
					b.Reset()
					state, quoteLine = quoted, li+1
				case ' ', '\t':
					b.WriteByte(c)
				default:
					b.WriteByte(c)
					state = unquoted
				}
			case unquoted:
				if c == delim {
					endField(li + 1)
				} else {
					b.WriteByte(c)
				}
			case quoted:
				switch {
				case c != '"':
					b.WriteByte(c)
				case j+1 < len(line) && line[j+1] == '"':
					b.WriteByte('"')
					j++
				default:
					state = afterQuote
				}
			case afterQuote:
				switch c {
				case delim:
					endField(li + 1)
				case ' ', '\t':
				default:
					s.add(li+1, "script.csv_bad_quote")
					b.WriteByte(c)
					state = unquoted
				}
			}
		}
		if state == quoted {
			continue
		}
		endField(0)
		rows = append(rows, row)
	}
	if state == quoted {
		s.add(quoteLine, "script.csv_unterminated_quote")
	}
	return rows
}

// WriteCSV writes cues as CSV with the header start,end,character,text,emotion, times
// as HH:MM:SS.mmm. The file starts with a UTF-8 byte-order mark, without which Excel
// reads Chinese text as mojibake; every parser here accepts it.
func WriteCSV(w io.Writer, cues []Cue) error {
	if err := validateForWrite("CSV", cues); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.Write(bomUTF8)
	cw := csv.NewWriter(bw)
	cw.Write([]string{colStart, colEnd, colCharacter, colText, colEmotion})
	for _, c := range cues {
		cw.Write([]string{
			FormatTimecode(c.Start), FormatTimecode(c.End),
			canonName(c.Character), canonText(c.Text), canonName(c.Emotion),
		})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("script: writing CSV: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("script: writing CSV: %w", err)
	}
	return nil
}
