package studio

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"dubstudio/i18n"
)

// LineState is where a line is in its life from draft to done.
type LineState string

const (
	StateDraft        LineState = "draft"
	StateQueued       LineState = "queued"
	StateWaitingGPU   LineState = "waiting_gpu"
	StateSynthesizing LineState = "synthesizing"
	StateFitting      LineState = "fitting"
	StateDone         LineState = "done"
	StateNeedsReview  LineState = "needs_review"
	StateFailed       LineState = "failed"
	StateCancelled    LineState = "cancelled"
)

// LineStates lists every state in the order the interface shows them.
var LineStates = []LineState{StateDraft, StateQueued, StateWaitingGPU, StateSynthesizing, StateFitting,
	StateDone, StateNeedsReview, StateFailed, StateCancelled}

// Active reports whether a render of the line is queued or running.
func (s LineState) Active() bool {
	switch s {
	case StateQueued, StateWaitingGPU, StateSynthesizing, StateFitting:
		return true
	}
	return false
}

// Rendered reports whether a line in state s has its take: done, or waiting for
// review (doneStates, whose audio counts as rendered).
func (s LineState) Rendered() bool { return s == StateDone || s == StateNeedsReview }

// ParseLineState validates a state name; "" is allowed and means any.
func ParseLineState(s string) (LineState, bool) {
	if s == "" {
		return "", true
	}
	for _, st := range LineStates {
		if string(st) == s {
			return st, true
		}
	}
	return "", false
}

// Flags are findings about a line's timing that an editor should look at.
type Flags []string

const (
	FlagOverlap    = "overlap"
	FlagZeroLength = "zero_length"
)

// Has reports whether f contains flag.
func (f Flags) Has(flag string) bool {
	for _, x := range f {
		if x == flag {
			return true
		}
	}
	return false
}

// Value implements driver.Valuer as a Postgres text[] literal; flags are plain words.
func (f Flags) Value() (driver.Value, error) {
	return "{" + strings.Join(f, ",") + "}", nil
}

// Scan implements sql.Scanner for a text[] of plain words.
func (f *Flags) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	case nil:
		*f = nil
		return nil
	default:
		return fmt.Errorf("flags: cannot scan %T", src)
	}
	s = strings.Trim(s, "{}")
	if s == "" {
		*f = Flags{}
		return nil
	}
	*f = strings.Split(s, ",")
	return nil
}

// Line is one timed line of the script.
type Line struct {
	ID           int64
	ProjectID    int64
	Idx          int
	StartMs      int
	EndMs        int
	Text         string
	CharacterID  *int64
	Emotion      *Emotion
	Notes        string
	DurationLock bool
	Revision     int
	State        LineState
	Flags        Flags `gorm:"type:text[]"`
	UpdatedBy    *int64
	CreatedAt    time.Time
	UpdatedAt    time.Time

	// Render bookkeeping, written by the workflow engine.
	RenderSeq      int    // bumped by every render request; a job for an older one is stale
	Attempts       int    // attempts of the current render
	LastError      string // what a user should read about the last failure
	LastTraceback  string
	JobID          *int64 // the River job of the current render
	CurrentTakeID  *int64
	ApprovedTakeID *int64
	StateChangedAt time.Time

	// AudibleRevision is the revision of the last change to what the line sounds
	// like (Audible): a take rendered from an earlier revision is stale.
	AudibleRevision int
}

// LatestChangeAudible reports whether the line's latest revision changed what it
// sounds like (the store's decision when it wrote it: Audible, less a move of a line
// not being rendered), so that a take of an earlier revision is stale.
func (l Line) LatestChangeAudible() bool { return l.AudibleRevision == l.Revision }

// DurationMs is the slot's length: the target duration of the dubbed line.
func (l Line) DurationMs() int { return l.EndMs - l.StartMs }

func (l *Line) snapshot() LineSnapshot {
	return LineSnapshot{l.Text, l.CharacterID, l.Emotion, l.Notes, l.StartMs, l.EndMs, l.DurationLock}
}

