package studio

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"dubstudio/i18n"
)

// Take is one rendering of a line, with what it cost to make.
type Take struct {
	ID            int64
	LineID        int64
	ProjectID     int64
	Revision      int
	RenderSeq     int
	Engine        string
	ModelVersion  string
	GPU           string `gorm:"column:gpu"`
	Worker        string
	Seed          int64
	SpokenText    string
	PeakVRAMBytes int64 `gorm:"column:peak_vram_bytes"`
	SynthMs       int
	FitMs         int
	AudioMs       int     // natural length as synthesized
	DurationMs    int     // after the duration lock
	RTF           float64 `gorm:"column:rtf"`
	StretchRatio  float64
	NeededRatio   float64
	BorrowedMs    int
	LoudnessLUFS  float64 `gorm:"column:loudness_lufs"`
	NeedsReview   bool
	Hint          *TakeHint `gorm:"serializer:json"`
	AudioSHA256   string    `gorm:"column:audio_sha256"`
	RawSHA256     *string   `gorm:"column:raw_sha256"`
	ApprovedAt    *time.Time
	ApprovedBy    *int64
	CreatedAt     time.Time
}

// TakeHint is a message for the editor about a take that did not fit its slot.
type TakeHint struct {
	Key  string `json:"key"`
	Args []any  `json:"args"`
}

// In renders the hint in lang.
func (h *TakeHint) In(lang i18n.Lang) string {
	if h == nil {
		return ""
	}
	return i18n.T(lang, h.Key, h.Args...)
}

// RenderSelect says which lines of a project to render.
type RenderSelect int

const (
	// RenderPending renders lines that have no finished render: draft, failed, cancelled.
	RenderPending RenderSelect = iota
	// RenderFailed re-runs failed lines.
	RenderFailed
	// RenderChosen renders the given lines whatever their state (regenerate), unless
	// they are already being rendered.
	RenderChosen
)

// QueuedLine is a line whose new render must get a job.
type QueuedLine struct {
	Line
	Character *Character
}

// InsertJobsFunc inserts one render job per line inside tx and returns their IDs in
// the same order.
type InsertJobsFunc func(ctx context.Context, tx *gorm.DB, lines []QueuedLine) ([]int64, error)

