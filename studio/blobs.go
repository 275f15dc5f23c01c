package studio

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gorm.io/gorm"

	"dubstudio/blobhash"
	"dubstudio/internal/perm"
)

// Blob is a stored audio file, addressed by the SHA-256 of its bytes.
type Blob struct {
	SHA256     string `gorm:"column:sha256;primaryKey"`
	SizeBytes  int64
	Format     string
	DurationMs int
	SampleRate int
	Channels   int
	CreatedAt  time.Time
}

var shaRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

// BlobStore keeps audio files content-addressed under a directory:
// DIR/ab/abcdef... . Names come only from hashes, never from users.
type BlobStore struct {
	Dir string
}

// Path returns where the blob with sum lives. It refuses anything but a hex SHA-256.
func (b BlobStore) Path(sum string) (string, error) {
	if !shaRe.MatchString(sum) {
		return "", fmt.Errorf("blob name %q: %w", sum, ErrInvalid)
	}
	return filepath.Join(b.Dir, sum[:2], sum), nil
}

// PutBlob moves the (already probed) file at tmpPath into the blob store and records
// it. The move is atomic; storing the same content twice keeps one copy.
func (s *Store) PutBlob(ctx context.Context, bs BlobStore, tmpPath string, meta Blob) (*Blob, error) {
	var err error
	meta.SHA256, meta.SizeBytes, err = blobhash.FileSize(tmpPath)
	if err != nil {
		return nil, fmt.Errorf("error hashing upload: %w", err)
	}
	if err := bs.Put(tmpPath, meta.SHA256); err != nil {
		return nil, err
	}
	q, args := insertBlobs([]Blob{meta})
	if err := s.db.WithContext(ctx).Exec(q, args...).Error; err != nil {
		return nil, fmt.Errorf("error recording blob: %w", err)
	}
	return &meta, nil
}

// Dest returns where the blob with sum lives, like Path, and makes sure that its
// directory exists, for a writer that writes the blob straight into its place
// (through a temporary file in that directory and a rename, as audio.Fit does).
// Writing a blob that is already there replaces it with the same bytes.
func (b BlobStore) Dest(sum string) (string, error) {
	dst, err := b.Path(sum)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dst), perm.Dir); err != nil {
		return "", err
	}
	return dst, nil
}

// Put moves the file at tmpPath, whose SHA-256 its caller computed as sum (while
// writing or reading it), into the store. The move is atomic; storing the same
// content twice keeps one copy. It records nothing: the blob's row goes into the
// statement that uses it (StartFit, FinishRender), or PutBlob writes it.
func (b BlobStore) Put(tmpPath, sum string) error {
	dst, err := b.Dest(sum)
	if err != nil {
		return err
	}
	// The file there already is touched, not replaced: the blob collector keeps a
	// file modified within its grace (CollectBlobs). A file it has just moved aside
	// is not there to touch, and this copy takes its place.
	now := time.Now()
	// A file that cannot be touched (another user's, on a shared volume) is replaced
	// by this fresh copy of the same bytes, as a missing one is.
	if err := os.Chtimes(dst, now, now); err == nil {
		os.Remove(tmpPath)
		return nil
	}
	// The writer may be ffmpeg, which creates its output world-readable.
	if err := os.Chmod(tmpPath, perm.File); err != nil {
		return fmt.Errorf("error storing blob: %w", err)
	}
	if err := os.Rename(tmpPath, dst); err != nil {
		return fmt.Errorf("error storing blob: %w", err)
	}
	return nil
}

// insertBlobs returns the statement that records blobs (none already recorded
// changes), and its arguments.
func insertBlobs(blobs []Blob) (string, []any) {
	var b strings.Builder
	b.WriteString("INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels) VALUES ")
	args := make([]any, 0, 6*len(blobs))
	for i, m := range blobs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for j := range 6 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("?")
		}
		b.WriteString(")")
		args = append(args, m.SHA256, m.SizeBytes, m.Format, m.DurationMs, m.SampleRate, m.Channels)
	}
	b.WriteString(" ON CONFLICT (sha256) DO NOTHING")
	return b.String(), args
}

