package studio

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"time"

	"dubstudio/i18n"
	"dubstudio/studio/script"

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
	ID        int64
	ProjectID int64
	ExportOptions
	State      ExportState
	Progress   int
	Lines      int
	SizeBytes  int64
	Error      string
	CreatedBy  *int64
	CreatedAt  time.Time
	FinishedAt *time.Time
	// LeftOut lists the lines the export left out because their take is stale.
	LeftOut []LeftOutLine `gorm:"serializer:json"`
}

// ExportOptions are what an export request chooses (docs/exports.md). The zero value
// is the default except for BitDepth, StartTimecode and FPS, which Normalize fills in.
type ExportOptions struct {
	ApprovedOnly bool
	// IncludeStale puts in takes whose line changed after they were rendered; by
	// default they are left out and listed.
	IncludeStale bool
	// Stereo writes mixes and stems as two identical channels (dual-mono).
	Stereo bool
	// BitDepth of mixes and stems: 16 (default) or 24.
	BitDepth int
	// SpeakerNames prefixes each subtitle with its character's name.
	SpeakerNames bool
	// StartTimecode (HH:MM:SS:FF at FPS, HH:MM:SS;FF drop-frame at 29.97) is the
	// programme's first sample; mixes and stems carry it as a Broadcast WAV time
	// reference. Default 00:00:00:00.
	StartTimecode string
	// FPS of StartTimecode: one of script.FrameRates, script.DefaultFPS by default.
	FPS script.FPS
	// BedMix adds a full mix of the dialogue over the project's bed, the bed ducked
	// under the lines and the whole brought to the loudness target (BED_MIX_LUFS).
	// The bed's own stem goes in whenever the project has a bed.
	BedMix bool
}

// DefaultStartTimecode is the programme's start when an export does not say.
const DefaultStartTimecode = "00:00:00:00"

// Normalize fills in the defaults and checks the options; bad ones give an error that
// unwraps to ErrInvalid.
func (o *ExportOptions) Normalize() error {
	if o.BitDepth == 0 {
		o.BitDepth = 16
	}
	if o.FPS == "" {
		o.FPS = script.DefaultFPS
	}
	if strings.TrimSpace(o.StartTimecode) == "" {
		o.StartTimecode = DefaultStartTimecode
	}
	o.StartTimecode = strings.TrimSpace(o.StartTimecode)
	if o.BitDepth != 16 && o.BitDepth != 24 {
		return i18n.Errorf(ErrInvalid, "export.bad_bit_depth", o.BitDepth)
	}
	if !script.KnownFPS(o.FPS) {
		return i18n.Errorf(ErrInvalid, "export.bad_fps", string(o.FPS), fpsList())
	}
	_, err := TimecodeSamples(o.StartTimecode, o.FPS, 48000)
	return err
}

