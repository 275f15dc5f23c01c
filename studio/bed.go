package studio

import (
	"context"
	"time"

	"dubstudio/i18n"
)

// BedKind says what a project's bed is.
type BedKind string

// Kinds of bed: a music-and-effects track without dialogue, or a full mix of the
// original programme whose own dialogue stays in it, ducked under the dub.
const (
	BedME      BedKind = "me"
	BedFullMix BedKind = "full_mix"
)

// ParseBedKind reads a bed kind from a form; anything else gives an error that
// unwraps to ErrInvalid.
func ParseBedKind(s string) (BedKind, error) {
	switch k := BedKind(s); k {
	case BedME, BedFullMix:
		return k, nil
	}
	return "", i18n.Errorf(ErrInvalid, "bed.bad_kind", s)
}

// ProjectBed is a project's music-and-effects bed (docs/exports.md, docs/picture.md):
// the sound the dub plays over, as a 48 kHz WAV blob.
type ProjectBed struct {
	ProjectID   int64   `gorm:"primaryKey"`
	AudioSHA256 string  `gorm:"column:audio_sha256"`
	Kind        BedKind // BedME or BedFullMix
	FileName    string  // the uploaded file's name, for display only
	DurationMs  int
	Channels    int
	UploadedBy  *int64
	CreatedAt   time.Time
}

// SetProjectBed records (or replaces) a project's bed.
func (s *Store) SetProjectBed(ctx context.Context, b ProjectBed) error {
	if _, err := ParseBedKind(string(b.Kind)); err != nil {
		return err
	}
	return s.db.WithContext(ctx).Exec(`INSERT INTO project_beds (project_id, audio_sha256, kind, file_name, duration_ms, channels, uploaded_by)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project_id) DO UPDATE SET audio_sha256 = excluded.audio_sha256,
		kind = excluded.kind, file_name = excluded.file_name, duration_ms = excluded.duration_ms,
		channels = excluded.channels, uploaded_by = excluded.uploaded_by, created_at = now()`,
		b.ProjectID, b.AudioSHA256, string(b.Kind), b.FileName, b.DurationMs, b.Channels, b.UploadedBy).Error
}

// ProjectBed returns a project's bed; ErrNotFound when it has none.
func (s *Store) ProjectBed(ctx context.Context, projectID int64) (*ProjectBed, error) {
	var b ProjectBed
	err := s.db.WithContext(ctx).Where("project_id = ?", projectID).First(&b).Error
	return &b, notFound(err, "bed")
}

// DeleteProjectBed forgets a project's bed (the blob stays, as a source's does).
func (s *Store) DeleteProjectBed(ctx context.Context, projectID int64) error {
	return s.db.WithContext(ctx).Exec(`DELETE FROM project_beds WHERE project_id = ?`, projectID).Error
}
