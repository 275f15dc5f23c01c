package workflow

import (
	"context"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"dubstudio/studio"
)

// QueueMaintenance is the queue of the periodic housekeeping jobs (collect_blobs).
const QueueMaintenance = "maintenance"

// DefaultBlobGCInterval and DefaultBlobGCGrace are WorkerConfig.BlobGCInterval's and
// BlobGCGrace's defaults (BLOB_GC_INTERVAL, BLOB_GC_GRACE).
const (
	DefaultBlobGCInterval = 6 * time.Hour
	DefaultBlobGCGrace    = 24 * time.Hour
)

// BlobGCArgs removes the blobs nothing refers to (studio.Store.CollectBlobs). River's
// leader inserts it every BlobGCInterval; one waits or runs at a time.
type BlobGCArgs struct{}

// Kind implements river.JobArgs.
func (BlobGCArgs) Kind() string { return "collect_blobs" }

// InsertOpts puts the collector on the maintenance queue, once while it waits or runs.
func (BlobGCArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}}}
}

// blobGCWorker works collect_blobs jobs.
type blobGCWorker struct {
	river.WorkerDefaults[BlobGCArgs]
	w *Worker
}

func (g *blobGCWorker) Work(ctx context.Context, _ *river.Job[BlobGCArgs]) error {
	w := g.w
	run, err := w.store.CollectBlobs(ctx, w.blobs, studio.BlobGCOpts{Grace: w.cfg.BlobGCGrace, Interval: w.cfg.BlobGCInterval})
	if err != nil {
		return err
	}
	w.logger.InfoContext(ctx, "blobs collected", "removed", run.RemovedBlobs, "removed_bytes", run.RemovedBytes,
		"missing_files", run.MissingFiles, "kept", run.KeptBlobs, "kept_bytes", run.KeptBytes)
	return nil
}

// blobGCPeriodic is the periodic job that inserts collect_blobs every interval.
func blobGCPeriodic(interval time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return BlobGCArgs{}, nil }, nil)
}