// MaxLineText is the longest text a line may hold, in characters.
const MaxLineText = 2000

// ValidateLineText checks a line's text: length and no control characters.
func ValidateLineText(text string) error {
	if !utf8.ValidString(text) || len([]rune(text)) > MaxLineText {
		return i18n.Errorf(ErrInvalid, "line.bad_text", MaxLineText)
	}
	for _, r := range text {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return i18n.Errorf(ErrInvalid, "line.control_chars")
		}
	}
	return nil
}

// LineFilter selects lines for the editor.
type LineFilter struct {
	State       LineState
	CharacterID int64 // 0: any; -1: lines without a character
	Query       string
	Page        int // 1-based
	PerPage     int
}

// LinesPage is one page of a project's lines.
type LinesPage struct {
	Lines   []Line
	Total   int64
	Page    int
	PerPage int
}

// Pages is the number of pages.
func (p LinesPage) Pages() int {
	if p.PerPage == 0 {
		return 1
	}
	n := int((p.Total + int64(p.PerPage) - 1) / int64(p.PerPage))
	return max(n, 1)
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// Lines returns a filtered page of a project's lines in script order.
func (s *Store) Lines(ctx context.Context, projectID int64, f LineFilter) (LinesPage, error) {
	if f.PerPage <= 0 || f.PerPage > 500 {
		f.PerPage = 100
	}
	if f.Page < 1 {
		f.Page = 1
	}
	q := s.db.WithContext(ctx).Model(&Line{}).Where("project_id = ?", projectID)
	if f.State != "" {
		q = q.Where("state = ?", f.State)
	}
	switch {
	case f.CharacterID > 0:
		q = q.Where("character_id = ?", f.CharacterID)
	case f.CharacterID < 0:
		q = q.Where("character_id IS NULL")
	}
	if qs := strings.TrimSpace(f.Query); qs != "" {
		q = q.Where("text ILIKE ?", "%"+escapeLike(qs)+"%")
	}
	page := LinesPage{Page: f.Page, PerPage: f.PerPage}
	if err := q.Session(&gorm.Session{}).Count(&page.Total).Error; err != nil {
		return page, err
	}
	err := q.Order("idx").Offset((f.Page - 1) * f.PerPage).Limit(f.PerPage).Find(&page.Lines).Error
	return page, err
}

// LinesByIDs returns the given lines of a project in script order.
func (s *Store) LinesByIDs(ctx context.Context, projectID int64, ids []int64) ([]Line, error) {
	var ls []Line
	err := s.db.WithContext(ctx).Where("project_id = ? AND id IN ?", projectID, ids).Order("idx").Find(&ls).Error
	return ls, err
}

// Line returns one line of a project.
func (s *Store) Line(ctx context.Context, projectID, id int64) (*Line, error) {
	var l Line
	err := s.db.WithContext(ctx).Where("project_id = ? AND id = ?", projectID, id).First(&l).Error
	return &l, notFound(err, "line")
}

// ConflictError is a save based on a revision someone else has already replaced.
type ConflictError struct {
	Current *Line
	By      *User
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("line %d changed to revision %d in the meantime", e.Current.ID, e.Current.Revision)
}
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Defaults of Limits, matching the settings MAX_LINE_SECONDS and MAX_EXPORT_SECONDS.
const (
	DefaultMaxLineMs   = 60_000
	DefaultMaxExportMs = 4 * 3600_000
)

// Limits bound what a project may hold, so that rendering and exporting it take
// bounded memory and disk. Zero fields take the defaults above.
type Limits struct {
	// MaxLineMs is the longest a line's slot (end - start) may be, on import, edit,
	// merge and render.
	MaxLineMs int
	// MaxExportMs is the longest programme (the last line's end) an export accepts.
	MaxExportMs int
}

// LineMs returns the maximum line length in effect.
func (l Limits) LineMs() int {
	if l.MaxLineMs > 0 {
		return l.MaxLineMs
	}
	return DefaultMaxLineMs
}

// ExportMs returns the maximum programme length of an export in effect.
func (l Limits) ExportMs() int {
	if l.MaxExportMs > 0 {
		return l.MaxExportMs
	}
	return DefaultMaxExportMs
}

// checkTiming says what is wrong with a line's start and end, or nil.
func (s *Store) checkTiming(startMs, endMs int) *i18n.Error {
	if startMs < 0 || endMs < startMs {
		return i18n.Errorf(ErrInvalid, "line.bad_timing")
	}
	if most := s.Limits.LineMs(); endMs-startMs > most {
		return i18n.Errorf(ErrInvalid, "line.too_long", seconds(endMs-startMs), seconds(most))
	}
	return nil
}

// seconds formats a length in milliseconds as seconds for a message ("7200.5").
func seconds(ms int) string { return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) }