// fpsList names the frame rates an export offers, for a message.
func fpsList() string {
	var names []string
	for _, f := range script.FrameRates() {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// TimecodeSamples returns the time since midnight of the timecode tc (HH:MM:SS:FF at
// fps, HH:MM:SS;FF drop-frame at 29.97) in sample frames at rate, rounded down: the
// Broadcast WAV TimeReference of a programme that starts at tc. A timecode that is
// malformed, past 23:59:59, or a label drop-frame skips gives an error that unwraps
// to ErrInvalid.
func TimecodeSamples(tc string, fps script.FPS, rate int) (int64, error) {
	if len(tc) != len(DefaultStartTimecode) || tc[:2] > "23" {
		return 0, i18n.Errorf(ErrInvalid, "export.bad_timecode", tc, fps.LastFrame())
	}
	n, key, args := script.FrameSamples(tc, fps, rate)
	switch key {
	case "":
		return n, nil
	case "script.drop_frame_rate":
		return 0, i18n.Errorf(ErrInvalid, "export.drop_frame_rate", tc, string(fps))
	case "script.dropped_frame":
		return 0, i18n.Errorf(ErrInvalid, key, args...)
	default:
		return 0, i18n.Errorf(ErrInvalid, "export.bad_timecode", tc, fps.LastFrame())
	}
}

// LeftOutLine is a line an export left out, and why ("changed": its line was edited
// after the take was rendered).
type LeftOutLine struct {
	Index  int    `json:"index"`
	LineID int64  `json:"line_id"`
	TakeID int64  `json:"take_id"`
	Reason string `json:"reason"`
	Text   string `json:"text"`
}

// QueueExportFunc inserts an export's job inside tx.
type QueueExportFunc func(ctx context.Context, tx *sql.Tx, e *Export) error

// CreateExport records a requested export and, in the same transaction, runs queue
// (which inserts its job). A project whose programme (its last line's end) is longer
// than Limits.ExportMs is refused with an error that unwraps to ErrInvalid.
func (s *Store) CreateExport(ctx context.Context, projectID, userID int64, opts ExportOptions, queue QueueExportFunc) (*Export, error) {
	if err := opts.Normalize(); err != nil {
		return nil, err
	}
	e := &Export{ProjectID: projectID, ExportOptions: opts, State: ExportQueued, CreatedBy: &userID, LeftOut: []LeftOutLine{}}
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		programmeMs, err := programmeMs(tx, projectID)
		if err != nil {
			return err
		}
		if most := s.Limits.ExportMs(); programmeMs > most {
			return i18n.Errorf(ErrInvalid, "export.too_long", seconds(programmeMs), seconds(most))
		}
		if opts.BedMix {
			var beds int64
			if err := tx.Raw(`SELECT count(*) FROM project_beds WHERE project_id = ?`, projectID).Scan(&beds).Error; err != nil {
				return err
			}
			if beds == 0 {
				return i18n.Errorf(ErrInvalid, "export.no_bed")
			}
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

// programmeMs is how long a project's programme is: to the end of its last line's
// slot, or its source audio's duration when that is longer.
func programmeMs(tx *gorm.DB, projectID int64) (int, error) {
	var ms int
	err := tx.Raw(`SELECT greatest((SELECT coalesce(max(end_ms), 0) FROM lines WHERE project_id = ?),
		(SELECT coalesce(max(duration_ms), 0) FROM project_sources WHERE project_id = ?))`, projectID, projectID).Scan(&ms).Error
	return ms, err
}

// ProgrammeMs is how long a project's programme is, and so every mix and stem of its
// exports: to the end of the last line's slot, or the source audio's duration when the
// project has one and it is longer.
func (s *Store) ProgrammeMs(ctx context.Context, projectID int64) (int, error) {
	return programmeMs(s.db.WithContext(ctx), projectID)
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

// RetryExport puts an export whose attempt failed back in the queue, with the error,
// while its job waits for the next attempt.
func (s *Store) RetryExport(ctx context.Context, id int64, exportErr string) error {
	return s.db.WithContext(ctx).Exec(`UPDATE exports SET state = ?, progress = 0, error = ? WHERE id = ?`,
		ExportQueued, exportErr, id).Error
}

// FinishExport records an export's outcome.
// leftOut (nil for none) is what the export left out.
func (s *Store) FinishExport(ctx context.Context, id int64, lines int, size int64, leftOut []LeftOutLine, exportErr string) error {
	state := ExportDone
	if exportErr != "" {
		state = ExportFailed
	}
	if leftOut == nil {
		leftOut = []LeftOutLine{}
	}
	b, err := json.Marshal(leftOut)
	if err != nil {
		return err
	}
	return s.db.WithContext(ctx).Exec(`UPDATE exports SET state = ?, progress = CASE WHEN ? THEN 100 ELSE progress END,
		lines = ?, size_bytes = ?, left_out = ?, error = ?, finished_at = now() WHERE id = ?`,
		state, exportErr == "", lines, size, string(b), exportErr, id).Error
}

// ExportLine is one line as it goes into an export.
type ExportLine struct {
	Line      Line
	Character string
	Take      Take
}

// Stale reports whether what the line sounds like changed after its take was
// rendered: its text, character, emotion or slot (Audible; not its notes). A take keeps
// the revision it was rendered from, a line the revision of its last audible change.
func (el ExportLine) Stale() bool { return el.Line.AudibleRevision > el.Take.Revision }

// ExportLines returns the lines to export with their takes, in script order: the
// approved take of each line, or (approvedOnly false) the approved or else current
// take of each line that has one. Lines without such a take are left out. Unless
// includeStale, so are lines whose take is stale (ExportLine.Stale); those are
// returned as leftOut.
func (s *Store) ExportLines(ctx context.Context, projectID int64, approvedOnly, includeStale bool) (out []ExportLine, leftOut []LeftOutLine, err error) {
	all, err := s.exportLines(ctx, projectID, approvedOnly)
	if err != nil {
		return nil, nil, err
	}
	for _, el := range all {
		if !includeStale && el.Stale() {
			leftOut = append(leftOut, LeftOutLine{Index: el.Line.Idx, LineID: el.Line.ID, TakeID: el.Take.ID, Reason: "changed", Text: el.Line.Text})
			continue
		}
		out = append(out, el)
	}
	return out, leftOut, nil
}

func (s *Store) exportLines(ctx context.Context, projectID int64, approvedOnly bool) ([]ExportLine, error) {
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
