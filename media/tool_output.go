package media

import "bytes"

// maxToolLine bounds a partial line lineWriter holds: ffmpeg's report lines are far
// shorter, so a longer one is none of them and is dropped.
const maxToolLine = 4 << 10

// lineWriter is a program's output read as it comes: each whole line (without its
// newline) goes to its func, in order; a last line without a newline is not seen.
type lineWriter struct {
	line    func(string)
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			break
		}
		w.partial = append(w.partial, p[:i]...)
		w.line(string(bytes.TrimRight(w.partial, "\r")))
		w.partial, p = w.partial[:0], p[i+1:]
	}
	if len(w.partial)+len(p) > maxToolLine {
		w.partial = w.partial[:0]
		return n, nil
	}
	w.partial = append(w.partial, p...)
	return n, nil
}