// LineEdit is a change to one line, based on the revision the editor saw. Nil fields
// stay as they are.
type LineEdit struct {
	BaseRevision int
	Text         *string
	CharacterID  **int64
	Emotion      **Emotion
	Notes        *string
	StartMs      *int
	EndMs        *int
	DurationLock *bool
}

// UpdateLine applies an edit if the line is still at e.BaseRevision; otherwise it
// returns a *ConflictError holding the current line. Every change bumps the revision
// and is kept in the line's history.
func (s *Store) UpdateLine(ctx context.Context, userID int64, projectID, lineID int64, e LineEdit) (*Line, error) {
	if e.Text != nil {
		t := strings.TrimSpace(strings.ReplaceAll(*e.Text, "\r\n", "\n"))
		if err := ValidateLineText(t); err != nil {
			return nil, FieldsError{"text": asI18n(err)}
		}
		e.Text = &t
	}
	if e.Notes != nil {
		if err := ValidateLineText(*e.Notes); err != nil {
			return nil, FieldsError{"notes": asI18n(err)}
		}
	}
	if e.Emotion != nil && *e.Emotion != nil {
		if err := s.Limits.checkEmotion(**e.Emotion); err != nil {
			return nil, FieldsError{"emotion": asI18n(err)}
		}
	}
	var out *Line
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var l Line
		if err := tx.Clauses(forUpdate).Where("project_id = ? AND id = ?", projectID, lineID).First(&l).Error; err != nil {
			return notFound(err, "line")
		}
		if l.Revision != e.BaseRevision {
			ce := &ConflictError{Current: &l}
			if l.UpdatedBy != nil {
				var u User
				if tx.First(&u, *l.UpdatedBy).Error == nil {
					ce.By = &u
				}
			}
			return ce
		}
		before := l
		if e.Text != nil {
			l.Text = *e.Text
		}
		if e.CharacterID != nil {
			if err := checkCharacter(tx, projectID, *e.CharacterID); err != nil {
				return err
			}
			l.CharacterID = *e.CharacterID
		}
		if e.Emotion != nil {
			l.Emotion = *e.Emotion
		}
		if e.Notes != nil {
			l.Notes = *e.Notes
		}
		if e.StartMs != nil {
			l.StartMs = *e.StartMs
		}
		if e.EndMs != nil {
			l.EndMs = *e.EndMs
		}
		if e.DurationLock != nil {
			l.DurationLock = *e.DurationLock
		}
		if err := s.checkTiming(l.StartMs, l.EndMs); err != nil {
			return FieldsError{"end": err}
		}
		if snapshotEqual(before.snapshot(), l.snapshot()) {
			out = &l
			return nil
		}
		// A synthesis aims at its slot's length, not its start: a move keeps the take
		// of a line not being rendered (whose fit may have read the old gap). Where
		// its tail no longer fits before the next line, the GapsChanged hook fits it
		// again.
		audible := Audible(&before, &l) && (!Moved(&before, &l) || l.State.Active())
		return s.saveLine(ctx, tx, userID, "edit", &before, &l, audible, func() { out = &l })
	})
	return out, err
}