// QueueRenders starts a new render of the selected lines: each gets a new render
// sequence number (making any older job stale), the state queued, and a job inserted
// by insert in the same transaction. It returns how many lines were queued.
func (s *Store) QueueRenders(ctx context.Context, projectID int64, sel RenderSelect, lineIDs []int64, insert InsertJobsFunc) (int, error) {
	n := 0
	err := s.Tx(ctx, func(tx *gorm.DB) error {
		q := tx.Clauses(forUpdate).Where("project_id = ?", projectID)
		switch sel {
		case RenderPending:
			q = q.Where("state IN ?", []LineState{StateDraft, StateFailed, StateCancelled})
		case RenderFailed:
			q = q.Where("state = ?", StateFailed)
		case RenderChosen:
			q = q.Where("id IN ? AND state NOT IN ?", lineIDs, []LineState{StateQueued, StateWaitingGPU, StateSynthesizing, StateFitting})
		}
		var lines []Line
		if err := q.Order("idx").Find(&lines).Error; err != nil {
			return err
		}
		if len(lines) == 0 {
			return nil
		}
		var chars []Character
		if err := tx.Where("project_id = ?", projectID).Find(&chars).Error; err != nil {
			return err
		}
		byID := map[int64]*Character{}
		for i := range chars {
			byID[chars[i].ID] = &chars[i]
		}
		queued := make([]QueuedLine, len(lines))
		ids := make([]int64, len(lines))
		for i, l := range lines {
			l.RenderSeq++
			queued[i] = QueuedLine{Line: l}
			if l.CharacterID != nil {
				queued[i].Character = byID[*l.CharacterID]
			}
			ids[i] = l.ID
		}
		if err := tx.Exec(`UPDATE lines SET render_seq = render_seq + 1, state = 'queued', attempts = 0,
			last_error = '', last_traceback = '', state_changed_at = now() WHERE id IN ?`, ids).Error; err != nil {
			return err
		}
		jobIDs, err := insert(ctx, tx, queued)
		if err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE lines l SET job_id = j.job_id FROM unnest(?::bigint[], ?::bigint[]) AS j(line_id, job_id)
			WHERE l.id = j.line_id`, int64Array(ids), int64Array(jobIDs)).Error; err != nil {
			return err
		}
		n = len(lines)
		return nil
	})
	return n, err
}

func int64Array(v []int64) string {
	b, _ := json.Marshal(v)
	return "{" + string(b[1:len(b)-1]) + "}"
}

// CancelRenders stops a project's renders: active lines become cancelled with a new
// render sequence number, so their running jobs finish without a take. It returns the
// River job IDs that may still be waiting, for the caller to cancel.
func (s *Store) CancelRenders(ctx context.Context, projectID int64) ([]int64, error) {
	var jobIDs []int64
	err := s.db.WithContext(ctx).Raw(`UPDATE lines SET state = 'cancelled', render_seq = render_seq + 1,
		state_changed_at = now() WHERE project_id = ? AND state IN ('queued', 'waiting_gpu', 'synthesizing', 'fitting')
		RETURNING coalesce(job_id, 0)`, projectID).Scan(&jobIDs).Error
	return jobIDs, err
}

// RenderInput is everything a render job needs to know about its line.
type RenderInput struct {
	Line      Line
	Character *Character
	Project   Project
	// GapAfterMs is the silence before the next line starts (0 if it overlaps or is
	// the last line: then nothing may be borrowed).
	GapAfterMs int
	// PrevRatio is the stretch ratio of the previous line of the same character, for
	// smoothing (0 if none).
	PrevRatio float64
	// Glossary is the project's pronunciation glossary.
	Glossary []GlossaryEntry
}

// RenderInput loads a line for its render job.
func (s *Store) RenderInput(ctx context.Context, lineID int64) (*RenderInput, error) {
	db := s.db.WithContext(ctx)
	in := &RenderInput{}
	if err := db.First(&in.Line, lineID).Error; err != nil {
		return nil, notFound(err, "line")
	}
	if err := db.First(&in.Project, in.Line.ProjectID).Error; err != nil {
		return nil, notFound(err, "project")
	}
	if in.Line.CharacterID != nil {
		var c Character
		if err := db.First(&c, *in.Line.CharacterID).Error; err == nil {
			in.Character = &c
		}
	}
	var next *int
	if err := db.Raw(`SELECT min(start_ms) FROM lines WHERE project_id = ? AND idx > ?`, in.Line.ProjectID, in.Line.Idx).Scan(&next).Error; err != nil {
		return nil, err
	}
	if next != nil && *next > in.Line.EndMs {
		in.GapAfterMs = *next - in.Line.EndMs
	}
	if in.Line.CharacterID != nil {
		var ratio *float64
		err := db.Raw(`SELECT t.stretch_ratio FROM lines l JOIN takes t ON t.id = l.current_take_id
			WHERE l.project_id = ? AND l.character_id = ? AND l.idx < ? ORDER BY l.idx DESC LIMIT 1`,
			in.Line.ProjectID, *in.Line.CharacterID, in.Line.Idx).Scan(&ratio).Error
		if err != nil {
			return nil, err
		}
		if ratio != nil {
			in.PrevRatio = *ratio
		}
	}
	var err error
	in.Glossary, err = s.Glossary(ctx, in.Line.ProjectID)
	return in, err
}

// synthesisStates are the states of a render whose synthesis has not finished. Only
// these move on: a synthesis re-run after its render reached fitting or beyond (a job
// rescued from a worker that died after its last write) must not move the line back.
var synthesisStates = []LineState{StateQueued, StateWaitingGPU, StateSynthesizing}

// activeStates are the states of a render that has not finished.
var activeStates = []LineState{StateQueued, StateWaitingGPU, StateSynthesizing, StateFitting}

// SetRenderState moves a line's current render to state. It returns false, changing
// nothing, when the render is stale (the line was edited, re-queued or cancelled) or
// already past synthesis.
func (s *Store) SetRenderState(ctx context.Context, lineID int64, renderSeq int, state LineState, attempts int) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`UPDATE lines SET state = ?, attempts = greatest(attempts, ?), state_changed_at = now()
		WHERE id = ? AND render_seq = ? AND state IN ?`, state, attempts, lineID, renderSeq, synthesisStates)
	return res.RowsAffected == 1, res.Error
}

// RenderFailure records a failed attempt. final means no retry follows: the line
// shows failed with the error; otherwise it waits in queued for the retry. A render
// that already finished (done, in review, failed) is left as it is.
func (s *Store) RenderFailure(ctx context.Context, lineID int64, renderSeq, attempts int, msg, traceback string, final bool) (bool, error) {
	state := StateQueued
	if final {
		state = StateFailed
	}
	res := s.db.WithContext(ctx).Exec(`UPDATE lines SET state = ?, attempts = ?, last_error = ?, last_traceback = ?,
		state_changed_at = now() WHERE id = ? AND render_seq = ? AND state IN ?`,
		state, attempts, msg, traceback, lineID, renderSeq, activeStates)
	return res.RowsAffected == 1, res.Error
}

// FinishRender stores a take for the line's current render and marks the line done
// (or needs review). A stale render stores nothing and returns false; a render that
// already has its take (a retried job) returns true without a second one.
func (s *Store) FinishRender(ctx context.Context, t *Take) (bool, error) {
	ok := false
	err := s.Tx(ctx, func(tx *gorm.DB) error {
		var l Line
		if err := tx.Clauses(forUpdate).First(&l, t.LineID).Error; err != nil {
			return notFound(err, "line")
		}
		if l.RenderSeq != t.RenderSeq || l.State == StateCancelled {
			return nil
		}
		res := tx.Clauses(onConflictDoNothing).Omit("ID", "CreatedAt").Create(t)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			if err := tx.Raw("SELECT id FROM takes WHERE line_id = ? AND render_seq = ?", t.LineID, t.RenderSeq).Scan(&t.ID).Error; err != nil {
				return err
			}
		}
		state := StateDone
		if t.NeedsReview {
			state = StateNeedsReview
		}
		ok = true
		return tx.Exec(`UPDATE lines SET state = ?, current_take_id = ?, last_error = '', last_traceback = '',
			state_changed_at = now() WHERE id = ?`, state, t.ID, t.LineID).Error
	})
	return ok, err
}

// Takes lists a line's takes, newest first.
func (s *Store) Takes(ctx context.Context, projectID, lineID int64) ([]Take, error) {
	var ts []Take
	err := s.db.WithContext(ctx).Where("project_id = ? AND line_id = ?", projectID, lineID).Order("id DESC").Find(&ts).Error
	return ts, err
}

// Take returns one take of a line.
func (s *Store) Take(ctx context.Context, projectID, takeID int64) (*Take, error) {
	var t Take
	err := s.db.WithContext(ctx).Where("project_id = ? AND id = ?", projectID, takeID).First(&t).Error
	return &t, notFound(err, "take")
}

// ApproveTake marks a take as the line's approved one (and its current one).
func (s *Store) ApproveTake(ctx context.Context, userID, projectID, takeID int64) error {
	return s.Tx(ctx, func(tx *gorm.DB) error {
		var t Take
		if err := tx.Where("project_id = ? AND id = ?", projectID, takeID).First(&t).Error; err != nil {
			return notFound(err, "take")
		}
		if err := tx.Exec(`UPDATE takes SET approved_at = now(), approved_by = ? WHERE id = ?`, userID, t.ID).Error; err != nil {
			return err
		}
		return tx.Exec(`UPDATE lines SET approved_take_id = ?, current_take_id = ? WHERE id = ?`, t.ID, t.ID, t.LineID).Error
	})
}

// UseTake makes an earlier take the line's current one (going back), clearing an
// approval of another take.
func (s *Store) UseTake(ctx context.Context, projectID, takeID int64) error {
	return s.Tx(ctx, func(tx *gorm.DB) error {
		var t Take
		if err := tx.Where("project_id = ? AND id = ?", projectID, takeID).First(&t).Error; err != nil {
			return notFound(err, "take")
		}
		state := StateDone
		if t.NeedsReview {
			state = StateNeedsReview
		}
		res := tx.Exec(`UPDATE lines SET current_take_id = ?, state = CASE WHEN state IN ('queued','waiting_gpu','synthesizing','fitting') THEN state ELSE ? END,
			approved_take_id = CASE WHEN approved_take_id = ? THEN approved_take_id ELSE NULL END WHERE id = ?`, t.ID, state, t.ID, t.LineID)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("line %d: %w", t.LineID, ErrNotFound)
		}
		return nil
	})
}

// SetRenderStateTx is SetRenderState inside a caller's transaction.
func SetRenderStateTx(tx *gorm.DB, lineID int64, renderSeq int, state LineState) (bool, error) {
	res := tx.Exec(`UPDATE lines SET state = ?, state_changed_at = now()
		WHERE id = ? AND render_seq = ? AND state IN ?`, state, lineID, renderSeq, synthesisStates)
	return res.RowsAffected == 1, res.Error
}

// SpeakerConditioning returns the conditioning cache of a reference audio for a model
// version, if it has been computed.
func (s *Store) SpeakerConditioning(ctx context.Context, refSHA, modelVersion string) (string, bool, error) {
	var paths []string
	err := s.db.WithContext(ctx).Raw(`SELECT cache_path FROM speaker_conditioning WHERE ref_sha256 = ? AND model_version = ?`,
		refSHA, modelVersion).Scan(&paths).Error
	if err != nil || len(paths) == 0 {
		return "", false, err
	}
	return paths[0], true, nil
}

// SaveSpeakerConditioning records a computed conditioning cache.
func (s *Store) SaveSpeakerConditioning(ctx context.Context, refSHA, modelVersion, path, worker string) error {
	return s.db.WithContext(ctx).Exec(`INSERT INTO speaker_conditioning (ref_sha256, model_version, cache_path, worker)
		VALUES (?, ?, ?, ?) ON CONFLICT (ref_sha256, model_version) DO UPDATE SET cache_path = excluded.cache_path,
		worker = excluded.worker, created_at = now()`, refSHA, modelVersion, path, worker).Error
}

// TakesByIDs returns the takes with the given IDs, by ID.
func (s *Store) TakesByIDs(ctx context.Context, ids []int64) (map[int64]Take, error) {
	out := map[int64]Take{}
	if len(ids) == 0 {
		return out, nil
	}
	var ts []Take
	if err := s.db.WithContext(ctx).Where("id IN ?", ids).Find(&ts).Error; err != nil {
		return nil, err
	}
	for _, t := range ts {
		out[t.ID] = t
	}
	return out, nil
}
