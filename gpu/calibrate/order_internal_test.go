package calibrate

import (
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
)

// A step's queue starts with its longest lines, so that the shortest are the last to
// start and the step does not end on one long line running alone.
func TestBatchStepQueuesTheLongestFirst(t *testing.T) {
	mix := []gpu.CalibrationBucket{{Name: "a", Seconds: 2}, {Name: "a", Seconds: 2}, {Name: "b", Seconds: 6}, {Name: "c", Seconds: 30}}
	got := longestFirst(mix, 2)
	require.Len(t, got, 8)
	var secs []float64
	for _, b := range got {
		secs = append(secs, b.Seconds)
	}
	require.Equal(t, []float64{30, 30, 6, 6, 2, 2, 2, 2}, secs)
}
