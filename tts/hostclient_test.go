package tts

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// v2Host answers /health and /synthesize as a batching host (protocol 2) would, from
// the JSON documents of PROTOCOL v2; protocol sets what /health reports.
func v2Host(protocol int, batch bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case PathHealth:
			doc := fmt.Sprintf(`{"protocol": %d, "model": "bench", "version": "b1", "resident_bytes": 30000000000,
				"concurrency": 64, "busy": 5, "queued": 2, "reserved_bytes": 31000000000, "sample_rate": 22050`, protocol)
			if batch {
				doc += `, "batch": {"max_sequences": 64, "beams": 3, "decode": "beam_search", "block_tokens": 32, "kv_bytes_per_token": 122880,
					"kv_cache_bytes": 20000000000, "kv_free_bytes": 15000000000, "prefix_tokens": 32,
					"tokens_per_second": 50, "activation_bytes_per_second": 41943040, "decoding": 3, "in_s2mel": 2,
					"waiting": 2, "decode_tokens_per_second": 2950.5, "batch_rows_max": 192, "steps": 1234,
					"decode_graphs": 209, "graph_steps": 1200, "graph_pool_bytes": 3400000000,
					"paged_attention": false, "paged_attention_off": "Triton is not installed",
					"vocoder_kernel": "torch", "vocoder_kernel_off": "BigVGAN's CUDA kernel did not build"}`
			}
			_, _ = io.WriteString(w, doc+"}")
		case PathSynthesize:
			_, _ = io.WriteString(w, `{"engine": "bench", "model_version": "b1", "output_path": "/out/1.wav",
				"sample_rate": 22050, "audio_seconds": 4.2, "tokens": 210,
				"peak_allocated_bytes": 300000000, "peak_reserved_bytes": 32000000000,
				"sequence": {"kv_bytes": 120000000, "activation_bytes": 180000000, "queue_seconds": 0.25,
					"gpt_seconds": 1.5, "s2mel_wait_seconds": 0.2, "s2mel_seconds": 0.4, "vocoder_seconds": 0.1,
					"batch_rows_mean": 96.5, "s2mel_group": 7},
				"stages": {"queue": 0.25, "conditioning": 0.01, "gpt": 1.5, "s2mel_wait": 0.2, "s2mel": 0.4, "vocoder": 0.1,
					"total": 2.5}}`)
		default:
			http.NotFound(w, r)
		}
	})
}

func TestHostClientProtocol2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := httptest.NewServer(v2Host(2, true))
	t.Cleanup(srv.Close)
	c, err := NewHostClient(HostClientConfig{Address: srv.URL, Name: "bench"})
	require.NoError(t, err)
	h, err := c.Health(ctx)
	require.NoError(t, err)
	require.True(t, h.IsBatching())
	require.Equal(t, 64, h.Concurrency)
	require.Equal(t, 2, h.Queued)
	b := h.Batch
	require.Equal(t, 64, b.MaxSequences)
	require.Equal(t, 3, b.Beams)
	require.Equal(t, DecodeBeamSearch, b.Decode)
	require.Equal(t, int64(122880), b.KVBytesPerToken)
	require.Equal(t, int64(20000000000), b.KVCacheBytes)
	require.Equal(t, int64(15000000000), b.KVFreeBytes)
	require.Equal(t, 32, b.PrefixTokens)
	require.InDelta(t, 41943040, b.ActivationBytesPerSecond, 0)
	require.Equal(t, [3]int{3, 2, 2}, [3]int{b.Decoding, b.InS2Mel, b.Waiting})
	require.Equal(t, 192, b.BatchRowsMax)
	require.Equal(t, int64(1234), b.Steps)
	require.Equal(t, [3]int64{209, 1200, 3400000000}, [3]int64{int64(b.DecodeGraphs), b.GraphSteps, b.GraphPoolBytes})
	require.False(t, b.PagedAttention)
	require.Equal(t, "Triton is not installed", b.PagedAttentionOff)
	require.Equal(t, [2]string{"torch", "BigVGAN's CUDA kernel did not build"}, [2]string{b.VocoderKernel, b.VocoderKernelOff})

	res, err := c.Synthesize(ctx, Request{Text: "Hello.", OutputPath: "/out/1.wav"})
	require.NoError(t, err)
	require.NotNil(t, res.Sequence)
	require.Equal(t, int64(120000000), res.Sequence.KVBytes)
	require.Equal(t, int64(180000000), res.Sequence.ActivationBytes)
	require.InDelta(t, 96.5, res.Sequence.BatchRowsMean, 0)
	require.Equal(t, 7, res.Sequence.S2MelGroup)
	require.InDelta(t, 0.25, res.Stages["queue"], 0)
	require.InDelta(t, 0.01, res.Stages["conditioning"], 0)
	require.InDelta(t, 0.4, res.Sequence.S2MelSeconds, 0)
	require.InDelta(t, 0.2, res.Sequence.S2MelWaitSeconds, 0)

	// A version-1 document (no batch) is still accepted; protocols outside 1..2, and
	// a batch claimed under protocol 1, are refused.
	for _, tc := range []struct {
		protocol int
		batch    bool
		ok       bool
	}{{1, false, true}, {2, false, true}, {1, true, false}, {0, false, false}, {3, true, false}} {
		srv := httptest.NewServer(v2Host(tc.protocol, tc.batch))
		c, err := NewHostClient(HostClientConfig{Address: srv.URL})
		require.NoError(t, err)
		h, err := c.Health(ctx)
		if tc.ok {
			require.NoError(t, err, "protocol %d", tc.protocol)
			require.Equal(t, tc.batch, h.IsBatching())
		} else {
			require.ErrorIs(t, err, ErrInternal, "protocol %d batch %v", tc.protocol, tc.batch)
		}
		srv.Close()
	}
}
