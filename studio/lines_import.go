package studio

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

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
			changed, befores = append(changed, l), append(befores, &before)
		}
		if err := writeLines(tx, userID, "import", befores, changed); err != nil {
			return err
		}
		res.Updated = len(changed)
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
		ids := make([]int64, 0, len(rows)+len(changed))
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		for _, l := range changed {
			ids = append(ids, l.ID)
		}
		if len(ids) > 0 {
			t, err := sqlTx(tx)
			if err != nil {
				return err
			}
			if err := t.QueryRowContext(tx.Statement.Context, "SELECT count(*) FROM lines WHERE id = ANY($1) AND cardinality(flags) > 0",
				ids).Scan(&res.Flagged); err != nil {
				return err
			}
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
		if len(ids) == 0 {
			return nil
		}
		return s.gapsChanged(ctx, tx, projectID)
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
// together in their previous order (the unique index is deferred to the commit), and
// refreshes their flags as refreshFlags does, in the same pass.
func renumberByTime(tx *gorm.DB, projectID int64) error {
	return tx.Exec(`UPDATE lines l SET idx = r.n, flags = r.f FROM (
		SELECT id, row_number() OVER w AS n, array_remove(ARRAY[
			CASE WHEN start_ms < lag(end_ms) OVER w THEN 'overlap' END,
			CASE WHEN end_ms = start_ms THEN 'zero_length' END]::text[], NULL) AS f
		FROM lines WHERE project_id = ? WINDOW w AS (ORDER BY start_ms, idx)) r
		WHERE l.id = r.id AND (l.idx <> r.n OR l.flags IS DISTINCT FROM r.f)`, projectID).Error
}

// ImportLines appends lines to a project: ImportScript in ImportAppend, for the
// callers (the demo, fixtures, benchmarks) that have no file and no options.
func (s *Store) ImportLines(ctx context.Context, userID, projectID int64, lines []NewLine) (*ImportResult, error) {
	return s.ImportScript(ctx, userID, projectID, lines, ImportOpts{Mode: ImportAppend})
}

// The writes of an import go in as arrays, one statement for all the lines (unnest), so
// that a script of MaxCues lines costs a few round trips and no statement of tens of
// thousands of parameters, preview and confirm alike.

// ensureCharacters returns the project's characters by lower-case name, creating
// those that lines name and the project lacks (recorded in res), in the order lines
// first name them.
func ensureCharacters(tx *gorm.DB, projectID int64, lines []NewLine, res *ImportResult) (map[string]int64, error) {
	var chars []Character
	if err := tx.Where("project_id = ?", projectID).Find(&chars).Error; err != nil {
		return nil, err
	}
	byName := map[string]int64{}
	for _, c := range chars {
		byName[strings.ToLower(c.Name)] = c.ID
	}
	var lang string // new characters get the project language's voice
	if err := tx.Raw("SELECT language FROM projects WHERE id = ?", projectID).Scan(&lang).Error; err != nil {
		return nil, err
	}
	var names, colors, voices []string
	seen := map[string]bool{}
	for _, nl := range lines {
		name := strings.TrimSpace(nl.CharacterName)
		key := strings.ToLower(name)
		if name == "" || seen[key] {
			continue
		}
		if _, ok := byName[key]; ok {
			continue
		}
		seen[key] = true
		names = append(names, name)
		colors = append(colors, Palette[(len(chars)+len(names)-1)%len(Palette)])
		voices = append(voices, DefaultVoice(lang, nl.Text))
	}
	if len(names) == 0 {
		return byName, nil
	}
	emotion, err := Emotion{Mode: EmotionSpeaker}.Value()
	if err != nil {
		return nil, err
	}
	t, err := sqlTx(tx)
	if err != nil {
		return nil, err
	}
	rows, err := t.QueryContext(tx.Statement.Context, `INSERT INTO characters (project_id, name, color, emotion, preview_voice)
		SELECT $1, u.name, u.color, $2::jsonb, u.voice FROM unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(name, color, voice, n)
		ORDER BY u.n RETURNING id, name`, projectID, emotion, names, colors, voices)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, err
		}
		byName[strings.ToLower(name)] = id
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	res.CharactersCreated = append(res.CharactersCreated, names...)
	return byName, nil
}