// Blob returns a stored blob's metadata.
func (s *Store) Blob(ctx context.Context, sum string) (*Blob, error) {
	var b Blob
	err := s.db.WithContext(ctx).Where("sha256 = ?", sum).First(&b).Error
	return &b, notFound(err, "blob")
}

// BlobRef is a column of a table with a foreign key to blobs, and what the blob
// garbage collector makes of it.
type BlobRef struct {
	Table, Column string
	// Cache says that the row is only a cache of the blob (derived audio, a speaker's
	// conditioning, the project_blobs access index): it does not keep the blob, and
	// the collector deletes it with the blob. Any other column keeps the blob.
	Cache bool
}

// BlobForeignKeys are all the foreign keys to blobs the schema has. The collector
// keeps every blob a column that is not a cache names; a test compares this list
// with the catalog (pg_constraint), so a new one cannot be missed.
var BlobForeignKeys = []BlobRef{
	{Table: "characters", Column: "ref_audio_sha256"},
	{Table: "takes", Column: "audio_sha256"},
	{Table: "takes", Column: "raw_sha256"},
	{Table: "project_sources", Column: "audio_sha256"},
	{Table: "project_videos", Column: "video_sha256"},
	{Table: "project_videos", Column: "proxy_sha256"},
	{Table: "project_beds", Column: "audio_sha256"},
	{Table: "derived_audio", Column: "sha256", Cache: true},
	{Table: "speaker_conditioning", Column: "ref_sha256", Cache: true},
	{Table: "project_blobs", Column: "sha256", Cache: true},
}

// blobJSONRefs are the references to blobs that no foreign key can check, each a
// condition on $BLOB (the blob's hash): emotion audio in characters and lines, the
// line history that a restore brings back, and jobs that have not finished (a fit
// job reads its raw take by hash before any take names it; a proxy job its video).
var blobJSONRefs = []string{
	`EXISTS (SELECT 1 FROM characters c WHERE c.emotion ->> 'audio_sha256' = $BLOB)`,
	`EXISTS (SELECT 1 FROM lines l WHERE l.emotion ->> 'audio_sha256' = $BLOB)`,
	`EXISTS (SELECT 1 FROM line_history h,
		jsonb_path_query(jsonb_build_array(h.before, h.after), 'lax $.**.audio_sha256') v WHERE v #>> '{}' = $BLOB)`,
	`EXISTS (SELECT 1 FROM river_job j WHERE j.state NOT IN ('completed', 'cancelled', 'discarded')
		AND $BLOB IN (j.args ->> 'raw_sha256', j.args ->> 'ref_sha256', j.args ->> 'video_sha256'))`,
}

// blobReferenced returns the condition that the blob named by expr (a column or a
// placeholder-free expression) is referenced by anything that keeps blobs.
func blobReferenced(expr string) string {
	var b strings.Builder
	b.WriteString("(")
	n := 0
	for _, r := range BlobForeignKeys {
		if r.Cache {
			continue
		}
		if n > 0 {
			b.WriteString(" OR ")
		}
		n++
		fmt.Fprintf(&b, "EXISTS (SELECT 1 FROM %s r WHERE r.%s = %s)", r.Table, r.Column, expr)
	}
	for _, j := range blobJSONRefs {
		b.WriteString(" OR ")
		b.WriteString(strings.ReplaceAll(j, "$BLOB", expr))
	}
	b.WriteString(")")
	return b.String()
}

// BlobGCOpts tunes one run of the blob garbage collector.
type BlobGCOpts struct {
	// Grace is how old a blob's row and file must both be before it may go
	// (BLOB_GC_GRACE): longer than any upload or render takes from storing a blob to
	// the row that names it.
	Grace time.Duration
	// Interval is BLOB_GC_INTERVAL, recorded with the run for the admin page's next run.
	Interval time.Duration
	// Batch is how many blobs one transaction locks and removes (default 100).
	Batch int
}

