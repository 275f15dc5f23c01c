package views

import (
	"encoding/json"
	"fmt"
	"github.com/a-h/templ"
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

// emotionSummary is what follows an emotion's mode where a line or its history shows
// it: the text, or a vector's dimensions that are not zero, by name ("sad 0.3, calm
// 0.2"), so that nobody has to count commas to read it.
func emotionSummary(p Page, e *studio.Emotion) string {
	switch e.Mode {
	case studio.EmotionText:
		return ": " + e.Text
	case studio.EmotionVector:
		if len(e.Vector) != len(studio.EmotionNames) {
			return ": " + FormatVector(e.Vector)
		}
		var parts []string
		for i, x := range e.Vector {
			if x != 0 {
				parts = append(parts, p.T("emotion.name."+studio.EmotionNames[i])+" "+FormatVector([]float64{x}))
			}
		}
		if parts == nil {
			return ": " + p.T("emotion.none")
		}
		return ": " + strings.Join(parts, ", ")
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
		return p.T("emotion."+string(e.Mode)) + emotionSummary(p, e)
	}
	add("line.emotion", emo(b.Emotion), emo(a.Emotion))
	if e.Before != nil && e.After != nil && b.DurationLock != a.DurationLock {
		out = append(out, diffRow{p.T("line.duration_lock"), fmt.Sprint(b.DurationLock), fmt.Sprint(a.DurationLock)})
	}
	return out
}

func joinNames(names []string) string { return strings.Join(names, ", ") }

func ratio(r float64) string { return fmt.Sprintf("%.2f", r) }

func renderLabel(p Page, v LineView) string {
	if v.Take != nil || v.Line.State == studio.StateFailed {
		return p.T("line.regenerate")
	}
	return p.T("line.render")
}

// RenderError shows a stored render failure: a catalog message (JSON key and args) or
// plain text.
func RenderError(p Page, stored string) string {
	var m struct {
		Key  string `json:"key"`
		Args []any  `json:"args"`
	}
	if json.Unmarshal([]byte(stored), &m) == nil && m.Key != "" {
		return p.T(m.Key, m.Args...)
	}
	return stored
}

func activeCount(c studio.StateCounts) int {
	n := 0
	for st, v := range c {
		if st.Active() {
			n += v
		}
	}
	return n
}

func deviceName(p Page, d string) string {
	if d == "" {
		return p.T("take.cpu")
	}
	return d
}

func queueAction(paused bool) string {
	if paused {
		return "/admin/queue/resume"
	}
	return "/admin/queue/pause"
}

// exportPolling makes the export list refresh itself while an export is unfinished.
func exportPolling(projectID int64, exports []studio.Export) templ.Attributes {
	for _, e := range exports {
		if e.State == studio.ExportQueued || e.State == studio.ExportRunning {
			return templ.Attributes{"hx-get": idURL("/projects/%d/exports", projectID), "hx-trigger": "every 1s", "hx-swap": "outerHTML"}
		}
	}
	return templ.Attributes{}
}

func exportSeg(s studio.ExportState) string {
	if s == studio.ExportFailed {
		return "st-failed"
	}
	return "st-done"
}

func megabytes(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

// voiceArgs are a voice warning's arguments, for the catalog's Sprintf.
func voiceArgs(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}