// insertImported inserts lines as drafts numbered from maxIdx+1, with their import
// recorded in the history, in one statement.
func insertImported(tx *gorm.DB, userID, projectID int64, maxIdx int, lines []NewLine, emotions []*Emotion,
	byName map[string]int64) ([]Line, error) {
	rows := make([]Line, len(lines))
	if len(lines) == 0 {
		return rows, nil
	}
	starts, ends := make([]int, len(lines)), make([]int, len(lines))
	texts := make([]string, len(lines))
	chars := make([]*int64, len(lines))
	ems := make([]*string, len(lines))
	for i, nl := range lines {
		var cid *int64
		if id, ok := byName[strings.ToLower(strings.TrimSpace(nl.CharacterName))]; ok {
			cid = &id
		}
		rows[i] = Line{ProjectID: projectID, Idx: maxIdx + i + 1, StartMs: nl.StartMs, EndMs: nl.EndMs,
			Text: strings.TrimSpace(nl.Text), CharacterID: cid, Emotion: emotions[i], DurationLock: true,
			Revision: 1, State: StateDraft, Flags: Flags{}, UpdatedBy: &userID}
		starts[i], ends[i], texts[i], chars[i] = nl.StartMs, nl.EndMs, rows[i].Text, cid
		if e := emotions[i]; e != nil {
			j, err := json.Marshal(e)
			if err != nil {
				return nil, err
			}
			ems[i] = new(string(j))
		}
	}
	t, err := sqlTx(tx)
	if err != nil {
		return nil, err
	}
	// The history's rows are written from the inserted ones in the same statement
	// (its foreign key is checked at the statement's end, when the lines exist).
	q, err := t.QueryContext(tx.Statement.Context, `WITH ins AS (
		INSERT INTO lines (project_id, idx, start_ms, end_ms, text, character_id, emotion, duration_lock, revision, state, flags, updated_by)
		SELECT $1, $2 + u.n, u.s, u.e, u.t, u.c, u.em::jsonb, true, 1, 'draft', '{}', $3
		FROM unnest($4::int[], $5::int[], $6::text[], $7::bigint[], $8::text[]) WITH ORDINALITY AS u(s, e, t, c, em, n)
		RETURNING id, project_id, idx, text, character_id, emotion, notes, start_ms, end_ms, duration_lock
	), hist AS (
		INSERT INTO line_history (line_id, project_id, user_id, action, after)
		SELECT id, project_id, $3, 'import', `+snapshotSQL("ins")+`
		FROM ins
	)
	SELECT id, idx FROM ins`, projectID, maxIdx, userID, starts, ends, texts, chars, ems)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	for q.Next() {
		var id int64
		var idx int
		if err := q.Scan(&id, &idx); err != nil {
			return nil, err
		}
		rows[idx-maxIdx-1].ID = id
	}
	return rows, q.Err()
}

// writeLines writes each of ls as writeLine does (befores[i] is ls[i] before), in one
// statement whatever their number: the lines, and their history, whose snapshots
// the database builds from the rows before and after the update (every part of a
// statement sees the rows as they were when it began).
func writeLines(tx *gorm.DB, userID int64, action string, befores, ls []*Line) error {
	if len(ls) == 0 {
		return nil
	}
	now := time.Now()
	n := len(ls)
	ids, chars := make([]int64, n), make([]*int64, n)
	texts, notes, states := make([]string, n), make([]string, n), make([]string, n)
	ems := make([]*string, n)
	starts, ends, revs, audible := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	locks := make([]bool, n)
	for i, l := range ls {
		stampWrite(userID, l, now, befores[i] != nil && Audible(befores[i], l))
		ids[i], texts[i], chars[i], notes[i] = l.ID, l.Text, l.CharacterID, l.Notes
		starts[i], ends[i], locks[i] = l.StartMs, l.EndMs, l.DurationLock
		revs[i], audible[i], states[i] = l.Revision, l.AudibleRevision, string(l.State)
		if l.Emotion != nil {
			j, err := json.Marshal(l.Emotion)
			if err != nil {
				return err
			}
			ems[i] = new(string(j))
		}
	}
	var uid any // the history's user, none for the system (as addHistory)
	if userID > 0 {
		uid = userID
	}
	t, err := sqlTx(tx)
	if err != nil {
		return err
	}
	_, err = t.ExecContext(tx.Statement.Context, `WITH u AS (
		SELECT * FROM unnest($4::bigint[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::int[], $10::int[],
			$11::bool[], $12::int[], $13::int[], $14::text[]) AS u(id, t, c, em, notes, s, e, lock, rev, aud, state)
	), old AS (
		SELECT l.id, `+snapshotSQL("l")+` AS snap FROM lines l JOIN u ON u.id = l.id
	), upd AS (
		UPDATE lines l SET text = u.t, character_id = u.c, emotion = u.em::jsonb, notes = u.notes,
			start_ms = u.s, end_ms = u.e, duration_lock = u.lock, revision = u.rev, audible_revision = u.aud, state = u.state,
			updated_by = $1, updated_at = $2
		FROM u WHERE l.id = u.id
		RETURNING l.id, l.project_id, `+snapshotSQL("l")+` AS snap
	)
	INSERT INTO line_history (line_id, project_id, user_id, action, before, after)
	SELECT upd.id, upd.project_id, $3, $15, old.snap, upd.snap FROM upd JOIN old ON old.id = upd.id`, userID, now, uid, ids, texts, chars, ems, notes, starts, ends, locks, revs, audible, states, action)
	return err
}

// snapshotSQL is the LineSnapshot of the lines row named l, as SQL building its JSON.
func snapshotSQL(l string) string {
	return strings.NewReplacer("l.", l+".").Replace(`jsonb_build_object('text', l.text, 'character_id', l.character_id,
		'emotion', l.emotion, 'notes', l.notes, 'start_ms', l.start_ms, 'end_ms', l.end_ms, 'duration_lock', l.duration_lock)`)
}
