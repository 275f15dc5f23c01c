package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// This file runs the real Python model host (tts/hosts/indextts_host.py with the
// stand-in model of tts/hosts/testdata/standin: no torch, no GPU) under gpu.Pool, the
// production supervisor that restarts a host that dies or stops answering, with a
// small Permits over the pool's hosts in place of the GPU executor.

// standinVersion is the model version the stand-in hosts report.
const standinVersion = "fault-test-v1"

// standinHost adapts a tts.HostProcess to gpu.Host.
type standinHost struct {
	p *tts.HostProcess
}

var _ gpu.Host = (*standinHost)(nil)

func (h *standinHost) PID() int                       { return h.p.PID() }
func (h *standinHost) Concurrency() int               { return 1 }
func (h *standinHost) Exited() <-chan struct{}        { return h.p.Done() }
func (h *standinHost) ExitErr() error                 { return h.p.Err() }
func (h *standinHost) Stop(ctx context.Context) error { return h.p.Stop(ctx) }
func (h *standinHost) Health(ctx context.Context) error {
	_, err := h.p.Client().Health(ctx)
	return err
}

// Kill ends the host's process group (StartHost puts it in its own).
func (h *standinHost) Kill() error { return syscall.Kill(-h.p.PID(), syscall.SIGKILL) }

func (h *standinHost) ReleaseCache(ctx context.Context) (int64, error) {
	r, err := h.p.Client().ReleaseCache(ctx)
	return r.ReservedAfter, err
}

// standinLauncher starts stand-in hosts with tts.StartHost.
type standinLauncher struct {
	python, script, standin, modelDir, sockDir string
	n                                          atomic.Int64
}

func (l *standinLauncher) Launch(ctx context.Context, _ gpu.LaunchOpts) (gpu.Host, error) {
	sock := filepath.Join(l.sockDir, fmt.Sprintf("h%d.sock", l.n.Add(1)))
	p, err := tts.StartHost(ctx, tts.HostProcessConfig{
		Name:    "indextts",
		Command: []string{l.python, l.script, "--model-dir", l.modelDir, "--model-version", standinVersion},
		Env:     []string{"PYTHONPATH=" + l.standin, "PYTHONDONTWRITEBYTECODE=1"},
		Socket:  sock,
	})
	if err != nil {
		return nil, err
	}
	if _, err := p.Client().WaitHealthy(ctx, 20*time.Millisecond); err != nil {
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		return nil, err
	}
	return &standinHost{p: p}, nil
}

// hostPermits is a gpu.HostRegistry and a workflow.Permits: the pool tells it which hosts
// serve, and each serving host is one permit. A permit given back as hung gets its host
// killed, and the pool starts another.
type hostPermits struct {
	capacity int

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a host comes, goes or frees up
	hosts   map[string]*servingHost

	hungKills atomic.Int64
}

type servingHost struct {
	id   string
	host *standinHost
	busy bool
}

func newHostPermits(capacity int) *hostPermits {
	return &hostPermits{capacity: capacity, changed: make(chan struct{}), hosts: map[string]*servingHost{}}
}

func (s *hostPermits) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// AddHost implements gpu.HostRegistry.
func (s *hostPermits) AddHost(context.Context, string, gpu.HostSpec) error { return nil }

// HostReady implements gpu.HostRegistry.
func (s *hostPermits) HostReady(_, id string, r gpu.ReadyHost) error {
	h, ok := r.Handle.(*standinHost)
	if !ok {
		return errors.New("not a stand-in host")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts[id] = &servingHost{id: id, host: h}
	s.notifyLocked()
	return nil
}

// DrainHost implements gpu.HostRegistry: the host takes no more work at once.
func (s *hostPermits) DrainHost(_, id string) (<-chan struct{}, error) {
	s.RemoveHost("", id, nil)
	done := make(chan struct{})
	close(done)
	return done, nil
}

// RemoveHost implements gpu.HostRegistry.
func (s *hostPermits) RemoveHost(_, id string, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hosts, id)
	s.notifyLocked()
}

// Acquire implements workflow.Permits: it waits for a serving host with nothing to do.
func (s *hostPermits) Acquire(ctx context.Context, _ workflow.PermitRequest) (workflow.Permit, error) {
	for {
		s.mu.Lock()
		for _, h := range s.hosts {
			if !h.busy {
				h.busy = true
				s.mu.Unlock()
				return &hostPermit{s: s, h: h}, nil
			}
		}
		wait := s.changed
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *hostPermits) Capacity() int     { return s.capacity }
func (s *hostPermits) Engines() []string { return []string{"indextts"} }

// Model implements workflow.Permits; every stand-in host runs the same version.
func (s *hostPermits) Model(context.Context) (tts.HostInfo, error) {
	return tts.HostInfo{Model: "IndexTTS-2", Version: standinVersion, Concurrency: 1}, nil
}

// busyPIDs lists the processes of hosts serving a request now.
func (s *hostPermits) busyPIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []int
	for _, h := range s.hosts {
		if h.busy {
			pids = append(pids, h.host.PID())
		}
	}
	return pids
}

type hostPermit struct {
	s    *hostPermits
	h    *servingHost
	once sync.Once
}

