package gpu

// ring is a fixed-capacity buffer that keeps the newest values.
type ring[T any] struct {
	buf  []T
	next int
	full bool
}

func newRing[T any](capacity int) *ring[T] {
	return &ring[T]{buf: make([]T, max(capacity, 1))}
}

func (r *ring[T]) push(v T) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

func (r *ring[T]) len() int {
	if r.full {
		return len(r.buf)
	}
	return r.next
}

// items returns the values oldest first, in a new slice.
func (r *ring[T]) items() []T {
	out := make([]T, 0, r.len())
	if r.full {
		out = append(out, r.buf[r.next:]...)
	}
	return append(out, r.buf[:r.next]...)
}

// last returns the newest value.
func (r *ring[T]) last() (T, bool) {
	var zero T
	if r.len() == 0 {
		return zero, false
	}
	return r.buf[(r.next-1+len(r.buf))%len(r.buf)], true
}

// reset empties the ring.
func (r *ring[T]) reset() {
	r.next, r.full = 0, false
}
