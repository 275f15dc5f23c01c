package audio

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"dubstudio/i18n"
)

// Category sentinels. Errors returned by this package unwrap to one of these where the
// category matters to the caller; the ones a user can act on also unwrap to an
// *i18n.Error whose text can be shown in the user's language.
var (
	// ErrNotAudio: the file is not decodable audio (empty, another kind of file,
	// truncated, or a video without a sound track).
	ErrNotAudio = errors.New("not audio")
	// ErrFormat: the file is audio, but in a format not accepted where it is used.
	ErrFormat = errors.New("audio format not accepted")
	// ErrNoSpace: the disk is full; nothing was written.
	ErrNoSpace = errors.New("no space left on device")
	// ErrInvalid: the caller passed parameters that cannot be honoured (a negative
	// slot, a clip in the wrong format, a file name starting with "-").
	ErrInvalid = errors.New("invalid audio parameters")
)

// userError returns an error that unwraps to sentinel and to an *i18n.Error with key,
// followed by the technical cause (for logs) when there is one.
func userError(sentinel error, cause error, key string, args ...any) error {
	ue := i18n.Errorf(sentinel, key, args...)
	if cause == nil {
		return ue
	}
	return fmt.Errorf("%w: %w", ue, cause)
}

// noSpace reports whether err, or the stderr text of a tool, says the disk is full.
func noSpace(err error, stderr string) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		strings.Contains(stderr, "No space left on device") ||
		strings.Contains(stderr, "Disk quota exceeded")
}

// writeError classifies an error met while writing path: a full disk unwraps to
// ErrNoSpace (and to a user message), anything else is wrapped as is.
func writeError(path string, err error, stderr string) error {
	if noSpace(err, stderr) {
		return userError(ErrNoSpace, fmt.Errorf("error writing %s: %w", path, err), "audio.no_space")
	}
	return fmt.Errorf("error writing %s: %w", path, err)
}
