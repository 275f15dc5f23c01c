package script

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// MaxTimecode is the latest time a timecode may give, and the latest an edit gives a
// line: a script is not 500 hours long, and the bound keeps the arithmetic far from
// overflowing, and the milliseconds within the database's integer columns (596
// hours: 999 h was a 500).
const MaxTimecode = 500*time.Hour - time.Millisecond

// FormatTimecode formats d as HH:MM:SS.mmm (hours grow past two digits when needed),
// rounded to the millisecond, for display and for WebVTT and CSV files.
func FormatTimecode(d time.Duration) string { return formatTimecode(d, '.') }

func formatTimecode(d time.Duration, sep byte) string {
	sign := ""
	d = d.Round(time.Millisecond)
	if d < 0 {
		sign, d = "-", -d
	}
	ms := d.Milliseconds()
	return fmt.Sprintf("%s%02d:%02d:%02d%c%03d", sign, ms/3600000, ms/60000%60, ms/1000%60, sep, ms%1000)
}

// parseTimecode reads one timecode: HH:MM:SS,mmm, HH:MM:SS.mmm, MM:SS.mmm or plain
// seconds (62.345), the fraction optional. The first field has 1 to 3 digits (1 to 7
// for plain seconds), the others exactly 2 and below 60. More than 3 fraction digits
// are rounded to the millisecond.
func parseTimecode(s string) (time.Duration, bool) {
	whole, frac := s, ""
	if i := strings.LastIndexAny(s, ".,"); i >= 0 {
		whole, frac = s[:i], s[i+1:]
		if frac == "" || len(frac) > 9 || !allDigits(frac) {
			return 0, false
		}
	}
	parts := strings.Split(whole, ":")
	if len(parts) > 3 {
		return 0, false
	}
	var total time.Duration
	for i, p := range parts {
		if !allDigits(p) || p == "" {
			return 0, false
		}
		first := i == 0
		switch {
		case first && len(parts) == 1 && len(p) > 7,
			first && len(parts) > 1 && len(p) > 3,
			!first && len(p) != 2:
			return 0, false
		}
		v := atoi(p)
		if !first && v >= 60 {
			return 0, false
		}
		total = total*60 + time.Duration(v)*time.Second
	}
	if frac != "" {
		ns := atoi(frac)
		for range 9 - len(frac) {
			ns *= 10
		}
		total += time.Duration(ns)
	}
	total = total.Round(time.Millisecond)
	if total > MaxTimecode {
		return 0, false
	}
	return total, true
}

// parseTimingLine reads "start --> end [settings]"; WebVTT cue settings and SRT
// coordinates after the end are ignored.
func parseTimingLine(line string) (start, end time.Duration, ok bool) {
	start, end, _, ok = timingLine(line)
	return start, end, ok
}

// timingLine is parseTimingLine that, on failure, also returns what to show: the
// offending timecode, or the whole line when there is no arrow or no end.
func timingLine(line string) (start, end time.Duration, bad string, ok bool) {
	k := strings.Index(line, "-->")
	if k < 0 {
		return 0, 0, strings.TrimSpace(line), false
	}
	left := strings.TrimSpace(line[:k])
	right := strings.TrimLeftFunc(line[k+3:], unicode.IsSpace)
	if i := strings.IndexFunc(right, unicode.IsSpace); i >= 0 {
		right = right[:i]
	}
	if left == "" || right == "" {
		return 0, 0, strings.TrimSpace(line), false
	}
	start, ok = parseTimecode(left)
	if !ok {
		return 0, 0, left, false
	}
	end, ok = parseTimecode(right)
	if !ok {
		return 0, 0, right, false
	}
	return start, end, "", true
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// atoi reads a string of at most 9 ASCII digits.
func atoi(s string) int64 {
	var n int64
	for i := range len(s) {
		n = n*10 + int64(s[i]-'0')
	}
	return n
}
