package simdev

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const mb = int64(1) << 20

func TestCachingAllocatorRatchets(t *testing.T) {
	t.Parallel()
	d := New(10_000 * mb)
	p, err := d.Spawn(5_000 * mb)
	require.NoError(t, err)
	require.Equal(t, 5_000*mb, d.Used())

	require.NoError(t, p.Infer(1_160*mb, nil)) // a 30 s line
	s := p.Stats()
	require.Zero(t, s.Allocated)
	require.Equal(t, 1_160*mb, s.Reserved, "reserve keeps the peak")
	require.Equal(t, 6_160*mb, s.Used)
	require.Equal(t, 1_160*mb, s.PeakAllocated)

	// A smaller request reuses the pool: no growth, reserve unchanged.
	require.NoError(t, p.Infer(121*mb, nil))
	require.Equal(t, 1_160*mb, p.Stats().Reserved)

	p.EmptyCache()
	require.Zero(t, p.Stats().Reserved)
	require.Equal(t, 5_000*mb, d.Used())
	require.Equal(t, 6_160*mb, d.PeakUsed())
}

func TestEmptyCacheKeepsLiveAllocations(t *testing.T) {
	t.Parallel()
	d := New(10_000 * mb)
	p, err := d.Spawn(1_000 * mb)
	require.NoError(t, err)
	require.NoError(t, p.Alloc(500*mb))
	require.NoError(t, p.Alloc(300*mb))
	p.Release(300 * mb)
	p.EmptyCache()
	s := p.Stats()
	require.Equal(t, 500*mb, s.Allocated)
	require.Equal(t, 500*mb, s.Reserved)
	require.Equal(t, 800*mb, s.PeakAllocated)
	p.ResetPeak()
	require.Equal(t, 500*mb, p.Stats().PeakAllocated)
}

func TestOutOfMemoryCountsOtherProcessesCachesAndForeign(t *testing.T) {
	t.Parallel()
	d := New(12_000 * mb)
	a, err := d.Spawn(5_000 * mb)
	require.NoError(t, err)
	b, err := d.Spawn(5_000 * mb)
	require.NoError(t, err)

	require.NoError(t, a.Infer(1_500*mb, nil)) // a keeps 1.5 GB cached
	err = b.Alloc(600 * mb)                    // 5000+1500+5000+600 > 12000
	require.ErrorIs(t, err, ErrOutOfMemory)
	require.Zero(t, b.Stats().Allocated, "a failed allocation changes nothing")
	require.EqualValues(t, 1, d.OOMs())

	a.EmptyCache()
	require.NoError(t, b.Alloc(600*mb))
	b.Release(600 * mb)

	d.SetForeign(1_500 * mb)
	require.Equal(t, 12_100*mb, d.Used())
	require.Zero(t, d.Free())
	require.ErrorIs(t, a.Alloc(1), ErrOutOfMemory)
	// Reusing the own cache pool needs no free memory.
	require.NoError(t, b.Alloc(600*mb))

	_, err = d.Spawn(1)
	require.ErrorIs(t, err, ErrOutOfMemory)
}

func TestExitFreesEverything(t *testing.T) {
	t.Parallel()
	d := New(10_000 * mb)
	p, err := d.Spawn(5_000 * mb)
	require.NoError(t, err)
	require.NoError(t, p.Alloc(100*mb))
	require.Len(t, d.Processes(), 1)
	require.Equal(t, ProcessInfo{PID: p.PID(), UsedBytes: 5_100 * mb}, d.Processes()[0])
	r := d.Read()
	require.Equal(t, Reading{Total: 10_000 * mb, Used: 5_100 * mb, Free: 4_900 * mb,
		Processes: []ProcessInfo{{PID: p.PID(), UsedBytes: 5_100 * mb}}}, r)
	p.Exit()
	p.Exit()
	require.Zero(t, d.Used())
	require.Empty(t, d.Processes())
	require.True(t, p.Stats().Exited)
	require.ErrorIs(t, p.Alloc(1), ErrExited)
}

func TestConcurrentUseNeverExceedsTotal(t *testing.T) {
	t.Parallel()
	d := New(8_000 * mb)
	var procs []*Process
	for range 4 {
		p, err := d.Spawn(1_000 * mb)
		require.NoError(t, err)
		procs = append(procs, p)
	}
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() {
			for j := range 200 {
				_ = p.Infer(int64((i*7+j*13)%1_500)*mb, nil)
				if j%17 == 0 {
					p.EmptyCache()
				}
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, d.PeakUsed(), d.Total())
	require.LessOrEqual(t, d.Used(), d.Total())
}
