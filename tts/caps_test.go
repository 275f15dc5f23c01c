package tts

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCaps: requests are capped below IndexTTS's GPT position tables (issue 19); what
// the profile asks beyond the caps is not an error, it is capped.
func TestCaps(t *testing.T) {
	t.Parallel()
	r := Request{Text: "hi", OutputPath: "/x.wav", MaxMelTokens: 1800, MaxTextTokensPerSegment: 600}
	n, err := r.Normalize()
	require.NoError(t, err)
	require.Equal(t, MaxMelTokensCap, n.MaxMelTokens)
	require.Equal(t, MaxTextTokensPerSegmentCap, n.MaxTextTokensPerSegment)
	r.MaxMelTokens, r.MaxTextTokensPerSegment = 900, 80
	n, err = r.Normalize()
	require.NoError(t, err)
	require.Equal(t, 900, n.MaxMelTokens)
	require.Equal(t, 80, n.MaxTextTokensPerSegment)
}

// TestRefinedInvalidCodes: text_too_long and unsupported are invalid inputs with their
// own user-facing text: matched by ErrInvalidInput, not retried, answered with 400.
func TestRefinedInvalidCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []ErrorCode{CodeTextTooLong, CodeUnsupported} {
		err := error(&Error{Code: c, Message: "m"})
		require.ErrorIs(t, err, ErrInvalidInput, c)
		require.NotErrorIs(t, err, ErrInternal, c)
		require.False(t, c.Retryable(), c)
		require.Equal(t, "tts.error."+string(c), c.MessageKey())
		require.Equal(t, http.StatusBadRequest, StatusOf(c))
		body := []byte(`{"error": {"code": "` + string(c) + `", "message": "a segment has 700 text tokens"}}`)
		got := decodeResponse(http.StatusBadRequest, "application/json", body, &Result{})
		require.Equal(t, c, CodeOf(got), "decoded as sent, not as internal")
		require.Contains(t, got.Error(), "700 text tokens")
	}
	require.True(t, CodeInternal.Retryable())
	require.False(t, CodeInvalidInput.Retryable())
}
