package tts

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeVLLM mimics index-tts-vllm's api_server_v2: POST /tts_url answers audio/wav, or
// 500 with {"status": "error", "error": traceback}.
type fakeVLLM struct {
	t       *testing.T
	wav     []byte
	mu      sync.Mutex
	last    map[string]any
	healthy atomic.Bool
}

func (f *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		if !f.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"unhealthy","message":"TTS model not initialized"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"healthy"}`))
	case "/tts_url":
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		f.mu.Lock()
		f.last = body
		f.mu.Unlock()
		fail := func(tb string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "error": tb})
		}
		switch body["text"] {
		case "oom":
			fail("Traceback (most recent call last):\n  File \"api_server_v2.py\"\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n")
		case "boom":
			fail("Traceback (most recent call last):\nRuntimeError: CUDA error: device-side assert triggered\n")
		case "nofile":
			fail("Traceback (most recent call last):\nFileNotFoundError: [Errno 2] No such file or directory: '/x.wav'\n")
		case "html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>proxy</html>"))
		case "notwav":
			w.Header().Set("Content-Type", "audio/wav")
			_, _ = w.Write([]byte("RIFFnope"))
		default:
			w.Header().Set("Content-Type", "audio/wav")
			_, _ = w.Write(f.wav)
		}
	default:
		http.NotFound(w, r)
	}
}

func setupVLLM(t *testing.T) (*VLLM, *fakeVLLM, string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.wav")
	require.NoError(t, WriteWAV(src, 22050, make([]int16, 22050*3/2)))
	wav, err := os.ReadFile(src)
	require.NoError(t, err)
	fake := &fakeVLLM{t: t, wav: wav}
	fake.healthy.Store(true)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	v, err := NewVLLM(VLLMConfig{URL: srv.URL + "/", Concurrency: 16, Version: "vllm-2025-10"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v, fake, dir
}

func TestVLLMSynthesize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v, fake, dir := setupVLLM(t)

	info, err := v.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 16, info.Concurrency)
	require.False(t, info.DurationControl)
	require.Equal(t, "vllm-2025-10", info.Version)

	out := filepath.Join(dir, "takes", "1.wav")
	res, err := v.Synthesize(ctx, Request{
		Text: "还是会想你", Speaker: Speaker{ReferenceAudioPath: "/voices/jay.wav"},
		Emotion:        Emotion{Mode: EmotionVector, Vector: [8]float64{0, 0, 0.55, 0, 0, 0, 0, 0.55}},
		DurationFactor: 1.3, OutputPath: out,
	})
	require.NoError(t, err)
	require.Equal(t, "vllm", res.Engine)
	require.InDelta(t, 1.5, res.AudioSeconds, 1e-9)
	require.Equal(t, 22050, res.SampleRate)
	require.Equal(t, 1.0, res.DurationFactor, "no duration control")
	require.FileExists(t, out)

	fake.mu.Lock()
	body := fake.last
	fake.mu.Unlock()
	require.Equal(t, "还是会想你", body["text"])
	require.Equal(t, "/voices/jay.wav", body["spk_audio_path"])
	require.Equal(t, 2.0, body["emo_control_method"])
	vec := body["emo_vec"].([]any)
	require.Len(t, vec, 8)
	require.InDelta(t, 0.4, vec[2].(float64), 1e-12, "scaled to the 0.8 cap")
	require.Equal(t, 120.0, body["max_text_tokens_per_sentence"])
	require.Nil(t, body["emo_ref_path"])
	require.Equal(t, false, body["emo_random"])

	for mode, method := range map[EmotionMode]float64{EmotionSpeaker: 0, EmotionAudio: 1, EmotionText: 3} {
		weight := 0.6
		if mode == EmotionText {
			weight = 1 // the server ignores it there: TestVLLMEmotionWeight
		}
		_, err := v.Synthesize(ctx, Request{Text: "hi", Speaker: Speaker{ReferenceAudioPath: "/r.wav"},
			Emotion: Emotion{Mode: mode, AudioPath: "/sad.wav", Text: "sad", Weight: weight}, OutputPath: out})
		require.NoError(t, err)
		fake.mu.Lock()
		require.Equal(t, method, fake.last["emo_control_method"], mode)
		if mode == EmotionAudio {
			require.Equal(t, "/sad.wav", fake.last["emo_ref_path"])
			require.Equal(t, 0.6, fake.last["emo_weight"])
		}
		if mode == EmotionText {
			require.Equal(t, "sad", fake.last["emo_text"])
		}
		fake.mu.Unlock()
	}
}

func TestVLLMErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v, fake, dir := setupVLLM(t)
	out := filepath.Join(dir, "x.wav")
	cases := map[string]error{"oom": ErrOutOfMemory, "boom": ErrInternal, "nofile": ErrInvalidInput, "html": ErrInternal, "notwav": ErrInternal}
	for text, want := range cases {
		_, err := v.Synthesize(ctx, Request{Text: text, Speaker: Speaker{ReferenceAudioPath: "/r.wav"}, OutputPath: out})
		require.ErrorIs(t, err, want, text)
		require.NoFileExists(t, out, text)
	}
	_, err := v.Synthesize(ctx, Request{Text: "oom", Speaker: Speaker{ReferenceAudioPath: "/r.wav"}, OutputPath: out})
	var te *Error
	require.ErrorAs(t, err, &te)
	require.Contains(t, te.Message, "CUDA out of memory")
	require.Contains(t, te.Traceback, "Traceback")

	_, err = v.Synthesize(ctx, Request{Text: "hi", OutputPath: out})
	require.ErrorIs(t, err, ErrInvalidInput, "no reference audio")

	fake.healthy.Store(false)
	_, err = v.Info(ctx)
	require.ErrorIs(t, err, ErrUnavailable)

	gone, err := NewVLLM(VLLMConfig{URL: "http://127.0.0.1:1"})
	require.NoError(t, err)
	_, err = gone.Synthesize(ctx, Request{Text: "hi", Speaker: Speaker{ReferenceAudioPath: "/r.wav"}, OutputPath: out})
	require.ErrorIs(t, err, ErrUnavailable)
	_, err = NewVLLM(VLLMConfig{URL: "127.0.0.1:6006"})
	require.Error(t, err)
}

// TestVLLMEmotionWeight: index-tts-vllm forces emo_weight 1 in vector and text modes, where
// IndexTTS-2 scales the vector by it. The engine scales the vector itself (the same
// computation as IndexTTS-2's infer(), to 4 decimals) and refuses a weight in text mode.
func TestVLLMEmotionWeight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v, fake, dir := setupVLLM(t)
	out := filepath.Join(dir, "w.wav")
	_, err := v.Synthesize(ctx, Request{Text: "你好", Speaker: Speaker{ReferenceAudioPath: "/r.wav"}, OutputPath: out,
		Emotion: Emotion{Mode: EmotionVector, Weight: 0.5, Vector: [8]float64{0, 0, 0.6, 0, 0, 0, 0, 0.1}}})
	require.NoError(t, err)
	fake.mu.Lock()
	body := fake.last
	fake.mu.Unlock()
	require.Equal(t, 1.0, body["emo_weight"], "what the server uses anyway")
	vec := body["emo_vec"].([]any)
	require.Equal(t, 0.3, vec[2].(float64), "sad scaled by the weight")
	require.Equal(t, 0.05, vec[7].(float64))
	require.Equal(t, 0.0, vec[0].(float64))

	_, err = v.Synthesize(ctx, Request{Text: "hi", Speaker: Speaker{ReferenceAudioPath: "/r.wav"}, OutputPath: out,
		Emotion: Emotion{Mode: EmotionText, Text: "sad", Weight: 0.5}})
	require.ErrorIs(t, err, ErrInvalidInput, "refused, not retried")
	require.Equal(t, CodeUnsupported, CodeOf(err))
	require.Contains(t, err.Error(), "emotion weight")
	require.Equal(t, "tts.error.unsupported", CodeOf(err).MessageKey())

	_, err = v.Synthesize(ctx, Request{Text: "hi", Language: "en-US", Speaker: Speaker{ReferenceAudioPath: "/r.wav"}, OutputPath: out})
	require.NoError(t, err)
	_, err = v.Synthesize(ctx, Request{Text: "こんにちは", Speaker: Speaker{ReferenceAudioPath: "/r.wav"}, OutputPath: out})
	require.Equal(t, CodeUnsupported, CodeOf(err), "IndexTTS-2 does not speak Japanese")
}
