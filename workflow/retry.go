package workflow

import (
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river/rivertype"
)

// backoff retries failed renders after Base, 2×Base, 4×Base ... up to Max, with up to
// 20% jitter so that lines failed together do not retry in lockstep. River's default
// (attempt⁴ seconds) waits minutes by the fourth attempt, too long for an editor
// watching a line.
type backoff struct {
	Base, Max time.Duration
}

// NextRetry implements river.ClientRetryPolicy.
func (b backoff) NextRetry(job *rivertype.JobRow) time.Time {
	d := b.Base
	for i := 1; i < job.Attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	d += time.Duration(rand.Int64N(int64(d)/5 + 1))
	return time.Now().Add(d)
}
