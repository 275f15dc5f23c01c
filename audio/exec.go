package audio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Programs run by this package, looked up in PATH.
const (
	ffmpegBin  = "ffmpeg"
	ffprobeBin = "ffprobe"
)

// stderrKeep is how much of a tool's stderr is kept for error messages.
const stderrKeep = 4 << 10

// mediaArg turns one of our paths into an ffmpeg/ffprobe input or output argument.
// A name starting with "-" is refused outright (it could be read as an option), and
// the "file:" prefix stops ffmpeg from reading a name like "concat:a|b" or "http:..."
// as a protocol.
func mediaArg(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%w: empty file name", ErrInvalid)
	}
	if strings.HasPrefix(path, "-") {
		return "", fmt.Errorf("%w: file name %q starts with '-'", ErrInvalid, path)
	}
	return "file:" + path, nil
}

// tailBuffer keeps the last stderrKeep bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > stderrKeep {
		t.b = append(t.b[:0], t.b[len(t.b)-stderrKeep:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(bytes.TrimSpace(t.b)) }

// runTool runs name with args, feeding stdin and collecting stdout when they are not
// nil. It returns the tail of stderr, also on success. A program that exits with an
// error gives a *toolError; a cancelled ctx kills the program and returns ctx's error.
func runTool(ctx context.Context, name string, args []string, stdin io.Reader, stdout io.Writer) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	var stderr tailBuffer
	cmd.Stderr = &stderr
	// Without WaitDelay a child that ignores the kill, or a grandchild holding a pipe,
	// would keep Wait blocked after ctx is done.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err == nil {
		return stderr.String(), nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return stderr.String(), fmt.Errorf("%s interrupted: %w", name, ctxErr)
	}
	var notFound *exec.Error
	if errors.As(err, &notFound) {
		return "", fmt.Errorf("error running %s (is it installed?): %w", name, err)
	}
	return stderr.String(), &toolError{Name: name, Err: err, Stderr: stderr.String()}
}

// toolError is a program that ran and failed (as opposed to one that could not be
// started, or was stopped because ctx was done).
type toolError struct {
	Name   string
	Err    error
	Stderr string
}

func (e *toolError) Error() string {
	return fmt.Sprintf("%s failed: %v: %s", e.Name, e.Err, lastLine(e.Stderr))
}

func (e *toolError) Unwrap() error { return e.Err }

// lastLine returns the last non-empty line of s, which is where ffmpeg says what went
// wrong.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}