// forUpdate makes two saves of one line serialise, so the second sees the first's revision.
var forUpdate = clause.Locking{Strength: clause.LockingStrengthUpdate}

// snapshotEqual reports whether two snapshots say the same: their JSON (what the
// history keeps) is equal. Field by field, so that an import comparing thousands of
// lines encodes only the emotions of those whose other fields match.
func snapshotEqual(a, b LineSnapshot) bool {
	if a.Text != b.Text || a.Notes != b.Notes || a.StartMs != b.StartMs || a.EndMs != b.EndMs ||
		a.DurationLock != b.DurationLock || (a.CharacterID == nil) != (b.CharacterID == nil) ||
		a.CharacterID != nil && *a.CharacterID != *b.CharacterID {
		return false
	}
	if a.Emotion == nil || b.Emotion == nil {
		return a.Emotion == b.Emotion
	}
	ja, _ := json.Marshal(a.Emotion)
	jb, _ := json.Marshal(b.Emotion)
	return string(ja) == string(jb)
}

func asI18n(err error) *i18n.Error {
	var ie *i18n.Error
	if errors.As(err, &ie) {
		return ie
	}
	return i18n.Errorf(ErrInvalid, "error.bad_request")
}

func checkCharacter(tx *gorm.DB, projectID int64, id *int64) error {
	if id == nil {
		return nil
	}
	var n int64
	if err := tx.Model(&Character{}).Where("project_id = ? AND id = ?", projectID, *id).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return FieldsError{"character": i18n.Errorf(ErrInvalid, "line.bad_character")}
	}
	return nil
}

// Audible reports whether a change alters what the line sounds like (so its audio is
// out of date); notes do not.
func Audible(before, after *Line) bool {
	b, a := before.snapshot(), after.snapshot()
	b.Notes, a.Notes = "", ""
	return !snapshotEqual(b, a)
}

// Moved reports whether after is before shifted in time and nothing else: the start
// changed, the slot's length did not, nor anything else that is heard. A synthesis
// depends on the slot's length (the duration it aims at), not on where the slot
// starts.
func Moved(before, after *Line) bool {
	if before.StartMs == after.StartMs || before.DurationMs() != after.DurationMs() {
		return false
	}
	b := *after
	b.StartMs, b.EndMs = before.StartMs, before.EndMs
	return !Audible(before, &b)
}

// saveLine writes l (bumping its revision and, where the change is audible, resetting
// a finished render to draft), records history and runs the LineChanged hook, all in
// tx.
func (s *Store) saveLine(ctx context.Context, tx *gorm.DB, userID int64, action string, before, l *Line, audible bool, done func()) error {
	if err := writeLine(tx, userID, action, before, l, audible); err != nil {
		return err
	}
	slots := before == nil || before.StartMs != l.StartMs || before.EndMs != l.EndMs
	if slots {
		if err := refreshFlags(tx, l.ProjectID); err != nil {
			return err
		}
	}
	if err := s.lineChanged(ctx, tx, before, l); err != nil {
		return err
	}
	if slots {
		if err := s.gapsChanged(ctx, tx, l.ProjectID); err != nil {
			return err
		}
	}
	done()
	return nil
}

// writeLine writes l as saveLine does, and its history, without refreshing the
// project's flags or running the hook.
func writeLine(tx *gorm.DB, userID int64, action string, before, l *Line, audible bool) error {
	stampWrite(userID, l, time.Now(), audible)
	err := tx.Model(&Line{}).Where("id = ?", l.ID).Updates(map[string]any{
		"text": l.Text, "character_id": l.CharacterID, "emotion": l.Emotion, "notes": l.Notes,
		"start_ms": l.StartMs, "end_ms": l.EndMs, "duration_lock": l.DurationLock,
		"revision": l.Revision, "audible_revision": l.AudibleRevision, "state": l.State, "updated_by": userID, "updated_at": l.UpdatedAt,
	}).Error
	if err != nil {
		return err
	}
	return addHistory(tx, userID, action, before, l)
}

