package tts

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func validRequest() Request {
	return Request{Text: "Hello there.", OutputPath: "/tmp/out.wav"}
}

func TestErrorIsSentinel(t *testing.T) {
	t.Parallel()
	cases := map[ErrorCode]error{
		CodeOutOfMemory:  ErrOutOfMemory,
		CodeInvalidInput: ErrInvalidInput,
		CodeInternal:     ErrInternal,
		CodeUnavailable:  ErrUnavailable,
		"mystery":        ErrInternal,
	}
	for code, sentinel := range cases {
		err := fmt.Errorf("synthesizing line 7: %w", &Error{Code: code, Message: "x"})
		require.ErrorIs(t, err, sentinel, code)
		for _, other := range []error{ErrOutOfMemory, ErrInvalidInput, ErrUnavailable} {
			if !errors.Is(other, sentinel) {
				require.NotErrorIs(t, err, other, code)
			}
		}
		require.Equal(t, code, CodeOf(err))
	}
	require.Equal(t, CodeInternal, CodeOf(errors.New("boom")))
	require.Equal(t, ErrorCode(""), CodeOf(nil))

	cause := errors.New("dial unix /x: connect: connection refused")
	err := &Error{Code: CodeUnavailable, Err: cause}
	require.ErrorIs(t, err, cause)
	require.Contains(t, err.Error(), "connection refused")
	require.False(t, CodeInvalidInput.Retryable())
	require.True(t, CodeOutOfMemory.Retryable())
}

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	bad := map[string]func(r *Request){
		"empty text":      func(r *Request) { r.Text = "  \n" },
		"bad utf8":        func(r *Request) { r.Text = "a\xffb" },
		"nul":             func(r *Request) { r.Text = "a\x00b" },
		"too long":        func(r *Request) { r.Text = strings.Repeat("字", MaxTextRunes+1) },
		"no output":       func(r *Request) { r.OutputPath = "" },
		"factor low":      func(r *Request) { r.DurationFactor = 0.4 },
		"factor high":     func(r *Request) { r.DurationFactor = 2.1 },
		"negative target": func(r *Request) { r.TargetSeconds = -1 },
		"negative mel":    func(r *Request) { r.MaxMelTokens = -1 },
		"weight":          func(r *Request) { r.Emotion.Weight = 1.5 },
		"unknown mode":    func(r *Request) { r.Emotion.Mode = "joy" },
		"audio no path":   func(r *Request) { r.Emotion.Mode = EmotionAudio },
		"vector value": func(r *Request) {
			r.Emotion.Mode = EmotionVector
			r.Emotion.Vector[0] = 1.2
		},
		"vector negative": func(r *Request) {
			r.Emotion.Mode = EmotionVector
			r.Emotion.Vector = [8]float64{0.5, -0.1}
		},
		"vector zero": func(r *Request) { r.Emotion.Mode = EmotionVector },
	}
	for name, mutate := range bad {
		r := validRequest()
		mutate(&r)
		err := r.Validate()
		require.ErrorIs(t, err, ErrInvalidInput, name)
		_, err = r.Normalize()
		require.ErrorIs(t, err, ErrInvalidInput, name)
	}
	require.NoError(t, validRequest().Validate())
}

