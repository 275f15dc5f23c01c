// Package workflow is dubstudio's render pipeline on River: every line render is a
// durable job in Postgres, worked by any number of worker processes that share the
// database.
//
// A render request bumps the line's render sequence number and inserts a synthesize
// job in the same transaction. A worker takes the job, waits for an engine's permit
// (the VRAM-budgeted executor on a GPU host), synthesizes, stores the raw audio, gives
// the permit back, locks the audio to the line's slot and stores the take; where the worker's
// fits back up, a fit job does the last two on any worker instead. Each step
// checks the sequence number first, so a job for a line that was edited, re-queued or
// cancelled since finishes without writing anything. Line states change in the
// database, whose trigger announces them to the web server for live status.
//
// The package writes no SQL: the store does. Where a job must be inserted in one of
// the store's transactions, the store hands it over as a *sql.Tx, and the pipeline's
// one insert client (River's database/sql driver) inserts on it.
package workflow

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"dubstudio/studio"
)

// Pipeline queues and cancels renders. The web server holds one; it needs no engine.
type Pipeline struct {
	store *studio.Store
	// inserter is the one client that inserts jobs (and cancels them, pauses
	// queues): on River's database/sql driver, whose transaction, *sql.Tx, is the one
	// the store's callbacks are given. The worker's own client fetches and works
	// jobs and inserts none.
	inserter *river.Client[*sql.Tx]
	logger   *slog.Logger
	// FirstLines is the most lines a render request may have and still go ahead of
	// the bulk renders waiting (RENDER_FIRST_LINES; DefaultFirstLines; 0: every
	// request waits its turn). Set it before the pipeline is used.
	FirstLines int
}

// Render jobs' River priorities (1 is worked first): a request of a few lines (an
// editor's retake, an edited line re-rendered) goes ahead of a project's bulk render,
// so that it does not wait behind a script's worth of queued lines. A job's fit job
// has its priority.
const (
	PriorityFirst = 1
	PriorityBulk  = 2
)

// DefaultFirstLines is Pipeline.FirstLines' default.
const DefaultFirstLines = 3

// NewPipeline makes a pipeline that inserts jobs through the store's own
// transactions, and installs itself as the store's line-change hook so that editing a
// line that is being rendered re-queues it, and as its gap-change hook so that a
// take whose tail a change of the slots ran into is fitted again.
func NewPipeline(store *studio.Store, logger *slog.Logger) (*Pipeline, error) {
	// FetchCooldown here only spaces out the notifications that tell workers about
	// new jobs; at River's default (100 ms) a render asked for right after another
	// went unannounced and waited for a worker's next poll (1 s).
	client, err := river.NewClient(riverdatabasesql.New(stdlib.OpenDBFromPool(store.Pool())), &river.Config{Logger: logger,
		FetchCooldown: river.FetchCooldownMin})
	if err != nil {
		return nil, fmt.Errorf("error creating River insert client: %w", err)
	}
	p := &Pipeline{store: store, inserter: client, logger: logger, FirstLines: DefaultFirstLines}
	store.LineChanged = p.lineChanged
	store.GapsChanged = p.gapsChanged
	return p, nil
}

// insertJobs returns the store's InsertJobsFunc for jobs of priority: a synthesize
// job per line, in tx.
func (p *Pipeline) insertJobs(priority int) studio.InsertJobsFunc {
	return func(ctx context.Context, tx *sql.Tx, lines []studio.QueuedLine) ([]int64, error) {
		params := make([]river.InsertManyParams, len(lines))
		for i, l := range lines {
			params[i] = river.InsertManyParams{Args: SynthesizeArgs{LineID: l.ID, RenderSeq: l.RenderSeq, ProjectID: l.ProjectID},
				InsertOpts: &river.InsertOpts{Priority: priority}}
		}
		res, err := p.inserter.InsertManyTx(ctx, tx, params)
		if err != nil {
			return nil, fmt.Errorf("error inserting render jobs: %w", err)
		}
		ids := make([]int64, len(res))
		for i, r := range res {
			ids[i] = r.Job.ID
		}
		return ids, nil
	}
}

// priorityOf is the priority of a request to render n chosen lines.
func (p *Pipeline) priorityOf(n int) int {
	if n <= p.FirstLines {
		return PriorityFirst
	}
	return PriorityBulk
}

// RenderPending queues every line of a project that has no finished render. Here and
// in RenderLines and RetryFailed, lines longer than the store's line limit are left
// as they are and named by a *studio.RenderRefusedError, returned with the count of
// the others, which are queued.
func (p *Pipeline) RenderPending(ctx context.Context, projectID int64) (int, error) {
	return p.store.QueueRenders(ctx, projectID, studio.RenderPending, nil, p.insertJobs(PriorityBulk))
}

// RenderLines queues the given lines (regenerating done ones), ahead of bulk renders
// where they are at most FirstLines.
func (p *Pipeline) RenderLines(ctx context.Context, projectID int64, lineIDs []int64) (int, error) {
	return p.store.QueueRenders(ctx, projectID, studio.RenderChosen, lineIDs, p.insertJobs(p.priorityOf(len(lineIDs))))
}

