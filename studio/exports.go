package studio

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"dubstudio/i18n"

	"gorm.io/gorm"
)

// ExportState is where an export job is.
type ExportState string

const (
	ExportQueued  ExportState = "queued"
	ExportRunning ExportState = "running"
	ExportDone    ExportState = "done"
	ExportFailed  ExportState = "failed"
)

// Export is one export of a project's audio: a zip of per-line WAVs, the assembled
// track, stems, subtitles and a manifest.
type Export struct {
	ID           int64
	ProjectID    int64
	ApprovedOnly bool
	State        ExportState
	Progress     int
	Lines        int
	SizeBytes    int64
	Error        string
	CreatedBy    *int64
	CreatedAt    time.Time
	FinishedAt   *time.Time
}

// QueueExportFunc inserts an export's job inside tx.
type QueueExportFunc func(ctx context.Context, tx *sql.Tx, e *Export) error

// CreateExport records a requested export and, in the same transaction, runs queue
// (which inserts its job). A project whose programme (its last line's end) is longer
// than Limits.ExportMs is refused with an error that unwraps to ErrInvalid.
func (s *Store) CreateExport(ctx context.Context, projectID, userID int64, approvedOnly bool, queue QueueExportFunc) (*Export, error) {
	e := &Export{ProjectID: projectID, ApprovedOnly: approvedOnly, State: ExportQueued, CreatedBy: &userID}
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var programmeMs int
		if err := tx.Raw("SELECT coalesce(max(end_ms), 0) FROM lines WHERE project_id = ?", projectID).Scan(&programmeMs).Error; err != nil {
			return err
		}
		if most := s.Limits.ExportMs(); programmeMs > most {
			return i18n.Errorf(ErrInvalid, "export.too_long", seconds(programmeMs), seconds(most))
		}
		if err := tx.Omit("CreatedAt", "FinishedAt").Create(e).Error; err != nil {
			return err
		}
		t, err := sqlTx(tx)
		if err != nil {
			return err
		}
		return queue(ctx, t, e)
	})
	return e, err
}

// Export returns one export of a project.
func (s *Store) Export(ctx context.Context, projectID, id int64) (*Export, error) {
	var e Export
	err := s.db.WithContext(ctx).Where("project_id = ? AND id = ?", projectID, id).First(&e).Error
	return &e, notFound(err, "export")
}

// Exports lists a project's exports, newest first.
func (s *Store) Exports(ctx context.Context, projectID int64) ([]Export, error) {
	var es []Export
	err := s.db.WithContext(ctx).Where("project_id = ?", projectID).Order("id DESC").Limit(20).Find(&es).Error
	return es, err
}

// ExportProgress updates a running export.
func (s *Store) ExportProgress(ctx context.Context, id int64, progress int) error {
	return s.db.WithContext(ctx).Exec(`UPDATE exports SET state = 'running', progress = ? WHERE id = ?`, progress, id).Error
}

// FinishExport records an export's outcome.
func (s *Store) FinishExport(ctx context.Context, id int64, lines int, size int64, exportErr string) error {
	state := ExportDone
	if exportErr != "" {
		state = ExportFailed
	}
	return s.db.WithContext(ctx).Exec(`UPDATE exports SET state = ?, progress = CASE WHEN ? THEN 100 ELSE progress END,
		lines = ?, size_bytes = ?, error = ?, finished_at = now() WHERE id = ?`,
		state, exportErr == "", lines, size, exportErr, id).Error
}

// ExportLine is one line as it goes into an export.
type ExportLine struct {
	Line      Line
	Character string
	Take      Take
}

// ExportLines returns the lines to export with their takes, in script order: the
// approved take of each line, or (approvedOnly false) the approved or else current
// take of each line that has one. Lines without such a take are left out.
func (s *Store) ExportLines(ctx context.Context, projectID int64, approvedOnly bool) ([]ExportLine, error) {
	lines, err := s.AllLines(ctx, projectID)
	if err != nil {
		return nil, err
	}
	chars, err := s.Characters(ctx, projectID)
	if err != nil {
		return nil, err
	}
	names := map[int64]string{}
	for _, c := range chars {
		names[c.ID] = c.Name
	}
	var ids []int64
	for _, l := range lines {
		if l.ApprovedTakeID != nil {
			ids = append(ids, *l.ApprovedTakeID)
		} else if !approvedOnly && l.CurrentTakeID != nil {
			ids = append(ids, *l.CurrentTakeID)
		}
	}
	takes, err := s.TakesByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []ExportLine
	for _, l := range lines {
		var id *int64
		if l.ApprovedTakeID != nil {
			id = l.ApprovedTakeID
		} else if !approvedOnly {
			id = l.CurrentTakeID
		}
		if id == nil {
			continue
		}
		t, ok := takes[*id]
		if !ok {
			continue
		}
		el := ExportLine{Line: l, Take: t}
		if l.CharacterID != nil {
			el.Character = names[*l.CharacterID]
		}
		out = append(out, el)
	}
	return out, nil
}

// CSVCell neutralises a text cell of an exported CSV (OWASP's CSV injection): a cell
// that begins with =, +, -, @, a tab or a carriage return would be read as a formula
// by a spreadsheet, so it gets a leading apostrophe, which spreadsheets show as text.
// Numbers the program writes itself are not passed through it.
func CSVCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
