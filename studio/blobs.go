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
	if _, err := os.Stat(dst); err == nil {
		os.Remove(tmpPath)
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
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
