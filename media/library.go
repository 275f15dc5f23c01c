// Package media keeps the studio's audio files: the reference voices and emotion
// recordings of characters, a project's source (the sound track of an uploaded audio
// or video file, and a video itself with its browser proxy), the source's segments
// that lines play and follow, the mixes of a range of lines and the dub preview of
// the whole programme. The web handlers and the workers share it, so each kind of file
// is probed, cut or mixed in one place, and derived audio is cached under one key.
//
// Errors that refuse a request unwrap to studio's category sentinels (ErrInvalid for
// a file that is not audio or not accepted, ErrNotFound for a segment that does not
// exist) and to an *i18n.Error whose text a user can act on.
package media

import (
	"errors"
	"fmt"
	"sync"

	"dubstudio/audio"
	"dubstudio/studio"
)

// Library stores a studio's audio files in its blob store and records them in the
// store.
type Library struct {
	store *studio.Store
	blobs studio.BlobStore
	// Limits bound the length of references and sources and the space extraction
	// leaves free (zero fields: the defaults).
	Limits Limits
	// Duck is how the preview ducks the M&E bed under the dub (the export's ducking,
	// BED_DUCK_*; zero fields: audio's defaults).
	Duck audio.DuckParams

	// peaks keeps takes' waveforms for the timeline (TakePeaks), sized on first use.
	peaksOnce sync.Once
	peaks     peaksCache
}

// NewLibrary returns the library of the audio in blobs, recorded in store.
func NewLibrary(store *studio.Store, blobs studio.BlobStore) *Library {
	return &Library{store: store, blobs: blobs}
}

// Upload is a file a user sent, already spooled to Path (a private temporary file).
// Name is the client's file name reduced to a display name, never used as a path.
type Upload struct {
	Path string
	Name string
}

// refused marks err, audio's refusal of a file a user sent (not audio, or a format
// not accepted here), as invalid input; other errors pass unchanged.
func refused(err error) error {
	if errors.Is(err, audio.ErrNotAudio) || errors.Is(err, audio.ErrFormat) {
		return fmt.Errorf("%w: %w", studio.ErrInvalid, err)
	}
	return err
}
