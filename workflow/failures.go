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

// recordedError is an attempt's error that fail has recorded on its line, returned
// to River for the retry.
type recordedError struct{ error }

func (e recordedError) Unwrap() error { return e.error }

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
func (w *Worker) settle(ctx context.Context, job *rivertype.JobRow, lineID int64, seq int, work func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = w.fail(ctx, job, lineID, seq, fmt.Errorf("panic: %v\n%s", r, debug.Stack()))
		}
	}()
	err = work()
	var recorded recordedError
	var cancel *river.JobCancelError
	var snooze *river.JobSnoozeError
	if err == nil || errors.As(err, &recorded) || errors.As(err, &cancel) || errors.As(err, &snooze) {
		return err
	}
	return w.fail(ctx, job, lineID, seq, err)
}

// fail records a failed attempt and returns what River should do with the job.
func (w *Worker) fail(ctx context.Context, job *rivertype.JobRow, lineID int64, seq int, err error) error {
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
		// Out of memory is retried OOMRetries times (the executor admits less meanwhile).
		permanent = job.Attempt > w.cfg.OOMRetries
	}
	final := permanent || job.Attempt >= job.MaxAttempts
	msg, detail := errorText(err)
	// The job's context may have ended (its timeout): the failure is written all the
	// same, or the line would show a step it is no longer at.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if _, serr := w.store.RenderFailure(rctx, lineID, seq, job.Attempt, msg, detail, final); serr != nil {
		if final {
			// The line cannot be told (the database is away): River would discard the
			// job and leave the line active for good. The job comes back to run again,
			// without spending an attempt, and records its outcome then.
			w.logger.WarnContext(ctx, "render failure not recorded: the job runs again", "line", lineID, "err", errors.Join(err, serr))
			return river.JobSnooze(recordRetry)
		}
		return errors.Join(err, serr)
	}
	if !errors.Is(err, context.Canceled) {
		w.logger.WarnContext(ctx, "render attempt failed", "line", lineID, "attempt", job.Attempt, "final", final, "err", err)
	}
	if final {
		return river.JobCancel(err)
	}
	return recordedError{err}
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
