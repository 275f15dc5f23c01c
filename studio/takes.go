package studio

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

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
	// CutMs is how much of the stretched speech the duration lock cut off at the end
	// of the slot and borrowed time (a take too long to fit; audio.FitResult.CutMs).
	CutMs int
	// Deterministic: the engine gives the same audio for the same input whatever the
	// seed (espeak-ng), so a new take of an unchanged line would be the same.
	Deterministic bool
	LoudnessLUFS  float64 `gorm:"column:loudness_lufs"`
	NeedsReview   bool
	Hint          *TakeHint `gorm:"serializer:json"`
	AudioSHA256   string    `gorm:"column:audio_sha256"`
	RawSHA256     *string   `gorm:"column:raw_sha256"`
	// RefitOf is the take whose synthesis (its raw audio) this one fitted again,
	// without a GPU, after the slots changed (Store.OverrunTakes); nil for a take
	// synthesized for itself. Its Usage and SynthMs are that synthesis's.
	RefitOf    *int64
	ApprovedAt *time.Time
	ApprovedBy *int64
	CreatedAt  time.Time
	// Usage is what the synthesis used and how its time went.
	Usage TakeUsage `gorm:"embedded"`
}

// TakeUsage is one take's own share of its GPU and the split of its time
// (docs/gpu.md, "What a take records"). Memory is in bytes, times in milliseconds;
// a figure the engine does not report is 0.
type TakeUsage struct {
	// PredictedVRAMBytes is what the GPU's executor admitted the line for, beyond its
	// host's resident memory, safety factor included (gpu.Lease.PredictedBytes): a
	// batching host's line at its activations, a one-request host's at its peak over
	// the model. MeasuredVRAMBytes is the same quantity as the host measured it, the
	// figure the executor learns from.
	PredictedVRAMBytes int64 `gorm:"column:predicted_vram_bytes" json:"predicted_vram_bytes,omitempty"`
	MeasuredVRAMBytes  int64 `gorm:"column:measured_vram_bytes" json:"measured_vram_bytes,omitempty"`
	// KVBytes and ActivationBytes are a batching host's account of the line: its KV
	// blocks at their most, and its share of its s2mel/vocoder group's activations.
	KVBytes         int64 `gorm:"column:kv_bytes" json:"kv_bytes,omitempty"`
	ActivationBytes int64 `gorm:"column:activation_bytes" json:"activation_bytes,omitempty"`
	// PermitWaitMs is the time the worker waited for a permit (a GPU seat and its
	// memory); HostQueueMs the time the request then waited inside the host.
	PermitWaitMs int `gorm:"column:permit_wait_ms" json:"permit_wait_ms,omitempty"`
	HostQueueMs  int `gorm:"column:host_queue_ms" json:"host_queue_ms,omitempty"`
	// S2MelWaitMs is the time it then waited in a batching host between its last GPT
	// token and its s2mel group.
	S2MelWaitMs int `gorm:"column:s2mel_wait_ms" json:"s2mel_wait_ms,omitempty"`
	// GPTMs, S2MelMs and VocoderMs are the host's stage times for the line.
	GPTMs     int `gorm:"column:gpt_ms" json:"gpt_ms,omitempty"`
	S2MelMs   int `gorm:"column:s2mel_ms" json:"s2mel_ms,omitempty"`
	VocoderMs int `gorm:"column:vocoder_ms" json:"vocoder_ms,omitempty"`
	// BatchRowsMean is the mean rows per decode step while the line decoded, and
	// S2MelGroup the lines in its s2mel batch (a batching host's; 0 otherwise).
	BatchRowsMean float64 `gorm:"column:batch_rows_mean" json:"batch_rows_mean,omitempty"`
	S2MelGroup    int     `gorm:"column:s2mel_group" json:"s2mel_group,omitempty"`
	// GPUIndex is the index of the GPU it ran on (Take.GPU is its UUID); nil on the
	// CPU.
	GPUIndex *int `gorm:"column:gpu_index" json:"gpu_index,omitempty"`
}