// stampWrite does a write's bookkeeping on l: its revision bumped, who and when, and
// an audible change sending a line not being rendered back to draft.
func stampWrite(userID int64, l *Line, now time.Time, audible bool) {
	l.Revision++
	l.UpdatedBy = &userID
	l.UpdatedAt = now
	if audible {
		l.AudibleRevision = l.Revision
		if !l.State.Active() {
			l.State = StateDraft
		}
	}
}

// lineChanged runs the LineChanged hook, if any, in tx.
func (s *Store) lineChanged(ctx context.Context, tx *gorm.DB, before, after *Line) error {
	if s.LineChanged == nil {
		return nil
	}
	t, err := sqlTx(tx)
	if err != nil {
		return err
	}
	return s.LineChanged(ctx, t, before, after)
}

// gapsChanged runs the GapsChanged hook, if any, in tx, for lineIDs of the project
// (all of them where none are given).
func (s *Store) gapsChanged(ctx context.Context, tx *gorm.DB, projectID int64, lineIDs ...int64) error {
	if s.GapsChanged == nil {
		return nil
	}
	t, err := sqlTx(tx)
	if err != nil {
		return err
	}
	return s.GapsChanged(ctx, t, projectID, lineIDs)
}

// CheckOverrun runs the GapsChanged hook for one line, in a transaction of its own:
// a render records its take after it read the gap, and a change of the slots that
// committed meanwhile skipped the line, which was being rendered then.
func (s *Store) CheckOverrun(ctx context.Context, projectID, lineID int64) error {
	return s.inTx(ctx, func(tx *gorm.DB) error { return s.gapsChanged(ctx, tx, projectID, lineID) })
}

// RequeueLine records, in tx (the transaction a LineChanged hook was given), the
// render that the hook queued for a line whose audible content changed while it was
// being rendered: its render sequence number, the state queued and the job.
func (s *Store) RequeueLine(ctx context.Context, tx *sql.Tx, lineID int64, renderSeq int, jobID int64) error {
	return s.setRender(ctx, tx, lineID, renderSeq, jobID, StateQueued, false)
}

// setRender points line lineID, in tx, at render renderSeq, worked by job, in state,
// its attempts counted afresh; clearApproval drops its approval too.
func (s *Store) setRender(ctx context.Context, tx *sql.Tx, lineID int64, renderSeq int, jobID int64, state LineState, clearApproval bool) error {
	return s.onTx(ctx, tx).Exec(`UPDATE lines SET render_seq = ?, state = ?, job_id = ?, attempts = 0,
		approved_take_id = CASE WHEN ? THEN NULL ELSE approved_take_id END, state_changed_at = now() WHERE id = ?`,
		renderSeq, state, jobID, clearApproval, lineID).Error
}

func addHistory(tx *gorm.DB, userID int64, action string, before, after *Line) error {
	var b, a any
	if before != nil {
		j, _ := json.Marshal(before.snapshot())
		b = string(j)
	}
	if after != nil {
		j, _ := json.Marshal(after.snapshot())
		a = string(j)
	}
	var lineID, projectID int64
	if after != nil {
		lineID, projectID = after.ID, after.ProjectID
	} else {
		lineID, projectID = before.ID, before.ProjectID
	}
	var uid any
	if userID > 0 {
		uid = userID
	}
	return tx.Exec(`INSERT INTO line_history (line_id, project_id, user_id, action, before, after)
		VALUES (?, ?, ?, ?, ?, ?)`, lineID, projectID, uid, action, b, a).Error
}

