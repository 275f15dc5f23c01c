package tts

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeResponse(t *testing.T) {
	t.Parallel()
	var res Result
	err := decodeResponse(200, "application/json; charset=utf-8",
		[]byte(`{"engine":"indextts","sample_rate":22050,"audio_seconds":2.5,"tokens":125,"stages":{"gpt":1.5},"peak_allocated_bytes":1000}`), &res)
	require.NoError(t, err)
	require.Equal(t, 22050, res.SampleRate)
	require.Equal(t, 1.5, res.Stages["gpt"])
	require.Equal(t, int64(1000), res.PeakAllocatedBytes)

	cases := []struct {
		name   string
		status int
		ct     string
		body   string
		want   error
		msg    string
	}{
		{"oom", 507, "application/json", `{"error":{"code":"out_of_memory","message":"CUDA out of memory","traceback":"tb"}}`, ErrOutOfMemory, "CUDA out of memory"},
		{"invalid", 400, "application/json", `{"error":{"code":"invalid_input","message":"text is empty"}}`, ErrInvalidInput, "text is empty"},
		{"unknown code", 500, "application/json", `{"error":{"code":"exploded","message":"x"}}`, ErrInternal, "x"},
		{"loading", 503, "application/json", `{"error":{"code":"unavailable","message":"loading model"}}`, ErrUnavailable, "loading"},
		{"html 502", 502, "text/html", `<html>bad gateway</html>`, ErrUnavailable, "502"},
		{"plain 507", 507, "text/plain", ``, ErrOutOfMemory, "empty body"},
		{"plain 400", 400, "text/plain", `nope`, ErrInvalidInput, "nope"},
		{"404", 404, "text/plain", `not found`, ErrInternal, "404"},
		{"200 not json", 200, "text/plain", `ok`, ErrInternal, "content type"},
		{"200 garbage", 200, "application/json", `{"engine":`, ErrInternal, "decoding"},
		{"200 wrong type", 200, "application/json", `{"sample_rate":"high"}`, ErrInternal, "decoding"},
		{"200 trailing", 200, "application/json", `{} {}`, ErrInternal, "after the JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var res Result
			err := decodeResponse(tc.status, tc.ct, []byte(tc.body), &res)
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), tc.msg)
			var te *Error
			require.ErrorAs(t, err, &te)
		})
	}
	var te *Error
	err = decodeResponse(507, "application/json", []byte(`{"error":{"code":"out_of_memory","message":"m","traceback":"Traceback..."}}`), &res)
	require.ErrorAs(t, err, &te)
	require.Equal(t, "Traceback...", te.Traceback)
}

func TestStatusOfRoundTrip(t *testing.T) {
	t.Parallel()
	for _, code := range []ErrorCode{CodeOutOfMemory, CodeInvalidInput, CodeInternal, CodeUnavailable} {
		require.Equal(t, code, codeOfStatus(StatusOf(code)), code)
	}
	require.Equal(t, http.StatusInsufficientStorage, StatusOf(CodeOutOfMemory))
}

// FuzzDecodeResponse checks that no host answer, however broken, panics the decoder, and
// that every failure is an *Error.
func FuzzDecodeResponse(f *testing.F) {
	f.Add(200, "application/json", []byte(`{"engine":"indextts","audio_seconds":1.5,"stages":{"gpt":0.5}}`))
	f.Add(507, "application/json", []byte(`{"error":{"code":"out_of_memory","message":"m"}}`))
	f.Add(400, "text/plain", []byte("bad"))
	f.Add(200, "application/json;;;", []byte{0xff, 0xfe})
	f.Fuzz(func(t *testing.T, status int, contentType string, body []byte) {
		for _, out := range []any{&Result{}, &HealthResponse{}, &PrepareResult{}, &ReleaseCacheResult{}} {
			err := decodeResponse(status, contentType, body, out)
			if err != nil {
				var te *Error
				if !errors.As(err, &te) {
					t.Fatalf("error %v is not *Error", err)
				}
				_ = te.Error()
			}
		}
	})
}
