package views

import (
	"fmt"
	"strings"

	"dubstudio/studio"
)

func boolAttr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func percentWidth(n, total int) string {
	return fmt.Sprintf("width:%.3f%%", 100*float64(n)/float64(total))
}

func progressTitle(p Page, c studio.StateCounts) string {
	var parts []string
	for _, st := range studio.LineStates {
		if c[st] > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", p.T("state."+string(st)), c[st]))
		}
	}
	return strings.Join(parts, ", ")
}

func conflictBy(ce *studio.ConflictError) string {
	if ce.By != nil {
		return ce.By.Name()
	}
	return "?"
}

func emotionSummary(e *studio.Emotion) string {
	switch e.Mode {
	case studio.EmotionText:
		return ": " + e.Text
	case studio.EmotionVector:
		return ": " + FormatVector(e.Vector)
	}
	return ""
}

// FormatVector writes an emotion vector as the comma-separated numbers a user types.
func FormatVector(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", x), "0"), ".")
		if parts[i] == "" {
			parts[i] = "0"
		}
	}
	return strings.Join(parts, ",")
}

func historyUser(p Page, e studio.HistoryEntry) string {
	if e.UserName == "" {
		return p.T("history.system")
	}
	return e.UserName
}

type diffRow struct{ Field, Before, After string }

func historyDiff(p Page, e studio.HistoryEntry, names map[int64]string) []diffRow {
	var b, a studio.LineSnapshot
	if e.Before != nil {
		b = *e.Before
	}
	if e.After != nil {
		a = *e.After
	}
	var out []diffRow
	add := func(field, before, after string) {
		if before != after {
			out = append(out, diffRow{p.T(field), before, after})
		}
	}
	add("line.text", b.Text, a.Text)
	charName := func(id *int64) string {
		if id == nil {
			return "—"
		}
		if n, ok := names[*id]; ok {
			return n
		}
		return "#" + itoa(*id)
	}
	add("line.character", charName(b.CharacterID), charName(a.CharacterID))
	add("line.start", Timecode(b.StartMs), Timecode(a.StartMs))
	add("line.end", Timecode(b.EndMs), Timecode(a.EndMs))
	add("line.notes", b.Notes, a.Notes)
	emo := func(e *studio.Emotion) string {
		if e == nil {
			return p.T("emotion.default")
		}
		return p.T("emotion."+string(e.Mode)) + emotionSummary(e)
	}
	add("line.emotion", emo(b.Emotion), emo(a.Emotion))
	if e.Before != nil && e.After != nil && b.DurationLock != a.DurationLock {
		out = append(out, diffRow{p.T("line.duration_lock"), fmt.Sprint(b.DurationLock), fmt.Sprint(a.DurationLock)})
	}
	return out
}

func joinNames(names []string) string { return strings.Join(names, ", ") }