func (l *hostPermit) Engine() tts.Engine { return l.h.host.p.Client() }
func (l *hostPermit) Device() string     { return "" }

func (l *hostPermit) Done(o workflow.Outcome) {
	l.once.Do(func() {
		if o.Hung {
			// The request may still run there: the host is of no further use.
			l.s.hungKills.Add(1)
			_ = l.h.host.Kill()
		}
		l.s.mu.Lock()
		defer l.s.mu.Unlock()
		l.h.busy = false
		l.s.notifyLocked()
	})
}

// hostBundle is a render against stand-in model hosts kept running by a gpu.Pool.
type hostBundle struct {
	*testBundle
	permits *hostPermits
	pool    *gpu.Pool
	events  *eventLog
}

// eventLog keeps the pool's host events.
type eventLog struct {
	mu     sync.Mutex
	events []gpu.HostEvent
}

func (e *eventLog) add(ev gpu.HostEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
}

func (e *eventLog) count(kind gpu.HostEventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// setupHosts makes a project of n lines whose characters have reference voices, and a
// pool of hosts stand-in model hosts; cfg adjusts the pool (health checks).
func setupHosts(t *testing.T, b *testBundle, hosts int, cfg func(*gpu.PoolConfig)) *hostBundle {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python model host cannot run here")
	}
	for _, f := range []string{"../tts/hosts/indextts_host.py", "../tts/hosts/testdata/standin/indextts/_standin.py"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("the model host or its stand-in model is missing: %v", err)
		}
	}
	standin, err := filepath.Abs("../tts/hosts/testdata/standin")
	require.NoError(t, err)
	script, err := filepath.Abs("../tts/hosts/indextts_host.py")
	require.NoError(t, err)
	// Unix socket paths are short: keep them out of the long test directory names.
	sockDir, err := os.MkdirTemp("", "dubhost") //nolint:usetesting // t.TempDir's long path would pass the socket path limit
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	// A stand-in model directory in the real formats: the host checks it before loading.
	modelDir, err := filepath.Abs(filepath.Join("..", "tts", "hosts", "testdata", "standin-model", "2"))
	require.NoError(t, err)

	ctx := context.Background()
	blobs := studio.BlobStore{Dir: filepath.Join(b.DataDir, "blobs")}
	chars, err := b.Store.Characters(ctx, b.Project.ID)
	require.NoError(t, err)
	for i, c := range chars {
		ref := filepath.Join(t.TempDir(), fmt.Sprintf("ref-%d.wav", i))
		samples := make([]int16, 16000)
		for j := range samples {
			samples[j] = int16(4000 * math.Sin(float64(j)/float64(8+i)))
		}
		require.NoError(t, tts.WriteWAV(ref, 16000, samples))
		blob, err := b.Store.PutBlob(ctx, blobs, ref, studio.Blob{Format: "wav", DurationMs: 1000, SampleRate: 16000, Channels: 1})
		require.NoError(t, err)
		require.NoError(t, b.Store.SetCharacterReference(ctx, b.Project.ID, c.ID, blob.SHA256, "ref.wav"))
	}

	hb := &hostBundle{testBundle: b, permits: newHostPermits(hosts), events: &eventLog{}}
	pc := gpu.PoolConfig{
		GPU:      "cpu-standin",
		Launcher: &standinLauncher{python: python, script: script, standin: standin, modelDir: modelDir, sockDir: sockDir},
		Registry: hb.permits, HealthInterval: 200 * time.Millisecond, HealthTimeout: time.Second, HealthFailures: 3,
		RestartBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, StopTimeout: 5 * time.Second,
		OnEvent: hb.events.add,
	}
	if cfg != nil {
		cfg(&pc)
	}
	hb.pool, err = gpu.NewPool(pc)
	require.NoError(t, err)
	poolCtx, cancel := context.WithCancel(context.Background())
	hb.pool.Start(poolCtx, hosts)
	t.Cleanup(func() {
		ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
		defer stop()
		_ = hb.pool.Stop(ctx)
		cancel()
	})
	return hb
}

// waitProgress waits until at least n lines are past synthesis (fitting, done or in
// review) while others still wait for it or are being synthesized, so that a fault
// lands in the middle of the render.
func (b *testBundle) waitProgress(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		counts, err := b.Store.ProjectStateCounts(context.Background(), []int64{b.Project.ID})
		require.NoError(t, err)
		c := counts[b.Project.ID]
		past := c[studio.StateFitting] + c[studio.StateDone] + c[studio.StateNeedsReview]
		before := c[studio.StateQueued] + c[studio.StateWaitingGPU] + c[studio.StateSynthesizing]
		if past >= n && before > 0 {
			return
		}
		require.True(t, time.Now().Before(deadline) && before > 0, "the render never got going, or ended before the fault: %v", c)
		time.Sleep(5 * time.Millisecond)
	}
}

// busyHost waits for a host that is serving a request and returns its process id.
func (hb *hostBundle) busyHost(t *testing.T, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if pids := hb.permits.busyPIDs(); len(pids) > 0 {
			return pids[0]
		}
		require.True(t, time.Now().Before(deadline), "no host ever served a request")
		time.Sleep(time.Millisecond)
	}
}
