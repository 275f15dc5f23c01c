package audio

import (
	"io"
	"os"
	"sync"
)

// Fit's large buffers (the take's bytes, its samples, the output's bytes: about a
// megabyte for a few seconds) are recycled: at hundreds of lines a second their
// garbage was a tenth of a worker's CPU time, collecting it.
var (
	bytePool  sync.Pool // *[]byte
	floatPool sync.Pool // *[]float32
)

// pooled returns a slice of n elements from pool, or a new one, and a function that
// gives it back (once its last user is done with it).
func pooled[T any](pool *sync.Pool, n int) ([]T, func()) {
	var s []T
	if p, ok := pool.Get().(*[]T); ok && cap(*p) >= n {
		s = (*p)[:n]
	} else {
		s = make([]T, n)
	}
	return s, func() { pool.Put(&s) }
}

// ReadFilePooled reads the file at path into a buffer from the pool Fit reads and
// encodes takes with, and returns a function that gives it back once its caller no
// longer uses the bytes: the worker reads every engine output once to describe and
// hash it, and a new buffer for each was most of a line's garbage.
func ReadFilePooled(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	b, release := pooled[byte](&bytePool, int(fi.Size()))
	if _, err := io.ReadFull(f, b); err != nil {
		release()
		return nil, nil, err
	}
	return b, release, nil
}