// BlobGCRun is what one run of the collector did, and what was left.
type BlobGCRun struct {
	ID                    int64
	StartedAt, FinishedAt time.Time
	IntervalMs, GraceMs   int64
	RemovedBlobs          int
	RemovedBytes          int64
	MissingFiles          int
	KeptBlobs             int
	KeptBytes             int64
	Error                 string
}

// NextAt is when the next run is due: an interval after this one started.
func (r *BlobGCRun) NextAt() time.Time {
	return r.StartedAt.Add(time.Duration(r.IntervalMs) * time.Millisecond)
}

// tombstone is where the collector moves a blob's file while it decides: in the
// blob's own directory, so that the rename is atomic, under a name no hash has.
func (b BlobStore) tombstone(sum string) string {
	return filepath.Join(b.Dir, sum[:2], ".gc-"+sum)
}

// CollectBlobs removes the blobs nothing refers to (row and file) and records the
// run (LastBlobGCRun). A blob goes only when, all in one transaction:
//
//   - its row is older than the grace and was locked (FOR UPDATE SKIP LOCKED) by a
//     statement that found no reference to it;
//   - a second statement, whose snapshot is taken after the lock, finds no
//     reference either (a reference committed between the first statement's
//     snapshot and the lock is seen here; a writer that inserts a foreign key to it
//     from now on waits for the lock, then fails on the deleted row);
//   - its file, moved aside to a tombstone by an atomic rename, has not been
//     modified within the grace. Every writer of a blob's file either renames a new
//     file into place or, when the file is there already, touches it (BlobStore.Put,
//     DerivedAudio's cache hit): a writer before the move leaves a fresh file, which
//     goes back; a writer after it finds no file and writes its own.
//
// The rows (and the cache rows of BlobForeignKeys) are deleted, the transaction
// commits, and only then are the tombstones removed; if it fails, they go back.
func (s *Store) CollectBlobs(ctx context.Context, bs BlobStore, opts BlobGCOpts) (*BlobGCRun, error) {
	if opts.Batch <= 0 {
		opts.Batch = 100
	}
	run := &BlobGCRun{StartedAt: time.Now(), IntervalMs: opts.Interval.Milliseconds(), GraceMs: opts.Grace.Milliseconds()}
	after := ""
	var runErr error
	for {
		n, last, err := s.collectBatch(ctx, bs, opts, after, run)
		if err != nil {
			runErr = err
			break
		}
		if n < opts.Batch {
			break
		}
		after = last
	}
	if err := queryRow(s.db.WithContext(ctx), `SELECT count(*), coalesce(sum(size_bytes), 0) FROM blobs`, nil,
		&run.KeptBlobs, &run.KeptBytes); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		run.Error = runErr.Error()
	}
	ctx = context.WithoutCancel(ctx)
	err := queryRow(s.db.WithContext(ctx), `INSERT INTO blob_gc_runs (started_at, interval_ms, grace_ms, removed_blobs,
		removed_bytes, missing_files, kept_blobs, kept_bytes, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		RETURNING id, finished_at`, []any{run.StartedAt, run.IntervalMs, run.GraceMs, run.RemovedBlobs, run.RemovedBytes,
		run.MissingFiles, run.KeptBlobs, run.KeptBytes, run.Error}, &run.ID, &run.FinishedAt)
	if err != nil {
		return run, errors.Join(runErr, fmt.Errorf("error recording the blob collector's run: %w", err))
	}
	return run, runErr
}

