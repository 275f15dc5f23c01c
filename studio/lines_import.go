package studio

import (
	"context"
	"errors"
	"sort"
	"strings"

	"gorm.io/gorm"

	"dubstudio/i18n"
)

// ImportMode says what an import does with the lines a project has.
type ImportMode string

const (
	// ImportAppend adds the file's lines to the project's; a line with the times and
	// text of one the project has is an exact duplicate and skipped.
	ImportAppend ImportMode = "append"
	// ImportReplace deletes the project's lines (with their takes and history) and
	// imports the file's.
	ImportReplace ImportMode = "replace"
	// ImportMerge matches each of the file's lines to the project's line in the same
	// slot (MergeOverlap) and updates it; lines that match none are added, the
	// project's other lines stay.
	ImportMerge ImportMode = "merge"
)

// ImportModes lists the modes in the order a form offers them.
var ImportModes = []ImportMode{ImportAppend, ImportMerge, ImportReplace}

// ParseImportMode validates a mode name; "" means ImportAppend.
func ParseImportMode(s string) (ImportMode, bool) {
	if s == "" {
		return ImportAppend, true
	}
	for _, m := range ImportModes {
		if string(m) == s {
			return m, true
		}
	}
	return "", false
}

// What an import does with one of the file's lines (ImportAction.Kind).
const (
	ActionCreate    = "create"    // a new line
	ActionUpdate    = "update"    // updates line Idx
	ActionUnchanged = "unchanged" // matches line Idx, which already says the same
	ActionDuplicate = "duplicate" // an exact duplicate of line Idx, skipped
)

// ImportAction is what an import does with one of the file's lines: Kind, and the
// project's line (its number before the import) it updates, matches or repeats.
type ImportAction struct {
	Kind string
	Idx  int
}

// ImportOpts are the options of ImportScript.
type ImportOpts struct {
	Mode ImportMode
	// DryRun does the whole import in a transaction that is rolled back, so that a
	// preview shows exactly what confirming would do.
	DryRun bool
}

