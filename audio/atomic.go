package audio

import (
	"bufio"
	"io"
	"os"
	"path/filepath"

	"dubstudio/internal/perm"
)

// writeFileAtomic writes path through a temporary file in its directory: write fills
// it, it is synced and renamed over path only when everything succeeded, and removed
// otherwise. Errors from a full disk unwrap to ErrNoSpace.
func writeFileAtomic(path string, write func(w io.Writer) error) (err error) {
	f, err := createTemp(path)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := write(bw); err != nil {
		return writeError(path, err, "")
	}
	if err := bw.Flush(); err != nil {
		return writeError(path, err, "")
	}
	return commitTemp(f, path)
}

// WriteBytesAtomic is writeFileAtomic for a file already encoded in memory: one
// write, and no buffer to allocate. Fit writes its takes with it (bench/filecost
// measures what it costs on a file system).
func WriteBytesAtomic(path string, b []byte) error {
	f, err := createTemp(path)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = commitTemp(f, path)
	} else {
		err = writeError(path, err, "")
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
	}
	return err
}

// createTemp creates the temporary file that will become path.
func createTemp(path string) (*os.File, error) {
	if _, err := mediaArg(path); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, writeError(path, err, "")
	}
	return f, nil
}

// commitTemp syncs and closes f, then renames it to path. It does not remove f on
// failure: its caller does.
func commitTemp(f *os.File, path string) error {
	// Sync before rename: otherwise a crash can leave path renamed but empty.
	if err := f.Sync(); err != nil {
		return writeError(path, err, "")
	}
	if err := f.Chmod(perm.File); err != nil {
		return writeError(path, err, "")
	}
	if err := f.Close(); err != nil {
		return writeError(path, err, "")
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return writeError(path, err, "")
	}
	return nil
}