// RetryFailed re-queues a project's failed lines.
func (p *Pipeline) RetryFailed(ctx context.Context, projectID int64) (int, error) {
	return p.store.QueueRenders(ctx, projectID, studio.RenderFailed, nil, p.insertJobs(PriorityBulk))
}

// Cancel stops a project's renders: lines become cancelled at once; jobs still
// waiting are cancelled in River, and running ones finish without a take.
func (p *Pipeline) Cancel(ctx context.Context, projectID int64) (int, error) {
	jobIDs, err := p.store.CancelRenders(ctx, projectID)
	if err != nil {
		return 0, err
	}
	for _, id := range jobIDs {
		if id == 0 {
			continue
		}
		if _, err := p.inserter.JobCancel(ctx, id); err != nil && !errors.Is(err, river.ErrNotFound) {
			p.logger.WarnContext(ctx, "error cancelling job", "job", id, "err", err)
		}
	}
	return len(jobIDs), nil
}

// PauseSynthesis stops every worker from starting new syntheses (running ones end).
// It works before any worker has run too: the queue is then created paused.
func (p *Pipeline) PauseSynthesis(ctx context.Context) error {
	err := p.inserter.QueuePause(ctx, QueueSynthesis, nil)
	if errors.Is(err, river.ErrNotFound) {
		return p.store.CreatePausedQueue(ctx, QueueSynthesis)
	}
	return err
}

// ResumeSynthesis lets workers start syntheses again.
func (p *Pipeline) ResumeSynthesis(ctx context.Context) error {
	return p.inserter.QueueResume(ctx, QueueSynthesis, nil)
}

// SynthesisPaused reports whether the synthesis queue is paused.
func (p *Pipeline) SynthesisPaused(ctx context.Context) (bool, error) {
	q, err := p.inserter.QueueGet(ctx, QueueSynthesis)
	if errors.Is(err, river.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return q.PausedAt != nil, nil
}

// lineChanged re-queues a line whose audible content changed while it was queued or
// being rendered (a notes-only edit leaves the render alone): the running job becomes stale and a job for the new content is
// inserted in the same transaction as the edit.
func (p *Pipeline) lineChanged(ctx context.Context, tx *sql.Tx, before, after *studio.Line) error {
	if before == nil || after == nil || !before.State.Active() || !after.LatestChangeAudible() {
		return nil
	}
	after.RenderSeq = before.RenderSeq + 1
	after.State = studio.StateQueued
	ids, err := p.insertJobs(p.priorityOf(1))(ctx, tx, []studio.QueuedLine{{Line: *after}})
	if err != nil {
		return err
	}
	return p.store.RequeueLine(ctx, tx, after.ID, after.RenderSeq, ids[0])
}

// gapsChanged fits again, in tx, every finished take of the project whose borrowed
// tail the change of the slots ran into the next line (studio.Store.OverrunTakes):
// a fit job of the take's raw audio, to the gap as it now is, on the fit queue, with
// no GPU and the same performance. A take without its raw audio (none recorded) is
// rendered again instead.
func (p *Pipeline) gapsChanged(ctx context.Context, tx *sql.Tx, projectID int64, lineIDs []int64) error {
	over, err := p.store.OverrunTakes(ctx, tx, projectID, lineIDs)
	if err != nil {
		return err
	}
	for _, o := range over {
		seq, t := o.RenderSeq+1, o.Take
		if t.RawSHA256 == nil {
			ids, err := p.insertJobs(p.priorityOf(1))(ctx, tx, []studio.QueuedLine{{Line: studio.Line{ID: t.LineID, ProjectID: projectID, RenderSeq: seq}}})
			if err != nil {
				return err
			}
			if err := p.store.StartRefit(ctx, tx, t.LineID, seq, ids[0], studio.StateQueued); err != nil {
				return err
			}
			continue
		}
		fit := FitArgs{LineID: t.LineID, RenderSeq: seq, ProjectID: projectID, Revision: t.Revision,
			RawSHA256: *t.RawSHA256, SpokenText: t.SpokenText, Engine: t.Engine, ModelVersion: t.ModelVersion,
			Device: t.GPU, Worker: t.Worker, Seed: t.Seed, Deterministic: t.Deterministic,
			PeakBytes: t.PeakVRAMBytes, SynthMs: t.SynthMs, AudioSeconds: float64(t.AudioMs) / 1000,
			Usage: t.Usage, RefitOf: t.ID}
		res, err := p.inserter.InsertTx(ctx, tx, fit, &river.InsertOpts{Priority: PriorityFirst})
		if err != nil {
			return fmt.Errorf("error inserting a fit job: %w", err)
		}
		if err := p.store.StartRefit(ctx, tx, t.LineID, seq, res.Job.ID, studio.StateFitting); err != nil {
			return err
		}
	}
	return nil
}