// MergeOverlap is how much of a slot two lines must share to match in ImportMerge:
// the shared time is at least this share of the longer of the two. Lines of zero
// length match when they start together.
const MergeOverlap = 0.5

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// ImportScript imports lines into a project in opts.Mode, all-or-nothing in one
// transaction: characters are created by name as needed, changes are recorded in the
// lines' history (action "import"), and afterwards every line of the project is
// numbered in time order (by start, then by its previous number). A merged line whose
// text is unchanged keeps its takes and, unless its slot moved, its state; a changed
// line goes back to draft as for an edit. The result's Actions say, per line of
// lines, what was done.
func (s *Store) ImportScript(ctx context.Context, userID, projectID int64, lines []NewLine, opts ImportOpts) (*ImportResult, error) {
	emotions, err := s.checkNewLines(lines)
	if err != nil {
		return nil, err
	}
	mode, ok := ParseImportMode(string(opts.Mode))
	if !ok {
		return nil, &ImportError{Problems: []ImportProblem{{0, i18n.Errorf(ErrInvalid, "import.bad_mode")}}}
	}
	res := &ImportResult{Actions: make([]ImportAction, len(lines))}
	err = s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec("SELECT 1 FROM projects WHERE id = ? FOR UPDATE", projectID).Error; err != nil {
			return err
		}
		var existing []Line
		if err := tx.Clauses(forUpdate).Where("project_id = ?", projectID).Order("idx").Find(&existing).Error; err != nil {
			return err
		}
		if mode == ImportReplace {
			for _, l := range existing {
				if l.State.Active() {
					return &ImportError{Problems: []ImportProblem{{0, i18n.Errorf(ErrInvalid, "import.replace_active", l.Idx)}}}
				}
			}
			if err := tx.Where("project_id = ?", projectID).Delete(&Line{}).Error; err != nil {
				return err
			}
			res.Deleted = len(existing)
			existing = nil
		}
		matches := planImport(mode, existing, lines)
		var create []NewLine
		var createEmotions []*Emotion
		for i, m := range matches {
			switch {
			case m.line == nil:
				res.Actions[i] = ImportAction{Kind: ActionCreate}
				create = append(create, lines[i])
				createEmotions = append(createEmotions, emotions[i])
			case m.duplicate:
				res.Actions[i] = ImportAction{Kind: ActionDuplicate, Idx: m.line.Idx}
				res.Duplicates++
			default:
				res.Actions[i] = ImportAction{Kind: ActionUpdate, Idx: m.line.Idx}
			}
		}
		byName, err := ensureCharacters(tx, projectID, importedNames(lines, res.Actions), res)
		if err != nil {
			return err
		}
		var changed []*Line
		var befores []*Line
		for i, m := range matches {
			if m.line == nil || m.duplicate {
				continue
			}
			before := *m.line
			l := m.line
			mergeInto(l, lines[i], emotions[i], byName)
			if snapshotEqual(before.snapshot(), l.snapshot()) {
				res.Actions[i].Kind = ActionUnchanged
				res.Unchanged++
				continue
			}
			if err := writeLine(tx, userID, "import", &before, l); err != nil {
				return err
			}
			res.Updated++
			changed, befores = append(changed, l), append(befores, &before)
		}
		maxIdx := 0
		for _, l := range existing {
			maxIdx = max(maxIdx, l.Idx)
		}
		rows, err := insertImported(tx, userID, projectID, maxIdx, create, createEmotions, byName)
		if err != nil {
			return err
		}
		res.Lines = len(rows)
		if err := renumberByTime(tx, projectID); err != nil {
			return err
		}
		if err := refreshFlags(tx, projectID); err != nil {
			return err
		}
		ids := make([]int64, 0, len(rows)+len(changed))
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		for _, l := range changed {
			ids = append(ids, l.ID)
		}
		if len(ids) > 0 {
			var flagged int64
			if err := tx.Raw("SELECT count(*) FROM lines WHERE id IN ? AND cardinality(flags) > 0", ids).Scan(&flagged).Error; err != nil {
				return err
			}
			res.Flagged = int(flagged)
		}
		if opts.DryRun {
			return errDryRun
		}
		for i := range rows {
			if err := s.lineChanged(ctx, tx, nil, &rows[i]); err != nil {
				return err
			}
		}
		for i, l := range changed {
			if err := s.lineChanged(ctx, tx, befores[i], l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return nil, err
	}
	return res, nil
}

// importMatch is the project's line that one of the file's lines updates, matches or
// repeats; nil for a new line.
type importMatch struct {
	line      *Line
	duplicate bool
}

// planImport matches the file's lines to the project's: in ImportMerge each to the
// unmatched line of the same slot sharing the most time with it (MergeOverlap), in
// ImportAppend each to a line with the same times and text, as an exact duplicate.
func planImport(mode ImportMode, existing []Line, lines []NewLine) []importMatch {
	out := make([]importMatch, len(lines))
	if len(existing) == 0 {
		return out
	}
	if mode == ImportAppend {
		type key struct {
			start, end int
			text       string
		}
		byKey := map[key]*Line{}
		for i := range existing {
			l := &existing[i]
			byKey[key{l.StartMs, l.EndMs, l.Text}] = l
		}
		for i, nl := range lines {
			if l, ok := byKey[key{nl.StartMs, nl.EndMs, strings.TrimSpace(nl.Text)}]; ok {
				out[i] = importMatch{line: l, duplicate: true}
			}
		}
		return out
	}
	// Merge: the project's lines by start; a candidate starts no earlier than the
	// new line's start less the longest slot, and before its end.
	sorted := make([]*Line, len(existing))
	longest := 0
	for i := range existing {
		sorted[i] = &existing[i]
		longest = max(longest, existing[i].DurationMs())
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].StartMs < sorted[j].StartMs })
	taken := map[int64]bool{}
	for i, nl := range lines {
		from := sort.Search(len(sorted), func(k int) bool { return sorted[k].StartMs >= nl.StartMs-longest })
		var best *Line
		bestShared := -1
		for _, l := range sorted[from:] {
			if l.StartMs > nl.EndMs {
				break
			}
			if taken[l.ID] || !sameSlot(l.StartMs, l.EndMs, nl.StartMs, nl.EndMs) {
				continue
			}
			if shared := min(l.EndMs, nl.EndMs) - max(l.StartMs, nl.StartMs); shared > bestShared {
				best, bestShared = l, shared
			}
		}
		if best != nil {
			taken[best.ID] = true
			out[i] = importMatch{line: best}
		}
	}
	return out
}

// sameSlot reports whether two slots share at least MergeOverlap of the longer one.
func sameSlot(aStart, aEnd, bStart, bEnd int) bool {
	longer := max(aEnd-aStart, bEnd-bStart)
	if longer == 0 {
		return aStart == bStart
	}
	shared := min(aEnd, bEnd) - max(aStart, bStart)
	return shared > 0 && float64(shared) >= MergeOverlap*float64(longer)
}

// mergeInto updates l with a line of the file: its slot and text, and its character
// and emotion where the file gives them (a file without names keeps the project's).
func mergeInto(l *Line, nl NewLine, e *Emotion, byName map[string]int64) {
	l.StartMs, l.EndMs = nl.StartMs, nl.EndMs
	l.Text = strings.TrimSpace(nl.Text)
	if name := strings.TrimSpace(nl.CharacterName); name != "" {
		id := byName[strings.ToLower(name)]
		l.CharacterID = &id
	}
	if e != nil {
		l.Emotion = e
	}
}

// importedNames returns the lines whose characters an import needs: all but the
// skipped duplicates.
func importedNames(lines []NewLine, actions []ImportAction) []NewLine {
	out := make([]NewLine, 0, len(lines))
	for i, nl := range lines {
		if actions[i].Kind != ActionDuplicate {
			out = append(out, nl)
		}
	}
	return out
}

// renumberByTime numbers a project's lines 1, 2, ... by start time, lines starting
// together in their previous order (the unique index is deferred to the commit).
func renumberByTime(tx *gorm.DB, projectID int64) error {
	return tx.Exec(`UPDATE lines l SET idx = r.n FROM (
		SELECT id, row_number() OVER (ORDER BY start_ms, idx) AS n FROM lines WHERE project_id = ?) r
		WHERE l.id = r.id AND l.idx <> r.n`, projectID).Error
}