// refreshFlags recomputes the overlap and zero-length findings of a project's lines.
func refreshFlags(tx *gorm.DB, projectID int64) error {
	return tx.Exec(`UPDATE lines l SET flags = c.f FROM (
		SELECT id, array_remove(ARRAY[
			CASE WHEN start_ms < lag(end_ms) OVER (ORDER BY idx) THEN 'overlap' END,
			CASE WHEN end_ms = start_ms THEN 'zero_length' END]::text[], NULL) AS f
		FROM lines WHERE project_id = ?) c
		WHERE l.id = c.id AND l.flags IS DISTINCT FROM c.f`, projectID).Error
}

// HistoryEntry is one recorded change to a line.
type HistoryEntry struct {
	ID        int64
	Action    string
	UserName  string
	Before    *LineSnapshot
	After     *LineSnapshot
	CreatedAt time.Time
}

// LineSnapshot is the editable content of a line at one point in its history.
type LineSnapshot struct {
	Text         string   `json:"text"`
	CharacterID  *int64   `json:"character_id"`
	Emotion      *Emotion `json:"emotion"`
	Notes        string   `json:"notes"`
	StartMs      int      `json:"start_ms"`
	EndMs        int      `json:"end_ms"`
	DurationLock bool     `json:"duration_lock"`
}

// LineHistory returns a line's changes, newest first.
func (s *Store) LineHistory(ctx context.Context, projectID, lineID int64) ([]HistoryEntry, error) {
	var rows []struct {
		ID        int64
		Action    string
		UserName  *string
		Before    *string
		After     *string
		CreatedAt time.Time
	}
	err := s.db.WithContext(ctx).Raw(`SELECT h.id, h.action, coalesce(nullif(u.display_name, ''), u.username) AS user_name,
		h.before::text AS before, h.after::text AS after, h.created_at
		FROM line_history h LEFT JOIN users u ON u.id = h.user_id
		WHERE h.project_id = ? AND h.line_id = ? ORDER BY h.id DESC LIMIT 200`, projectID, lineID).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	out := make([]HistoryEntry, 0, len(rows))
	for _, r := range rows {
		e := HistoryEntry{ID: r.ID, Action: r.Action, CreatedAt: r.CreatedAt}
		if r.UserName != nil {
			e.UserName = *r.UserName
		}
		if r.Before != nil {
			e.Before = &LineSnapshot{}
			json.Unmarshal([]byte(*r.Before), e.Before) //nolint:errcheck
		}
		if r.After != nil {
			e.After = &LineSnapshot{}
			json.Unmarshal([]byte(*r.After), e.After) //nolint:errcheck
		}
		out = append(out, e)
	}
	return out, nil
}

