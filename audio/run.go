package audio

import (
	"context"
	"errors"
	"io"
)

// ErrToolFailed is what an error of RunFFmpeg and RunFFprobe unwraps to when the
// program ran and exited with an error (as opposed to one that could not be started,
// or was stopped because ctx was done).
var ErrToolFailed = errors.New("tool failed")

// Is makes a failed program's error match ErrToolFailed.
func (e *toolError) Is(target error) bool { return target == ErrToolFailed }

// RunFFmpeg runs ffmpeg with args as this package runs it, for packages above that
// run their own command lines: stdin and stdout are fed and written when not nil (a
// stdout that reads as it comes sees the output stream), only the last few KiB of
// stderr are kept, and once ctx is done the program is killed and Wait gives up on
// its pipes after a few seconds. It returns that tail of stderr, also on success.
func RunFFmpeg(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) (string, error) {
	return runTool(ctx, ffmpegBin, args, stdin, stdout)
}

// RunFFprobe runs ffprobe with args as RunFFmpeg runs ffmpeg.
func RunFFprobe(ctx context.Context, args []string, stdout io.Writer) (string, error) {
	return runTool(ctx, ffprobeBin, args, nil, stdout)
}
