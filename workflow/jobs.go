package workflow

import (
	"time"

	"github.com/riverqueue/river"

	"dubstudio/studio"
)

// Queues. Synthesis is bounded by engine permits; fitting by CPU cores.
const (
	QueueSynthesis = "synthesis"
	QueueFit       = "fit"
	QueuePrepare   = "prepare"
	QueueExport    = "export"
)

// SynthesizeArgs renders one line. A job whose RenderSeq is no longer the line's is
// stale and finishes without a take.
type SynthesizeArgs struct {
	LineID    int64 `json:"line_id" river:"unique"`
	RenderSeq int   `json:"render_seq" river:"unique"`
	ProjectID int64 `json:"project_id"`
}

// Kind implements river.JobArgs.
func (SynthesizeArgs) Kind() string { return "synthesize_line" }

// InsertOpts makes each render of a line unique while it is waiting or running.
func (SynthesizeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueSynthesis, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// FitArgs fits a synthesized take to its slot.
type FitArgs struct {
	LineID    int64 `json:"line_id" river:"unique"`
	RenderSeq int   `json:"render_seq" river:"unique"`
	ProjectID int64 `json:"project_id"`
	Revision  int   `json:"revision"`
	// RawSHA256 is the engine's output, stored as a blob.
	RawSHA256    string `json:"raw_sha256"`
	SpokenText   string `json:"spoken_text"`
	Engine       string `json:"engine"`
	ModelVersion string `json:"model_version"`
	Device       string `json:"device"`
	Worker       string `json:"worker"`
	Seed         int64  `json:"seed"`
	// Deterministic: the engine's audio does not depend on Seed (tts.Result).
	Deterministic bool    `json:"deterministic,omitempty"`
	PeakBytes     int64   `json:"peak_bytes"`
	SynthMs       int     `json:"synth_ms"`
	AudioSeconds  float64 `json:"audio_seconds"`
	// Usage is the synthesis's resource usage, for the take.
	Usage studio.TakeUsage `json:"usage"`
	// RefitOf, when not 0, is the take whose raw audio this fit fits again
	// (Pipeline.gapsChanged): its synthesis, SynthMs and Usage are that take's.
	RefitOf int64 `json:"refit_of,omitempty"`
}

// Kind implements river.JobArgs.
func (FitArgs) Kind() string { return "fit_line" }

// InsertOpts puts fitting on its own queue.
func (FitArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueFit, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// PrepareSpeakerArgs computes a character's speaker conditioning once per reference
// audio and model version.
type PrepareSpeakerArgs struct {
	RefSHA256    string `json:"ref_sha256" river:"unique"`
	ModelVersion string `json:"model_version" river:"unique"`
}

// Kind implements river.JobArgs.
func (PrepareSpeakerArgs) Kind() string { return "prepare_speaker" }

// InsertOpts makes preparation unique per reference and model.
func (PrepareSpeakerArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueuePrepare, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// conditioningWait is how long a line waits (snoozed, holding no permit) for its
// speaker's conditioning before looking again.
const conditioningWait = 500 * time.Millisecond