// AssignCharacter sets the character of several lines at once (nil clears it).
// Each line's revision is bumped and the change kept in its history.
func (s *Store) AssignCharacter(ctx context.Context, userID, projectID int64, lineIDs []int64, characterID *int64) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		if err := checkCharacter(tx, projectID, characterID); err != nil {
			return err
		}
		var ls []Line
		if err := tx.Clauses(forUpdate).Where("project_id = ? AND id IN ?", projectID, lineIDs).Order("idx").Find(&ls).Error; err != nil {
			return err
		}
		for i := range ls {
			before := ls[i]
			l := ls[i]
			if eqID(l.CharacterID, characterID) {
				continue
			}
			l.CharacterID = characterID
			if err := s.saveLine(ctx, tx, userID, "assign", &before, &l, Audible(&before, &l), func() { n++ }); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

func eqID(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// SplitLine cuts a line in two at a character offset of its text. The first part keeps
// the line; the second becomes a new line right after it. The time is split at atMs
// (0: in proportion to the text).
func (s *Store) SplitLine(ctx context.Context, userID, projectID, lineID int64, baseRevision, atRune, atMs int) (*Line, *Line, error) {
	var first, second *Line
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var l Line
		if err := tx.Clauses(forUpdate).Where("project_id = ? AND id = ?", projectID, lineID).First(&l).Error; err != nil {
			return notFound(err, "line")
		}
		if l.Revision != baseRevision {
			return &ConflictError{Current: &l}
		}
		runes := []rune(l.Text)
		if atRune <= 0 || atRune >= len(runes) {
			return FieldsError{"split": i18n.Errorf(ErrInvalid, "line.bad_split")}
		}
		a, b := strings.TrimSpace(string(runes[:atRune])), strings.TrimSpace(string(runes[atRune:]))
		if a == "" || b == "" {
			return FieldsError{"split": i18n.Errorf(ErrInvalid, "line.bad_split")}
		}
		if atMs <= 0 {
			atMs = l.StartMs + (l.EndMs-l.StartMs)*atRune/len(runes)
		}
		if atMs < l.StartMs || atMs > l.EndMs {
			return FieldsError{"split": i18n.Errorf(ErrInvalid, "line.bad_split_time")}
		}
		if err := tx.Exec("UPDATE lines SET idx = idx + 1 WHERE project_id = ? AND idx > ?", projectID, l.Idx).Error; err != nil {
			return err
		}
		nl := Line{ProjectID: projectID, Idx: l.Idx + 1, StartMs: atMs, EndMs: l.EndMs, Text: b, CharacterID: l.CharacterID,
			Emotion: l.Emotion, DurationLock: l.DurationLock, Revision: 0, State: StateDraft, Flags: Flags{}, UpdatedBy: &userID}
		if err := tx.Omit("ID", "CreatedAt", "UpdatedAt", "StateChangedAt").Create(&nl).Error; err != nil {
			return err
		}
		before := l
		l.Text, l.EndMs = a, atMs
		if err := s.saveLine(ctx, tx, userID, "split", &before, &l, Audible(&before, &l), func() { first = &l }); err != nil {
			return err
		}
		created := nl
		return s.saveLine(ctx, tx, userID, "split", nil, &created, false, func() { second = &created })
	})
	return first, second, err
}

// MergeLines joins a line with the one after it: texts joined, the time spans
// combined, the second line removed.
func (s *Store) MergeLines(ctx context.Context, userID, projectID, lineID int64, baseRevision int) (*Line, error) {
	var out *Line
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var l, next Line
		if err := tx.Clauses(forUpdate).Where("project_id = ? AND id = ?", projectID, lineID).First(&l).Error; err != nil {
			return notFound(err, "line")
		}
		if l.Revision != baseRevision {
			return &ConflictError{Current: &l}
		}
		if err := tx.Clauses(forUpdate).Where("project_id = ? AND idx > ?", projectID, l.Idx).Order("idx").First(&next).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return FieldsError{"merge": i18n.Errorf(ErrInvalid, "line.no_next")}
			}
			return err
		}
		if next.State.Active() {
			return FieldsError{"merge": i18n.Errorf(ErrInvalid, "line.next_busy")}
		}
		joined := strings.TrimSpace(l.Text + " " + next.Text)
		if err := ValidateLineText(joined); err != nil {
			return FieldsError{"merge": asI18n(err)}
		}
		if err := addHistory(tx, userID, "merged_into", &next, nil); err != nil {
			return err
		}
		if err := s.lineChanged(ctx, tx, &next, nil); err != nil {
			return err
		}
		if err := tx.Exec("DELETE FROM lines WHERE id = ?", next.ID).Error; err != nil {
			return err
		}
		if err := tx.Exec("UPDATE lines SET idx = idx - 1 WHERE project_id = ? AND idx > ?", projectID, next.Idx).Error; err != nil {
			return err
		}
		before := l
		l.Text = joined
		l.EndMs = max(l.EndMs, next.EndMs)
		if err := s.checkTiming(l.StartMs, l.EndMs); err != nil {
			return FieldsError{"merge": err}
		}
		return s.saveLine(ctx, tx, userID, "merge", &before, &l, Audible(&before, &l), func() { out = &l })
	})
	return out, err
}

