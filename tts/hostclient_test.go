package tts

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeHost is a Go model host for protocol tests: it records what it was sent and
// answers from its fields.
type fakeHost struct {
	lastSynth  atomic.Pointer[Request]
	healthHits atomic.Int64
	loadingFor int64 // answer /health with 503 this many times first
}

func (f *fakeHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(code ErrorCode, msg string) {
		writeJSON(StatusOf(code), WireError{Error: WireErrorBody{Code: code, Message: msg, Traceback: "Traceback (most recent call last): ..."}})
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == PathHealth:
		if f.healthHits.Add(1) <= f.loadingFor {
			fail(CodeUnavailable, "loading model")
			return
		}
		writeJSON(200, HealthResponse{Protocol: ProtocolVersion, HostInfo: HostInfo{
			Model: "IndexTTS-2", Version: "fake-1", ResidentBytes: 4 << 30, Concurrency: 1, SampleRate: 22050,
		}, Counters: map[string]int64{"requests": 1}})
	case r.Method == http.MethodPost && r.URL.Path == PathPrepare:
		var req PrepareRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(CodeInvalidInput, err.Error())
			return
		}
		writeJSON(200, PrepareResult{CachePath: filepath.Join(req.CacheDir, req.ReferenceSHA256+".pt"), Computed: true})
	case r.Method == http.MethodPost && r.URL.Path == PathSynthesize:
		var req Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(CodeInvalidInput, err.Error())
			return
		}
		f.lastSynth.Store(&req)
		switch req.Text {
		case "oom":
			fail(CodeOutOfMemory, "CUDA out of memory. Tried to allocate 2.00 GiB")
		case "crash":
			// Hijack and drop the connection: the host died mid-request.
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
		case "hang":
			<-r.Context().Done()
		default:
			writeJSON(200, Result{ModelVersion: "fake-1", SampleRate: 22050, AudioSeconds: 1.5, Tokens: 75,
				Stages: map[string]float64{"gpt": 0.4}, PeakAllocatedBytes: 102 << 20, PeakReservedBytes: 128 << 20})
		}
	case r.Method == http.MethodPost && r.URL.Path == PathReleaseCache:
		writeJSON(200, ReleaseCacheResult{ReservedBefore: 8 << 30, ReservedAfter: 5 << 30})
	default:
		http.NotFound(w, r)
	}
}

func startFakeHostUnix(t *testing.T, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "host.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return "unix:" + sock
}

func TestHostClientProtocol(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, transport := range []string{"tcp", "unix"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			fh := &fakeHost{}
			var addr string
			if transport == "unix" {
				addr = startFakeHostUnix(t, fh)
			} else {
				srv := httptest.NewServer(fh)
				t.Cleanup(srv.Close)
				addr = srv.URL
			}
			c, err := NewHostClient(HostClientConfig{Address: addr})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			require.Equal(t, "indextts", c.Name())

			info, err := c.Info(ctx)
			require.NoError(t, err)
			require.Equal(t, "IndexTTS-2", info.Model)
			require.Equal(t, 1, info.Concurrency)
			require.Equal(t, int64(4<<30), info.ResidentBytes)

			prep, err := c.PrepareSpeaker(ctx, PrepareRequest{ReferenceAudioPath: "/ref.wav", ReferenceSHA256: "abc", CacheDir: "/cache"})
			require.NoError(t, err)
			require.Equal(t, "/cache/abc.pt", prep.CachePath)
			require.True(t, prep.Computed)

			res, err := c.Synthesize(ctx, Request{
				Text: "Hello.", OutputPath: "/out/1.wav",
				Speaker: Speaker{ReferenceAudioPath: "/ref.wav", ConditioningPath: prep.CachePath},
				Emotion: Emotion{Mode: EmotionVector, Vector: [8]float64{1, 1}},
			})
			require.NoError(t, err)
			require.Equal(t, "indextts", res.Engine)
			require.Equal(t, "/out/1.wav", res.OutputPath)
			require.Equal(t, 75, res.Tokens)
			require.Equal(t, int64(102<<20), res.PeakAllocatedBytes)
			sent := fh.lastSynth.Load()
			require.NotNil(t, sent)
			require.InDelta(t, 0.4, sent.Emotion.Vector[0], 1e-12, "vector scaled to the 0.8 cap before sending")
			require.Equal(t, DefaultMaxMelTokens, sent.MaxMelTokens)
			require.Equal(t, "/ref.wav", sent.Speaker.ReferenceAudioPath)

			_, err = c.Synthesize(ctx, Request{Text: "oom", OutputPath: "/out/2.wav"})
			require.ErrorIs(t, err, ErrOutOfMemory)
			var te *Error
			require.ErrorAs(t, err, &te)
			require.Contains(t, te.Traceback, "Traceback")

			_, err = c.Synthesize(ctx, Request{Text: "crash", OutputPath: "/out/3.wav"})
			require.ErrorIs(t, err, ErrUnavailable)

			_, err = c.Synthesize(ctx, Request{Text: "", OutputPath: "/out/4.wav"})
			require.ErrorIs(t, err, ErrInvalidInput)

			hctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err = c.Synthesize(hctx, Request{Text: "hang", OutputPath: "/out/5.wav"})
			require.ErrorIs(t, err, context.DeadlineExceeded)

			rc, err := c.ReleaseCache(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(5<<30), rc.ReservedAfter)
		})
	}
}

func TestHostClientUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := NewHostClient(HostClientConfig{Address: "unix:" + filepath.Join(t.TempDir(), "nobody.sock")})
	require.NoError(t, err)
	_, err = c.Info(ctx)
	require.ErrorIs(t, err, ErrUnavailable)
	_, err = c.Synthesize(ctx, Request{Text: "Hello.", OutputPath: "/x.wav"})
	require.ErrorIs(t, err, ErrUnavailable)

	// A closed TCP port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	c, err = NewHostClient(HostClientConfig{Address: addr})
	require.NoError(t, err)
	_, err = c.Info(ctx)
	require.ErrorIs(t, err, ErrUnavailable)
}

func TestHostClientWaitHealthy(t *testing.T) {
	t.Parallel()
	fh := &fakeHost{loadingFor: 3}
	addr := startFakeHostUnix(t, fh)
	c, err := NewHostClient(HostClientConfig{Address: addr, Name: "bench"})
	require.NoError(t, err)
	h, err := c.WaitHealthy(context.Background(), time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, "IndexTTS-2", h.Model)
	require.Equal(t, int64(4), fh.healthHits.Load())
	require.Equal(t, "bench", c.Name())
}

func TestNewHostClientAddress(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"unix:/run/h.sock":      "http://model-host",
		"unix:///run/h.sock":    "http://model-host",
		"http://127.0.0.1:7001": "http://127.0.0.1:7001",
		"127.0.0.1:7001":        "http://127.0.0.1:7001",
	} {
		c, err := NewHostClient(HostClientConfig{Address: addr})
		require.NoError(t, err, addr)
		require.Equal(t, want, c.baseURL, addr)
	}
	for _, bad := range []string{"", "unix:", "https://x", "ftp://x"} {
		_, err := NewHostClient(HostClientConfig{Address: bad})
		require.Error(t, err, bad)
	}
}
