package studio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"
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

// HashFile returns the SHA-256 of a file.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// PutBlob moves the (already probed) file at tmpPath into the blob store and records
// it. The move is atomic; storing the same content twice keeps one copy.
func (s *Store) PutBlob(ctx context.Context, bs BlobStore, tmpPath string, meta Blob) (*Blob, error) {
	sum, err := HashFile(tmpPath)
	if err != nil {
		return nil, fmt.Errorf("error hashing upload: %w", err)
	}
	dst, _ := bs.Path(sum)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(dst); os.IsNotExist(err) {
		if err := os.Rename(tmpPath, dst); err != nil {
			return nil, fmt.Errorf("error storing blob: %w", err)
		}
	} else {
		os.Remove(tmpPath)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return nil, err
	}
	meta.SHA256, meta.SizeBytes = sum, fi.Size()
	err = s.db.WithContext(ctx).Exec(`INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING`,
		meta.SHA256, meta.SizeBytes, meta.Format, meta.DurationMs, meta.SampleRate, meta.Channels).Error
	if err != nil {
		return nil, fmt.Errorf("error recording blob: %w", err)
	}
	return &meta, nil
}

// Blob returns a stored blob's metadata.
func (s *Store) Blob(ctx context.Context, sum string) (*Blob, error) {
	var b Blob
	err := s.db.WithContext(ctx).Where("sha256 = ?", sum).First(&b).Error
	return &b, notFound(err, "blob")
}