// collectBatch removes up to opts.Batch unreferenced blobs whose hash sorts after
// after, in one transaction, adding to run. It returns how many candidates it
// looked at and the last one's hash.
func (s *Store) collectBatch(ctx context.Context, bs BlobStore, opts BlobGCOpts, after string, run *BlobGCRun) (int, string, error) {
	cutoff := time.Now().Add(-opts.Grace)
	type candidate struct {
		SHA256    string
		SizeBytes int64
	}
	var cands []candidate
	var moved []string // tombstones to remove once committed, or to put back
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		err := tx.Raw(`SELECT b.sha256, b.size_bytes FROM blobs b WHERE b.sha256 > ? AND b.created_at < ? AND NOT `+
			blobReferenced("b.sha256")+` ORDER BY b.sha256 LIMIT ? FOR UPDATE OF b SKIP LOCKED`,
			after, cutoff, opts.Batch).Scan(&cands).Error
		if err != nil || len(cands) == 0 {
			return err
		}
		sums := make([]string, len(cands))
		for i, c := range cands {
			sums[i] = c.SHA256
		}
		if s.blobGCLocked != nil {
			s.blobGCLocked(sums)
		}
		var referenced []string
		if err := tx.Raw(`SELECT s FROM unnest(?::text[]) AS u(s) WHERE `+blobReferenced("u.s"), pqArray(sums)).
			Scan(&referenced).Error; err != nil {
			return err
		}
		keep := map[string]bool{}
		for _, r := range referenced {
			keep[r] = true
		}
		var gone []string
		var bytes int64
		missing := 0
		for _, c := range cands {
			if keep[c.SHA256] {
				continue
			}
			p, err := bs.Path(c.SHA256)
			if err != nil {
				return err
			}
			ts := bs.tombstone(c.SHA256)
			if err := os.Rename(p, ts); errors.Is(err, fs.ErrNotExist) {
				missing++
			} else if err != nil {
				return fmt.Errorf("error moving blob %s aside: %w", c.SHA256, err)
			} else {
				fi, err := os.Stat(ts)
				if err != nil {
					return err
				}
				if fi.ModTime().After(cutoff) {
					// Written or touched by an upload or render just now: it stays.
					if err := os.Rename(ts, p); err != nil {
						return fmt.Errorf("error putting blob %s back: %w", c.SHA256, err)
					}
					continue
				}
				moved = append(moved, c.SHA256)
			}
			gone = append(gone, c.SHA256)
			bytes += c.SizeBytes
		}
		if len(gone) == 0 {
			return nil
		}
		for _, r := range BlobForeignKeys {
			if !r.Cache {
				continue
			}
			if err := tx.Exec(fmt.Sprintf(`DELETE FROM %s WHERE %s = ANY (?::text[])`, r.Table, r.Column), pqArray(gone)).Error; err != nil {
				return err
			}
		}
		if err := tx.Exec(`DELETE FROM blobs WHERE sha256 = ANY (?::text[])`, pqArray(gone)).Error; err != nil {
			return err
		}
		run.RemovedBlobs += len(gone) - missing
		run.RemovedBytes += bytes
		run.MissingFiles += missing
		return nil
	})
	if err != nil {
		for _, sum := range moved {
			if p, perr := bs.Path(sum); perr == nil {
				_ = os.Rename(bs.tombstone(sum), p) // the row stays: so does its file
			}
		}
		return 0, "", fmt.Errorf("error collecting blobs: %w", err)
	}
	for _, sum := range moved {
		if err := os.Remove(bs.tombstone(sum)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, "", fmt.Errorf("error removing blob %s: %w", sum, err)
		}
	}
	if len(cands) == 0 {
		return 0, "", nil
	}
	return len(cands), cands[len(cands)-1].SHA256, nil
}

// pqArray renders sums as a PostgreSQL text array literal (hashes only: hex digits).
func pqArray(sums []string) string {
	return "{" + strings.Join(sums, ",") + "}"
}

// LastBlobGCRun returns the collector's latest run, or nil before the first.
func (s *Store) LastBlobGCRun(ctx context.Context) (*BlobGCRun, error) {
	var runs []BlobGCRun
	if err := s.db.WithContext(ctx).Raw(`SELECT * FROM blob_gc_runs ORDER BY finished_at DESC, id DESC LIMIT 1`).
		Scan(&runs).Error; err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, nil
	}
	return &runs[0], nil
}