func TestNormalizeScalesEmotionVector(t *testing.T) {
	t.Parallel()
	r := validRequest()
	r.Emotion = Emotion{Mode: EmotionVector, Vector: [8]float64{1, 1, 0, 0, 0, 0, 0, 0}, AudioPath: "x.wav"}
	n, err := r.Normalize()
	require.NoError(t, err)
	require.InDelta(t, 0.4, n.Emotion.Vector[0], 1e-12)
	require.InDelta(t, 0.4, n.Emotion.Vector[1], 1e-12)
	require.Empty(t, n.Emotion.AudioPath)
	require.Equal(t, 1.0, n.Emotion.Weight)
	require.Equal(t, DefaultMaxMelTokens, n.MaxMelTokens)
	require.Equal(t, DefaultMaxTextTokensPerSegment, n.MaxTextTokensPerSegment)
	require.Equal(t, "en", n.Language)

	// Under the cap nothing changes.
	r.Emotion = Emotion{Mode: EmotionVector, Vector: [8]float64{0.3, 0, 0, 0, 0, 0, 0, 0.2}}
	n, err = r.Normalize()
	require.NoError(t, err)
	require.Equal(t, r.Emotion.Vector, n.Emotion.Vector)

	// Speaker mode drops the vector.
	r.Emotion = Emotion{Vector: [8]float64{0.3}}
	n, err = r.Normalize()
	require.NoError(t, err)
	require.Equal(t, EmotionSpeaker, n.Emotion.Mode)
	require.Equal(t, [8]float64{}, n.Emotion.Vector)
}

func TestPredictNaturalSeconds(t *testing.T) {
	t.Parallel()
	require.Zero(t, PredictNaturalSeconds("   ", "en"))
	en := PredictNaturalSeconds("The quick brown fox jumps over the lazy dog", "en")
	require.InDelta(t, 9/wordsPerSecond, en, 1e-9)
	// A sentence break inside the text adds a pause; trailing punctuation does not.
	two := PredictNaturalSeconds("Hello there. General Kenobi.", "en")
	require.InDelta(t, 4/wordsPerSecond+sentencePauseSecs, two, 1e-9)
	zh := PredictNaturalSeconds("你好，世界。", "zh")
	require.InDelta(t, 4/hanPerSecondZH+clausePauseSecs, zh, 1e-9)
	require.Greater(t, PredictNaturalSeconds("今日はいい天気ですね", ""), 1.0)
	require.Equal(t, minNaturalSeconds, PredictNaturalSeconds("好", "zh"))
	// Longer text takes longer.
	require.Greater(t, PredictNaturalSeconds("one two three four five six", "en"), PredictNaturalSeconds("one two three", "en"))
	// Numbers are said in several words.
	require.Greater(t, PredictNaturalSeconds("in 1999999 years", "en"), PredictNaturalSeconds("in many years", "en"))
}

func TestDurationFactorFor(t *testing.T) {
	t.Parallel()
	text := "The quick brown fox jumps over the lazy dog" // 9 words, 3.33 s
	natural := PredictNaturalSeconds(text, "en")
	require.InDelta(t, 1.2, DurationFactorFor(text, "en", natural*1.2), 1e-9)
	require.Equal(t, MaxDurationFactor, DurationFactorFor(text, "en", natural*5))
	require.Equal(t, MinDurationFactor, DurationFactorFor(text, "en", natural/5))
	require.Equal(t, 1.0, DurationFactorFor(text, "en", 0))
	require.Equal(t, 1.0, DurationFactorFor("", "en", 3))
}

func TestGuessLanguage(t *testing.T) {
	t.Parallel()
	require.Equal(t, "zh", GuessLanguage("我们走吧 OK"))
	require.Equal(t, "ja", GuessLanguage("行きましょう"))
	require.Equal(t, "ko", GuessLanguage("안녕하세요"))
	require.Equal(t, "en", GuessLanguage("Let's go"))
	require.Equal(t, "zh", baseLanguage("cmn"))
	require.Equal(t, "en", baseLanguage("en-US"))
}

func TestLineVRAMBytes(t *testing.T) {
	// A one-request host served this line alone: its peak reserve is the line's.
	one := Result{PeakAllocatedBytes: 5 << 30, PeakReservedBytes: 6 << 30}
	require.EqualValues(t, 6<<30, one.LineVRAMBytes())
	// A batching host's process figures hold every line's KV at once: the line's own
	// share is its peak_allocated_bytes.
	batched := Result{PeakAllocatedBytes: 250 << 20, PeakReservedBytes: 60 << 30,
		Sequence: &SequenceInfo{KVBytes: 50 << 20, ActivationBytes: 200 << 20}}
	require.EqualValues(t, 250<<20, batched.LineVRAMBytes())
}