// NewLine is a line to import.
type NewLine struct {
	SourceLine    int // line number in the imported file, for messages
	StartMs       int
	EndMs         int
	CharacterName string
	Text          string
	Emotion       string // optional: an emotion text or 8 comma-separated numbers
}

// ImportResult says what an import did.
type ImportResult struct {
	// Lines counts the lines created.
	Lines             int
	CharactersCreated []string
	// Flagged counts the created and updated lines with timing flags.
	Flagged int
	// Updated, Unchanged and Duplicates count the file's lines that updated a line,
	// matched one that already said the same, or repeated one exactly and were
	// skipped; Deleted the lines a replace removed.
	Updated, Unchanged, Duplicates, Deleted int
	// Actions says per line of the import what was done.
	Actions []ImportAction
}

// ImportProblem is one reason an import was refused, with its source line.
type ImportProblem struct {
	Line int
	Err  *i18n.Error
}

// ImportError lists every problem of a refused import.
type ImportError struct{ Problems []ImportProblem }

func (e *ImportError) Error() string {
	parts := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		parts = append(parts, "line "+strconv.Itoa(p.Line)+": "+p.Err.Error())
	}
	return "import refused: " + strings.Join(parts, "; ")
}
func (e *ImportError) Unwrap() error { return ErrInvalid }

// ParseEmotionColumn reads the optional emotion column of an import: empty means the
// character's default, eight numbers are a vector, anything else an emotion text.
func ParseEmotionColumn(s string) (*Emotion, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' })
	if len(fields) == 8 {
		vec := make([]float64, 8)
		numeric := true
		for i, f := range fields {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				numeric = false
				break
			}
			vec[i] = v
		}
		if numeric {
			e := &Emotion{Mode: EmotionVector, Vector: vec}
			return e, e.Validate()
		}
	}
	e := &Emotion{Mode: EmotionText, Text: s}
	return e, e.Validate()
}

// checkNewLines checks every line of an import and returns their emotions, or an
// *ImportError listing every problem.
func (s *Store) checkNewLines(lines []NewLine) ([]*Emotion, error) {
	var problems []ImportProblem
	emotions := make([]*Emotion, len(lines))
	for i, nl := range lines {
		if err := ValidateLineText(nl.Text); err != nil {
			problems = append(problems, ImportProblem{nl.SourceLine, asI18n(err)})
		}
		if err := s.checkTiming(nl.StartMs, nl.EndMs); err != nil {
			problems = append(problems, ImportProblem{nl.SourceLine, err})
		}
		if n := strings.TrimSpace(nl.CharacterName); len([]rune(n)) > 100 {
			problems = append(problems, ImportProblem{nl.SourceLine, i18n.Errorf(ErrInvalid, "character.bad_name")})
		}
		e, err := ParseEmotionColumn(nl.Emotion)
		if err != nil {
			problems = append(problems, ImportProblem{nl.SourceLine, asI18n(err)})
		}
		emotions[i] = e
	}
	if len(lines) == 0 {
		problems = append(problems, ImportProblem{0, i18n.Errorf(ErrInvalid, "import.empty")})
	}
	if len(problems) > 0 {
		return nil, &ImportError{Problems: problems}
	}
	return emotions, nil
}

// guessVoice picks a preview voice from the script's writing system.
func guessVoice(text string) string {
	for _, r := range text {
		if unicode.Is(unicode.Han, r) {
			return "cmn"
		}
	}
	return "en"
}

// AllLines returns every line of a project in order, for export.
func (s *Store) AllLines(ctx context.Context, projectID int64) ([]Line, error) {
	var ls []Line
	err := s.db.WithContext(ctx).Where("project_id = ?", projectID).Order("idx").Find(&ls).Error
	return ls, err
}

// IsBadText says whether Postgres refused a text for a NUL byte or invalid UTF-8 (in
// a field that has no validation of its own): the request's fault, not the server's.
func IsBadText(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "22021" || pe.Code == "22P05")
}
