package peakrss

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVMHWM(t *testing.T) {
	t.Parallel()
	got, err := vmHWM([]byte("Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n"))
	require.NoError(t, err)
	require.Equal(t, int64(2048<<10), got)
	_, err = vmHWM([]byte("Name:\tx\n"))
	require.ErrorIs(t, err, ErrUnsupported)
}

// A 64 MiB buffer touched after a reset shows in the peak.
func TestPeakFollowsWhatWasResident(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	require.NoError(t, Reset())
	before, err := Peak()
	require.NoError(t, err)
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	after, err := Peak()
	require.NoError(t, err)
	require.GreaterOrEqual(t, after-before, int64(60<<20), "the buffer is in the peak")
	runtime.KeepAlive(buf)
}
