package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"dubstudio/audio"
	"dubstudio/studio"
	"dubstudio/tts"
)

// failure is a render failure to show the user: a catalog key and its arguments.
type failure struct {
	key  string
	args []any
}

func (f *failure) Error() string { return "render failed: " + f.key }

func userKey(key string, args ...any) error { return &failure{key: key, args: args} }

// text is the failure as a line or an export stores it: its key and arguments.
func (f *failure) text() string {
	b, _ := json.Marshal(map[string]any{"key": f.key, "args": f.args})
	return string(b)
}

func errorText(err error) (msg, detail string) {
	var f *failure
	if errors.As(err, &f) {
		return f.text(), ""
	}
	var te *tts.Error
	if errors.As(err, &te) {
		b, _ := json.Marshal(map[string]any{"key": te.Code.MessageKey()})
		return string(b), strings.TrimSpace(te.Error() + "\n" + te.Traceback)
	}
	b, _ := json.Marshal(map[string]any{"key": "render.internal", "args": []any{err.Error()}})
	return string(b), err.Error()
}

// recordedError is an attempt's error that needs no writing, returned to River for
// the retry: fail (or record) wrote it where the user sees it, or the attempt's
// outcome is written already.
type recordedError struct{ error }

func (e recordedError) Unwrap() error { return e.error }

// oomError marks an attempt's error as an out-of-memory, in the text River keeps of
// it (JobRow.Errors), so that later attempts count the job's OOMs (earlierOOMs).
type oomError struct{ error }

// oomMark starts the text of an oomError.
const oomMark = "out of memory: "

func (e oomError) Error() string { return oomMark + e.error.Error() }
func (e oomError) Unwrap() error { return e.error }

// earlierOOMs counts the job's earlier attempts that ran out of memory.
func earlierOOMs(job *rivertype.JobRow) int {
	n := 0
	for _, e := range job.Errors {
		if strings.HasPrefix(e.Error, oomMark) {
			n++
		}
	}
	return n
}

// recordTimeout bounds the write of a failure whose job's context has ended.
const recordTimeout = 10 * time.Second

// recordRetry is how long a job whose last attempt could not record its failure
// waits before it runs again.
const recordRetry = 10 * time.Second

// settle runs an attempt of a render (work) and records on the line an error that
// no step recorded (a database or blob store call, the permits, the job's timeout
// while it waited for a permit or a fit) or a panic, as fail does: the line waits in
// queued with the error while River retries the job, and shows failed once River
// gives up on it. Returned as it was, such an error (and a panic, which River turns
// into one) left the line queued, waiting for the GPU, synthesizing or fitting after
// its last attempt, with no job left to move it.
func (w *Worker) settle(ctx context.Context, job *rivertype.JobRow, lineID int64, seq int, work func() error) error {
	return settleWith(work, func(err error) error { return w.fail(ctx, job, lineID, seq, err) })
}

// settleWith runs work, an attempt of a job, and hands an error that work did not
// record (any but a recordedError, JobCancel or JobSnooze), or a panic, to record,
// which writes it where the user sees it (a line, an export, a proxy) and returns
// what River should do with the job. Each River worker's Work goes through it.
func settleWith(work func() error, record func(error) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = record(fmt.Errorf("panic: %v\n%s", r, debug.Stack()))
		}
	}()
	err = work()
	var recorded recordedError
	var cancel *river.JobCancelError
	var snooze *river.JobSnoozeError
	if err == nil || errors.As(err, &recorded) || errors.As(err, &cancel) || errors.As(err, &snooze) {
		return err
	}
	return record(err)
}

