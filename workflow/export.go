package workflow

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"

	"github.com/riverqueue/river"

	"dubstudio/studio"
	"dubstudio/studio/script"
)

// ExportArgs builds one export archive.
type ExportArgs struct {
	ExportID  int64 `json:"export_id" river:"unique"`
	ProjectID int64 `json:"project_id"`
}

// Kind implements river.JobArgs.
func (ExportArgs) Kind() string { return "export_project" }

// InsertOpts puts exports on their own queue.
func (ExportArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueExport, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Export queues an export of a project's approved takes (or all done takes) with the
// options opts chooses (studio.ExportOptions; docs/exports.md).
func (p *Pipeline) Export(ctx context.Context, projectID, userID int64, opts studio.ExportOptions) (*studio.Export, error) {
	return p.store.CreateExport(ctx, projectID, userID, opts, func(ctx context.Context, tx *sql.Tx, e *studio.Export) error {
		_, err := p.inserter.InsertTx(ctx, tx, ExportArgs{ExportID: e.ID, ProjectID: projectID}, nil)
		return err
	})
}

// ExportPath is where the archive of an export is kept.
func ExportPath(dataDir string, exportID int64) string {
	return filepath.Join(dataDir, "exports", "export-"+strconv.FormatInt(exportID, 10)+".zip")
}

// ManifestLine is one line of an export's manifest. StartMs and EndMs are its final
// span (where its take sits in the mix, and its subtitle's times); SlotStartMs and
// SlotEndMs the slot the script gave it. BorrowedMs is how much of the gap after the
// slot the take took when fitting (EndMs - SlotEndMs when it starts at its slot).
type ManifestLine struct {
	Index        int     `json:"index"`
	StartMs      int     `json:"start_ms"`
	EndMs        int     `json:"end_ms"`
	SlotStartMs  int     `json:"slot_start_ms"`
	SlotEndMs    int     `json:"slot_end_ms"`
	BorrowedMs   int     `json:"borrowed_ms"`
	Stale        bool    `json:"stale,omitempty"`
	Character    string  `json:"character"`
	Text         string  `json:"text"`
	SpokenText   string  `json:"spoken_text"`
	TakeID       int64   `json:"take_id"`
	Approved     bool    `json:"approved"`
	Engine       string  `json:"engine"`
	ModelVersion string  `json:"model_version"`
	DurationMs   int     `json:"duration_ms"`
	Samples      int64   `json:"samples"`
	StretchRatio float64 `json:"stretch_ratio"`
	File         string  `json:"file"`
	SHA256       string  `json:"sha256"`
}

// Manifest describes an export. Samples is the length of the mix and of every stem:
// the whole programme (studio.Store.ProgrammeMs). TimeReference is the Broadcast WAV
// time reference of mixes and stems (StartTimecode in samples since midnight).
type Manifest struct {
	Project       string     `json:"project"`
	SampleRate    int        `json:"sample_rate"`
	Channels      int        `json:"channels"`
	BitDepth      int        `json:"bit_depth"`
	StartTimecode string     `json:"start_timecode"`
	FPS           script.FPS `json:"fps"`
	TimeReference int64      `json:"time_reference"`
	Samples       int64      `json:"samples"`
	// ClippedSamples counts the samples of mix.wav where lines that overlap summed
	// past full scale and were clipped (0: none); there the stems do not add up to
	// the mix.
	ClippedSamples int64                `json:"clipped_samples"`
	Lines          []ManifestLine       `json:"lines"`
	Stems          []string             `json:"stems"`
	LeftOut        []studio.LeftOutLine `json:"left_out"`
	// Bed is the project's M&E bed in the export; absent when it has none.
	Bed *ManifestBed `json:"bed,omitempty"`
}

// ManifestBed is the bed's stem in an export: File runs from the programme's first
// sample for Samples frames (the mix's length), the upload trimmed or padded with
// silence. Kind is "me" (music and effects) or "full_mix" (the original mix, its own
// dialogue in it).
type ManifestBed struct {
	File             string          `json:"file"`
	Kind             string          `json:"kind"`
	SourceFile       string          `json:"source_file"`
	SourceSHA256     string          `json:"source_sha256"`
	SourceDurationMs int             `json:"source_duration_ms"`
	Samples          int64           `json:"samples"`
	Mix              *ManifestBedMix `json:"mix,omitempty"`
}

// ManifestBedMix is the full mix of the dialogue over the ducked bed, and how it was
// made: the ducking's settings, and the loudness measured before normalising
// (MeasuredLUFS, MeasuredTruePeakDB), the gain then applied to reach TargetLUFS, and
// whether a limiter held the peaks at TruePeakDB.
type ManifestBedMix struct {
	File               string  `json:"file"`
	TargetLUFS         float64 `json:"target_lufs"`
	TruePeakDB         float64 `json:"true_peak_db"`
	MeasuredLUFS       float64 `json:"measured_lufs"`
	MeasuredTruePeakDB float64 `json:"measured_true_peak_db"`
	GainDB             float64 `json:"gain_db"`
	Limited            bool    `json:"limited"`
	Ducking            string  `json:"ducking"`
	DuckThresholdDB    float64 `json:"duck_threshold_db"`
	DuckRatio          float64 `json:"duck_ratio"`
	DuckAttackMs       float64 `json:"duck_attack_ms"`
	DuckReleaseMs      float64 `json:"duck_release_ms"`
}
