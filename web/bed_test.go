package web_test

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// bedBody is a multipart bed upload: its kind, then the file.
func bedBody(t *testing.T, kind, name string, data []byte) (io.Reader, string) {
	t.Helper()
	var buf strings.Builder
	w := multipart.NewWriter(&buf)
	require.NoError(t, w.WriteField("kind", kind))
	fw, err := w.CreateFormFile("file", name)
	require.NoError(t, err)
	_, err = fw.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return strings.NewReader(buf.String()), w.FormDataContentType()
}

// TestBedCardUploadsReplacesAndRemoves goes through the bed card as a browser does:
// a full mix to be ducked is kept with its kind and a note of what that means, and
// played from /blobs (the project's blob); a text file and an unknown kind are
// refused in the card with a message, changing nothing; removing it empties the
// card. The picture card reloads after each change.
func TestBedCardUploadsReplacesAndRemoves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.SourceMaxUploadBytes = 16 << 20
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	p := fmt.Sprintf("/projects/%d/bed", b.project.ID)
	hx := map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf}
	require.Equal(t, 1, doc(t, c.get(p)).Find(`[data-testid=bed-card]`).Length())

	wav := filepath.Join(t.TempDir(), "mix.wav")
	out, err := exec.Command("ffmpeg", "-v", "error", "-nostdin", "-f", "lavfi", "-i", "sine=frequency=300:sample_rate=48000:duration=2", wav).CombinedOutput()
	require.NoError(t, err, "%s", out)
	data, err := os.ReadFile(wav)
	require.NoError(t, err)

	body, ct := bedBody(t, "full_mix", "original mix.wav", data)
	resp := c.do("POST", p, body, ct, hx)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("HX-Trigger"), "picture-refresh")
	d := doc(t, resp)
	require.Contains(t, d.Find(`[data-testid=bed-info]`).Text(), "original mix.wav")
	require.Equal(t, 1, d.Find(`[data-testid=bed-full-mix-note]`).Length(), "what a full mix means is said")
	src, ok := d.Find(`[data-testid=bed-audio]`).Attr("src")
	require.True(t, ok)
	bed, err := b.store.ProjectBed(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, studio.BedFullMix, bed.Kind)
	require.Equal(t, "/blobs/"+bed.AudioSHA256, src)
	require.Equal(t, http.StatusOK, c.get(src).StatusCode, "the player's blob is the project's")

	for _, bad := range []struct{ kind, name string }{{"me", "bed.wav"}, {"stems", "mix.wav"}} {
		payload := []byte("this is text pretending to be audio")
		if bad.kind == "stems" {
			payload = data
		}
		body, ct := bedBody(t, bad.kind, bad.name, payload)
		resp := c.do("POST", p, body, ct, hx)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, bad.kind)
		msg := doc(t, resp).Find(`[data-testid=bed-error]`).Text()
		require.NotEmpty(t, msg, bad.kind)
		if bad.kind == "stems" {
			require.Contains(t, msg, "full mix to be ducked")
		}
		got, err := b.store.ProjectBed(ctx, b.project.ID)
		require.NoError(t, err)
		require.Equal(t, bed.AudioSHA256, got.AudioSHA256, "%s: nothing changed", bad.kind)
		require.Equal(t, studio.BedFullMix, got.Kind)
	}

	resp = c.do("POST", p+"/delete", strings.NewReader(""), "application/x-www-form-urlencoded", hx)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 0, doc(t, resp).Find(`[data-testid=bed-info]`).Length())
	_, err = b.store.ProjectBed(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound)
}