// fail records a failed attempt and returns what River should do with the job.
func (w *Worker) fail(ctx context.Context, job *rivertype.JobRow, lineID int64, seq int, err error) error {
	if w.interrupted(ctx) {
		return w.interrupt(ctx, err, func(ctx context.Context) error {
			_, serr := w.store.SetRenderState(ctx, lineID, seq, studio.StateQueued, job.Attempt-1)
			return serr
		}, "line", lineID)
	}
	if diskFull(err) {
		// Nothing will succeed until someone frees space: say so, and stop retrying.
		err = userKey("audio.no_space")
	}
	permanent := false
	var f *failure
	switch {
	case errors.As(err, &f), errors.Is(err, tts.ErrInvalidInput):
		permanent = true
	case errors.Is(err, tts.ErrOutOfMemory):
		// Out of memory is retried OOMRetries times (the executor admits less
		// meanwhile): the job's earlier OOMs count, not its attempts, which other
		// errors spend too.
		permanent = earlierOOMs(job) >= w.cfg.OOMRetries
		err = oomError{err}
	}
	final := permanent || lastAttempt(job)
	msg, detail := errorText(err)
	err = w.record(ctx, err, final, func(ctx context.Context) error {
		_, serr := w.store.RenderFailure(ctx, lineID, seq, job.Attempt, msg, detail, final)
		return serr
	}, "line", lineID)
	var recorded recordedError
	var cancel *river.JobCancelError
	if (errors.As(err, &recorded) || errors.As(err, &cancel)) && !errors.Is(err, context.Canceled) {
		w.logger.WarnContext(ctx, "render attempt failed", "line", lineID, "attempt", job.Attempt, "final", final, "err", err)
	}
	return err
}

// record writes an attempt's failure (err) with write, given a context that outlives
// the job's (its timeout may have ended: the failure is written all the same, or
// the user would see a step the job is no longer at), and returns what River
// should do with the job: cancel it where final, retry it otherwise. A failure that
// cannot be written is retried, and snoozed where final (unwritten). what and id
// name what failed, for the log.
func (w *Worker) record(ctx context.Context, err error, final bool, write func(context.Context) error, what string, id any) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if serr := write(rctx); serr != nil {
		return w.unwritten(ctx, final, errors.Join(err, serr), what, id)
	}
	if final {
		return river.JobCancel(err)
	}
	return recordedError{err}
}

// unwritten is what River is told of an attempt whose outcome (err says why) could
// not be written, the database away. On a last attempt River would discard the job
// and leave the line, export or proxy active for good: the job is snoozed instead,
// which spends no attempt (River puts the attempt back), and writes its outcome
// when it runs again. Otherwise River retries it.
func (w *Worker) unwritten(ctx context.Context, final bool, err error, what string, id any) error {
	if !final {
		return err
	}
	w.logger.WarnContext(ctx, "outcome not recorded: the job runs again", what, id, "err", err)
	return river.JobSnooze(recordRetry)
}

// lastAttempt reports whether River discards the job if this attempt fails.
func lastAttempt(job *rivertype.JobRow) bool { return job.Attempt >= job.MaxAttempts }

// interrupted reports whether the job's context ended because this worker is
// stopping: Stop's grace period ended, and River's hard stop (StopAndCancel)
// cancelled the jobs still running. Not the job's timeout (DeadlineExceeded) nor a
// cancel from River's UI (ErrJobCancelledRemotely).
func (w *Worker) interrupted(ctx context.Context) bool {
	return w.stopping.Load() && errors.Is(ctx.Err(), context.Canceled) &&
		!errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely)
}

// interrupt ends an attempt that the worker's stop cut short (interrupted): nothing
// failed, so nothing is recorded as failed, whatever err the step saw (an engine's
// dropped request, a model host's error). River puts back a job that returns
// context.Canceled after its stop cancelled it, without spending the attempt, and
// another worker runs it; requeue shows it waiting again.
func (w *Worker) interrupt(ctx context.Context, err error, requeue func(context.Context) error, what string, id any) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if rerr := requeue(rctx); rerr != nil {
		w.logger.WarnContext(ctx, "interrupted by the stop: not shown as queued", what, id, "err", rerr)
	}
	if !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: the worker stopped: %w", context.Canceled, err)
	}
	return err
}

// diskFull reports whether err says the disk is full, from this process or in the
// text of an engine process's error (a model host's OSError).
func diskFull(err error) bool {
	if errors.Is(err, audio.ErrNoSpace) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Disk quota exceeded")
}