// QueueMs is the line's whole wait: for a permit in the worker, then in the host for
// admission and, after its GPT, for an s2mel group.
func (u TakeUsage) QueueMs() int { return u.PermitWaitMs + u.HostQueueMs + u.S2MelWaitMs }

// OverMs is how much of the take's speech runs past its slot and borrowed time, cut
// off there by the duration lock (with a short fade): CutMs, or for a take recorded
// before CutMs was, the estimate from its ratios (speech needed NeededRatio of the
// available time and got StretchRatio). 0 for a take that fits.
func (t Take) OverMs() int {
	if t.CutMs > 0 {
		return t.CutMs
	}
	if !t.NeedsReview || t.StretchRatio <= 0 || t.NeededRatio <= t.StretchRatio {
		return 0
	}
	return int(float64(t.DurationMs)*(t.NeededRatio/t.StretchRatio-1) + 0.5)
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
type InsertJobsFunc func(ctx context.Context, tx *sql.Tx, lines []QueuedLine) ([]int64, error)

// RenderRefusal is a line QueueRenders left as it was, and why, in a message that
// names the line.
type RenderRefusal struct {
	LineID int64
	Idx    int
	Err    *i18n.Error
}

// RenderRefusedError lists the selected lines QueueRenders refused to queue: longer
// than the line limit in effect (MAX_LINE_SECONDS, lowered since they were imported
// or edited). The other lines of the selection were queued. It unwraps to ErrInvalid.
type RenderRefusedError struct{ Lines []RenderRefusal }

func (e *RenderRefusedError) Error() string { return e.In(i18n.EN) }
func (e *RenderRefusedError) Unwrap() error { return ErrInvalid }

// In returns every refused line's message in lang, one sentence each.
func (e *RenderRefusedError) In(lang i18n.Lang) string {
	parts := make([]string, len(e.Lines))
	for i, r := range e.Lines {
		parts[i] = r.Err.In(lang)
	}
	return strings.Join(parts, " ")
}

// QueueRenders starts a new render of the selected lines: each gets a new render
// sequence number (making any older job stale), the state queued, and a job inserted
// by insert in the same transaction. It returns how many lines were queued.
//
// A selected line longer than Limits.LineMs (a line imported or edited under a
// higher MAX_LINE_SECONDS) is not queued and not changed: the others are queued, and
// the error is a *RenderRefusedError naming each refused line.
func (s *Store) QueueRenders(ctx context.Context, projectID int64, sel RenderSelect, lineIDs []int64, insert InsertJobsFunc) (int, error) {
	n := 0
	var refused []RenderRefusal
	err := s.inTx(ctx, func(tx *gorm.DB) error {
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
		lines, refused = s.refuseTooLong(lines)
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
		seqs := make([]int64, len(lines))
		for i, l := range lines {
			l.RenderSeq++
			queued[i] = QueuedLine{Line: l}
			if l.CharacterID != nil {
				queued[i].Character = byID[*l.CharacterID]
			}
			ids[i], seqs[i] = l.ID, int64(l.RenderSeq)
		}
		// The jobs first, then one update per line (the rows are locked): a second
		// update of each row would fire its notification trigger and foreign key
		// checks again.
		t, err := sqlTx(tx)
		if err != nil {
			return err
		}
		jobIDs, err := insert(ctx, t, queued)
		if err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE lines l SET render_seq = j.render_seq, state = 'queued', attempts = 0, last_error = '',
			last_traceback = '', state_changed_at = now(), job_id = j.job_id
			FROM unnest(?::bigint[], ?::int[], ?::bigint[]) AS j(line_id, render_seq, job_id)
			WHERE l.id = j.line_id`, int64Array(ids), int64Array(seqs), int64Array(jobIDs)).Error; err != nil {
			return err
		}
		n = len(lines)
		return nil
	})
	if err == nil && len(refused) > 0 {
		err = &RenderRefusedError{Lines: refused}
	}
	return n, err
}

// refuseTooLong splits lines into those a render may take and those longer than the
// line limit in effect, with the reason for each.
func (s *Store) refuseTooLong(lines []Line) ([]Line, []RenderRefusal) {
	most := s.Limits.LineMs()
	keep := lines[:0]
	var refused []RenderRefusal
	for _, l := range lines {
		if l.EndMs-l.StartMs > most {
			refused = append(refused, RenderRefusal{LineID: l.ID, Idx: l.Idx,
				Err: i18n.Errorf(ErrInvalid, "render.line_too_long", l.Idx, seconds(l.EndMs-l.StartMs), seconds(most))})
			continue
		}
		keep = append(keep, l)
	}
	return keep, refused
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

// RenderInput is everything a synthesis needs to know about its line.
type RenderInput struct {
	Line      Line
	Character *Character
	Project   Project
	// Glossary is the project's pronunciation glossary.
	Glossary []GlossaryEntry
}

// RenderInput loads a line for its synthesis, in one query: the line, its project,
// its character and the project's glossary.
func (s *Store) RenderInput(ctx context.Context, lineID int64) (*RenderInput, error) {
	q, err := renderInputQuery()
	if err != nil {
		return nil, err
	}
	var rows []renderInputRow
	if err := s.db.WithContext(ctx).Raw(q, lineID).Scan(&rows).Error; err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("line %d: %w", lineID, ErrNotFound)
	}
	r := &rows[0]
	in := &RenderInput{Line: r.Line, Project: r.Project}
	if r.Character.ID != 0 {
		in.Character = &r.Character
	}
	if err := json.Unmarshal(r.Glossary, &in.Glossary); err != nil {
		return nil, fmt.Errorf("error reading the glossary of project %d: %w", in.Line.ProjectID, err)
	}
	return in, nil
}

// renderInputRow is a row of RenderInput's query: the line, its project and its
// character (columns prefixed p_ and c_; all NULL when the line has none) and the
// glossary as JSON.
type renderInputRow struct {
	Line      `gorm:"embedded"`
	Project   Project   `gorm:"embedded;embeddedPrefix:p_"`
	Character Character `gorm:"embedded;embeddedPrefix:c_"`
	Glossary  []byte
}

// renderInputQuery builds RenderInput's query once, naming the project's and the
// character's columns from their models so that a column added to either comes
// along.
var renderInputQuery = sync.OnceValues(func() (string, error) {
	cols := func(model any, alias string) (string, error) {
		sch, err := schema.Parse(model, &sync.Map{}, schema.NamingStrategy{}) // the store's (gorm's default)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		for _, f := range sch.Fields {
			if f.DBName != "" {
				fmt.Fprintf(&b, ", %[1]s.%[2]s AS %[1]s_%[2]s", alias, f.DBName)
			}
		}
		return b.String(), nil
	}
	pc, err := cols(&Project{}, "p")
	if err != nil {
		return "", err
	}
	cc, err := cols(&Character{}, "c")
	if err != nil {
		return "", err
	}
	return `SELECT l.*` + pc + cc + `,
		(SELECT coalesce(json_agg(json_build_object('id', g.id, 'term', g.term, 'spoken', g.spoken)
			ORDER BY length(g.term) DESC, g.term), '[]') FROM glossary g WHERE g.project_id = l.project_id) AS glossary
		FROM lines l JOIN projects p ON p.id = l.project_id LEFT JOIN characters c ON c.id = l.character_id
		WHERE l.id = ?`, nil
})

// FitInput is what a fit needs to know about its line.
type FitInput struct {
	RenderSeq    int
	State        LineState
	DurationLock bool
	// SlotMs is the line's slot, end minus start.
	SlotMs int
	// The project's fit settings.
	StretchMin, StretchMax, LoudnessLUFS, MaxSpeedStep float64
	GapBorrowMs                                        int
	// GapAfterMs is the silence between the line's end and the start of the next
	// line in time, of any character (0 if another line starts before it ends, or
	// none starts after it: then nothing may be borrowed).
	GapAfterMs int
	// PrevRatio is the stretch ratio of the previous line of the same character, for
	// smoothing (0 if none).
	PrevRatio float64
}

// fitInputColumns are FitInput's fields, read from the line l and its project p. The
// next start is that of the first other line starting at or after this one, whatever
// their order in the script (lines_project_start_idx); the ratio is that of the
// nearest earlier line of the same character that has a take
// (lines_project_character_idx_idx).
const fitInputColumns = `l.render_seq, l.state, l.duration_lock, l.end_ms - l.start_ms,
	p.stretch_min, p.stretch_max, p.loudness_lufs, p.max_speed_step, p.gap_borrow_ms,
	` + gapAfterSQL + `,
	coalesce((SELECT t.stretch_ratio FROM lines pl JOIN takes t ON t.id = pl.current_take_id
		WHERE pl.project_id = l.project_id AND pl.character_id = l.character_id AND pl.idx < l.idx
		ORDER BY pl.idx DESC LIMIT 1), 0)`

// gapAfterSQL is FitInput.GapAfterMs as SQL, for the line l.
const gapAfterSQL = `greatest(coalesce((SELECT min(n.start_ms) FROM lines n
	WHERE n.project_id = l.project_id AND n.start_ms >= l.start_ms AND n.id <> l.id) - l.end_ms, 0), 0)`

// scanFitInput runs q, whose columns are fitInputColumns, on db.
func scanFitInput(db *gorm.DB, q string, args []any, lineID int64) (*FitInput, error) {
	var in FitInput
	err := queryRow(db, q, args, &in.RenderSeq, &in.State, &in.DurationLock, &in.SlotMs,
		&in.StretchMin, &in.StretchMax, &in.LoudnessLUFS, &in.MaxSpeedStep, &in.GapBorrowMs,
		&in.GapAfterMs, &in.PrevRatio)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("line %d: %w", lineID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return &in, nil
}

// FitInput loads what a fit needs, in one query of plain columns.
func (s *Store) FitInput(ctx context.Context, lineID int64) (*FitInput, error) {
	return scanFitInput(s.db.WithContext(ctx), `SELECT `+fitInputColumns+`
		FROM lines l JOIN projects p ON p.id = l.project_id WHERE l.id = ?`, []any{lineID}, lineID)
}

// activeStates are the states of a render that has not finished: the ones a render's
// own writes move on from. A synthesis re-run while its render is fitting (a job
// rescued from a worker that died while it fitted the take itself) starts the render
// again; where a fit job had been queued instead, whichever finishes first records
// the take and the other finds it there (FinishRender).
var activeStates = []LineState{StateQueued, StateWaitingGPU, StateSynthesizing, StateFitting}

// commitAsync, joined into a statement, lets its transaction commit without waiting
// for PostgreSQL to flush its log to disk (synchronous_commit off for that
// transaction alone). A render's writes use it where the same job writes again,
// synchronously, before it ends (waiting for the GPU, synthesizing; fitting where
// the synthesis fits the take itself): that later commit flushes the log up to its
// own record and so every record before it, and a crash before it makes that write
// fail and River run the job again. A job's last write is synchronous (the take, a
// failure, fitting where a fit job takes the line on): River records the job
// complete in a transaction of its own after the job returns, which may run after a
// crash that lost an asynchronous commit, and the line would then never move again.
const commitAsync = `(SELECT set_config('synchronous_commit', 'off', true)) AS commit_async`

// SetRenderState moves a line's current render to state, committing asynchronously
// (commitAsync). It returns false, changing nothing, when the render is stale (the
// line was edited, re-queued or cancelled) or finished.
func (s *Store) SetRenderState(ctx context.Context, lineID int64, renderSeq int, state LineState, attempts int) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`UPDATE lines SET state = ?, attempts = greatest(attempts, ?), state_changed_at = now()
		FROM `+commitAsync+` WHERE id = ? AND render_seq = ? AND state IN ?`,
		state, attempts, lineID, renderSeq, activeStates)
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
// (or needs review). A stale render stores nothing and returns false: one the line
// was queued again or cancelled since, or one that a twin finished otherwise (its
// last failure) on a line an editor has changed since: edited back to draft, or set
// to an earlier take. (A failed line whose notes alone changed takes the take.) A
// render that already has its take (a retried job) returns true without a second one, and
// changes the line only while the render is still active: a line the render
// finished and an editor has changed since (edited back to draft, gone back to an
// earlier take) is left as it is. blobs (the take's audio, moved into the blob store
// with BlobStore.Put) are recorded first, whatever the outcome, as PutBlob would
// have.
//
// It is one statement, so one round trip and one commit: the line is locked, the
// take inserted unless its render has one, and the line updated. The commit is
// synchronous, since it is the job's last write (commitAsync). Where two runs of
// the same render race (a rescued job and its original), the second waits for the
// first's lock and then reads the line as the first left it (the locked row is read
// as committed, though the statement's snapshot predates the first's commit): no
// longer active, it is left alone, and the take is found by a second query.
func (s *Store) FinishRender(ctx context.Context, t *Take, blobs ...Blob) (bool, error) {
	state := StateDone
	if t.NeedsReview {
		state = StateNeedsReview
	}
	u := t.Usage
	var hint *string
	if t.Hint != nil {
		b, err := json.Marshal(t.Hint)
		if err != nil {
			return false, err
		}
		h := string(b)
		hint = &h
	}
	var q strings.Builder
	var args []any
	if len(blobs) > 0 {
		ins, a := insertBlobs(blobs)
		q.WriteString("WITH b AS (" + ins + "), ")
		args = a
	} else {
		q.WriteString("WITH ")
	}
	// The placeholders are in the order of args.
	q.WriteString(`l AS (SELECT id, state FROM lines WHERE id = ? AND render_seq = ? AND state <> 'cancelled'
			AND (state IN ? OR (state IN ('draft', 'failed') AND audible_revision <= ?)) FOR UPDATE),
		t AS (INSERT INTO takes (line_id, project_id, revision, render_seq, engine, model_version, gpu, worker, seed,
			spoken_text, peak_vram_bytes, synth_ms, fit_ms, audio_ms, duration_ms, rtf, stretch_ratio, needed_ratio,
			borrowed_ms, loudness_lufs, needs_review, hint, audio_sha256, raw_sha256, approved_at, approved_by,
			predicted_vram_bytes, measured_vram_bytes, kv_bytes, activation_bytes, permit_wait_ms, host_queue_ms,
			gpt_ms, s2mel_wait_ms, s2mel_ms, vocoder_ms, batch_rows_mean, s2mel_group, gpu_index,
			cut_ms, deterministic, refit_of)
			SELECT l.id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?,
				?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM l
			ON CONFLICT (line_id, render_seq) DO NOTHING RETURNING id)
		UPDATE lines SET state = ?, last_error = '', last_traceback = '', state_changed_at = now(),
			current_take_id = coalesce((SELECT id FROM t),
				(SELECT id FROM takes WHERE line_id = ? AND render_seq = ?), current_take_id)
		WHERE id = (SELECT id FROM l) AND (EXISTS (SELECT 1 FROM t) OR (SELECT state FROM l) IN ?)
		RETURNING current_take_id`)
	args = append(args, t.LineID, t.RenderSeq, activeStates, t.Revision,
		t.ProjectID, t.Revision, t.RenderSeq, t.Engine, t.ModelVersion, t.GPU, t.Worker, t.Seed, t.SpokenText,
		t.PeakVRAMBytes, t.SynthMs, t.FitMs, t.AudioMs, t.DurationMs, t.RTF, t.StretchRatio, t.NeededRatio,
		t.BorrowedMs, t.LoudnessLUFS, t.NeedsReview, hint, t.AudioSHA256, t.RawSHA256, t.ApprovedAt, t.ApprovedBy,
		u.PredictedVRAMBytes, u.MeasuredVRAMBytes, u.KVBytes, u.ActivationBytes, u.PermitWaitMs, u.HostQueueMs,
		u.GPTMs, u.S2MelWaitMs, u.S2MelMs, u.VocoderMs, u.BatchRowsMean, u.S2MelGroup, u.GPUIndex,
		t.CutMs, t.Deterministic, t.RefitOf, state, t.LineID, t.RenderSeq, activeStates)
	var id *int64
	err := queryRow(s.db.WithContext(ctx), q.String(), args, &id)
	if errors.Is(err, sql.ErrNoRows) {
		// Stale, or finished already: then its take is there (committed before this
		// query's snapshot, where a twin raced this run).
		err = queryRow(s.db.WithContext(ctx), `SELECT t.id FROM takes t JOIN lines l ON l.id = t.line_id
			AND l.render_seq = t.render_seq AND l.state <> 'cancelled' WHERE t.line_id = ? AND t.render_seq = ?`,
			[]any{t.LineID, t.RenderSeq}, &t.ID)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	if id == nil {
		return false, fmt.Errorf("line %d: render %d finished without a take", t.LineID, t.RenderSeq)
	}
	t.ID = *id
	return true, nil
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
	return s.inTx(ctx, func(tx *gorm.DB) error {
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
	return s.inTx(ctx, func(tx *gorm.DB) error {
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

// Overrun is a finished line's current take that runs further into the gap after its
// slot than the gap now is (OverrunTakes), with the line's render sequence number
// (the take's own is older where the line went back to an earlier take).
type Overrun struct {
	Take      Take `gorm:"embedded"`
	RenderSeq int  `gorm:"column:line_render_seq"`
}

// OverrunTakes locks and returns, in tx (the one a GapsChanged hook was given), the
// project's finished lines (done or needing review) whose current take borrowed more
// of the gap after its slot than is now free before the next line of any character
// starts (FitInput.GapAfterMs): a change to the slots ran its tail into that line.
// A line being rendered is left out: its render fits to the gap as it finds it, and
// checks again once it has recorded its take (CheckOverrun). lineIDs, when not empty,
// are the only lines looked at.
func (s *Store) OverrunTakes(ctx context.Context, tx *sql.Tx, projectID int64, lineIDs []int64) ([]Overrun, error) {
	q := `SELECT t.*, l.render_seq AS line_render_seq FROM lines l JOIN takes t ON t.id = l.current_take_id
		WHERE l.project_id = ? AND l.state IN ? AND t.borrowed_ms > ` + gapAfterSQL
	args := []any{projectID, []LineState{StateDone, StateNeedsReview}}
	if len(lineIDs) > 0 {
		q += ` AND l.id IN ?`
		args = append(args, lineIDs)
	}
	var out []Overrun
	err := s.onTx(ctx, tx).Raw(q+` ORDER BY l.id FOR UPDATE OF l`, args...).Scan(&out).Error
	return out, err
}

// StartRefit records, in tx, that an overrun line's take is being done again by job,
// render renderSeq: state is StateFitting for a fit of its raw audio, StateQueued for
// a synthesis (a take without raw audio). The line loses its approval, which was of
// the take that now runs into the next line.
func (s *Store) StartRefit(ctx context.Context, tx *sql.Tx, lineID int64, renderSeq int, jobID int64, state LineState) error {
	return s.setRender(ctx, tx, lineID, renderSeq, jobID, state, true)
}

// HandOffFunc hands a render on to another job (inserts a fit job) inside tx, the
// transaction that moves the render to fitting (StartFit).
type HandOffFunc func(ctx context.Context, tx *sql.Tx) error

// StartFit moves a line's current render to fitting and returns what its fit needs,
// as FitInput would. handOff is nil where the caller fits the take itself: the one
// statement then commits asynchronously (commitAsync), as the same job writes the
// take later. Otherwise handOff runs in the same transaction (inserting the fit job
// that takes the render on), which commits synchronously: the job ends there. It
// returns ErrNotFound, changing nothing and handing nothing off, when the render is
// stale (the line was deleted, edited, re-queued or cancelled) or finished. blobs
// (the render's output so far, moved into the blob store with BlobStore.Put) are
// recorded in the same statement, whatever the outcome, as PutBlob would have.
func (s *Store) StartFit(ctx context.Context, lineID int64, renderSeq int, handOff HandOffFunc, blobs ...Blob) (*FitInput, error) {
	return s.startFit(ctx, lineID, renderSeq, handOff == nil, handOff, blobs...)
}

// startFit is StartFit, committing asynchronously if async; then, if not nil, runs
// in the statement's transaction (a tests' hook may watch an asynchronous one).
func (s *Store) startFit(ctx context.Context, lineID int64, renderSeq int, async bool, then HandOffFunc, blobs ...Blob) (*FitInput, error) {
	var q string
	var args []any
	if len(blobs) > 0 {
		q, args = insertBlobs(blobs)
		q = "WITH b AS (" + q + ") "
	}
	from := "projects p"
	if async {
		from += ", " + commitAsync
	}
	q += `UPDATE lines l SET state = ?, state_changed_at = now() FROM ` + from + `
		WHERE l.id = ? AND l.render_seq = ? AND l.state IN ? AND p.id = l.project_id
		RETURNING ` + fitInputColumns
	args = append(args, StateFitting, lineID, renderSeq, activeStates)
	if then == nil {
		// One statement is its own transaction: no BEGIN and COMMIT round trips.
		return scanFitInput(s.db.WithContext(ctx), q, args, lineID)
	}
	var in *FitInput
	var stale error
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var err error
		in, err = scanFitInput(tx, q, args, lineID)
		if errors.Is(err, ErrNotFound) {
			stale = err
			return nil // commit all the same: the blobs' rows are kept, as their files are
		}
		if err != nil {
			return err
		}
		t, err := sqlTx(tx)
		if err != nil {
			return err
		}
		return then(ctx, t)
	})
	if err != nil {
		return nil, err
	}
	return in, stale
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

// SaveSpeakerConditioning records a computed conditioning cache, and forgets an
// earlier failure to compute it.
func (s *Store) SaveSpeakerConditioning(ctx context.Context, refSHA, modelVersion, path, worker string) error {
	return s.db.WithContext(ctx).Exec(`WITH f AS (DELETE FROM speaker_conditioning_failures
		WHERE ref_sha256 = ? AND model_version = ?)
		INSERT INTO speaker_conditioning (ref_sha256, model_version, cache_path, worker)
		VALUES (?, ?, ?, ?) ON CONFLICT (ref_sha256, model_version) DO UPDATE SET cache_path = excluded.cache_path,
		worker = excluded.worker, created_at = now()`, refSHA, modelVersion, refSHA, modelVersion, path, worker).Error
}

// SpeakerConditioningFailed records that computing the conditioning of a reference
// audio for a model version failed for good, with the error, at the database's now.
func (s *Store) SpeakerConditioningFailed(ctx context.Context, refSHA, modelVersion, msg string) error {
	return s.db.WithContext(ctx).Exec(`INSERT INTO speaker_conditioning_failures (ref_sha256, model_version, error)
		VALUES (?, ?, ?) ON CONFLICT (ref_sha256, model_version) DO UPDATE SET error = excluded.error, failed_at = now()`,
		refSHA, modelVersion, msg).Error
}

// SpeakerConditioningFailure returns the error of the last preparation of a
// reference audio for a model version that failed for good at or after since (a
// render queued before it was waiting for it); ok is false where there is none.
func (s *Store) SpeakerConditioningFailure(ctx context.Context, refSHA, modelVersion string, since time.Time) (string, bool, error) {
	var msgs []string
	err := s.db.WithContext(ctx).Raw(`SELECT error FROM speaker_conditioning_failures
		WHERE ref_sha256 = ? AND model_version = ? AND failed_at >= ?`, refSHA, modelVersion, since).Scan(&msgs).Error
	if err != nil || len(msgs) == 0 {
		return "", false, err
	}
	return msgs[0], true, nil
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
