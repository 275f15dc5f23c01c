package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/media/mediatest"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/web"
	"dubstudio/workflow"
)

// setupVideo is setup with the pipeline queueing proxies and a worker making them.
func setupVideo(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	logger := slog.New(slog.DiscardHandler)
	p, err := workflow.NewPipeline(b.store, logger)
	require.NoError(t, err)
	w, err := workflow.NewWorker(p, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1), workflow.WorkerConfig{
		Name: fmt.Sprintf("web-video-%d", time.Now().UnixNano()), DataDir: b.cfg.DataDir, FetchPollInterval: 100 * time.Millisecond}, logger)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx))
	})
	b.cfg.SourceMaxUploadBytes = 64 << 20
	srv := web.New(web.Deps{Config: b.cfg, Store: b.store, Logger: logger, Proxies: p})
	b.server = httptest.NewServer(srv.Handler())
	t.Cleanup(b.server.Close)
	return b
}

func (b *testBundle) waitVideo(t *testing.T) *studio.ProjectVideo {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := b.store.ProjectVideo(context.Background(), b.project.ID)
		require.NoError(t, err)
		if !v.Active() {
			return v
		}
		require.True(t, time.Now().Before(deadline), "proxy still %s", v.State)
		time.Sleep(50 * time.Millisecond)
	}
}

func TestVideoUploadMakesAProxyServedWithRanges(t *testing.T) {
	t.Parallel()
	b := setupVideo(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	upload := func(name string, data []byte) *http.Response {
		body, ct := multipartBody(t, "file", name, data)
		return c.do("POST", p+"/source", body, ct, map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf})
	}
	// Before any upload: the card says there is no picture, the proxy is not found.
	require.Equal(t, "none", doc(t, c.get(p+"/video")).Find(`[data-testid=picture]`).AttrOr("data-state", ""))
	require.Equal(t, http.StatusNotFound, c.get(p+"/video/proxy.mp4").StatusCode)

	data, err := os.ReadFile(mediatest.Video(t, t.TempDir(), "episode.mp4", 3, "Where were you last night?"))
	require.NoError(t, err)
	resp := upload("episode.mp4", data)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("HX-Trigger"), "picture-refresh", "the picture card reloads")
	v := b.waitVideo(t)
	require.Equal(t, studio.VideoDone, v.State, v.Error)

	card := doc(t, c.get(p+"/video"))
	picture, ok := card.Find(`[data-testid=picture-video]`).Attr("src")
	require.True(t, ok, "the card plays the proxy's picture")
	require.True(t, strings.HasPrefix(picture, p+"/video/picture.mp4?v="), picture)
	require.Equal(t, picture, card.Find(`[data-picture]`).AttrOr("data-picture-url", ""))
	src := card.Find(`[data-picture]`).AttrOr("data-original-url", "")
	require.True(t, strings.HasPrefix(src, p+"/video/proxy.mp4?v="), "the proxy with its sound, for the original: %q", src)
	require.Equal(t, p+"/preview.wav", card.Find(`[data-picture]`).AttrOr("data-mix-url", ""))

	// Under the dub the picture plays without the proxy's sound track: the proxy's
	// video stream, copied.
	pic := c.get(picture)
	require.Equal(t, http.StatusOK, pic.StatusCode)
	require.Equal(t, "video/mp4", pic.Header.Get("Content-Type"))
	picFile := filepath.Join(t.TempDir(), "picture.mp4")
	picData, err := io.ReadAll(pic.Body)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(picFile, picData, 0o600))
	out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "stream=codec_type,codec_name", "-of", "csv=p=0", picFile).Output()
	require.NoError(t, err)
	require.Equal(t, "h264,video", strings.TrimSpace(string(out)), "one H.264 stream, no sound")
	part := c.do("GET", picture, nil, "", map[string]string{"Range": "bytes=0-99"})
	require.Equal(t, http.StatusPartialContent, part.StatusCode, "served with ranges")

	// The whole proxy, then ranges of it, as a video element seeking asks.
	full := c.get(src)
	require.Equal(t, http.StatusOK, full.StatusCode)
	require.Equal(t, "video/mp4", full.Header.Get("Content-Type"))
	require.Equal(t, "bytes", full.Header.Get("Accept-Ranges"))
	whole, err := io.ReadAll(full.Body)
	require.NoError(t, err)
	size := len(whole)
	require.Greater(t, size, 1000)
	part = c.do("GET", src, nil, "", map[string]string{"Range": "bytes=100-199"})
	require.Equal(t, http.StatusPartialContent, part.StatusCode)
	require.Equal(t, "bytes 100-199/"+strconv.Itoa(size), part.Header.Get("Content-Range"))
	require.Equal(t, "video/mp4", part.Header.Get("Content-Type"))
	got, err := io.ReadAll(part.Body)
	require.NoError(t, err)
	require.Equal(t, whole[100:200], got)
	tail := c.do("GET", src, nil, "", map[string]string{"Range": "bytes=-10"})
	require.Equal(t, http.StatusPartialContent, tail.StatusCode)
	require.Equal(t, fmt.Sprintf("bytes %d-%d/%d", size-10, size-1, size), tail.Header.Get("Content-Range"))
	bad := c.do("GET", src, nil, "", map[string]string{"Range": fmt.Sprintf("bytes=%d-", size+10)})
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, bad.StatusCode)
	// The ETag lets a seek's range go on only while the file is the same one.
	etag := full.Header.Get("ETag")
	require.Equal(t, `"`+*v.ProxySHA256+`"`, etag)
	require.Equal(t, http.StatusNotModified, c.do("GET", src, nil, "", map[string]string{"If-None-Match": etag}).StatusCode)

	// The dub preview is served the same way.
	mix := c.do("GET", p+"/preview.wav?takes=latest&fill=original", nil, "", map[string]string{"Range": "bytes=0-43"})
	require.Equal(t, http.StatusPartialContent, mix.StatusCode)
	require.Equal(t, "audio/wav", mix.Header.Get("Content-Type"))
	require.True(t, strings.HasPrefix(mix.Header.Get("Content-Range"), "bytes 0-43/"))

	// A text file is refused and the picture stays.
	resp = upload("episode2.mp4", []byte("this is a text file"))
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	now, err := b.store.ProjectVideo(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, v.VideoSHA256, now.VideoSHA256)

	// An audio source has no picture: the earlier one is forgotten.
	resp = upload("tone.wav", sourceFile(t, "tone.wav", "-f", "lavfi", "-i", "sine=frequency=440:duration=2"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = b.store.ProjectVideo(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound)
	require.Equal(t, http.StatusNotFound, c.get(src).StatusCode)
	require.Equal(t, http.StatusNotFound, c.get(picture).StatusCode)
}

func TestPictureRoutesNeedAnEditor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	routes := []string{p + "/video", p + "/video/proxy.mp4", p + "/video/picture.mp4", p + "/preview.wav"}
	for _, who := range studio.Roles {
		c := b.as(t, who)
		for _, path := range routes {
			code := c.get(path).StatusCode
			require.NotContains(t, []int{http.StatusForbidden, http.StatusUnauthorized, http.StatusInternalServerError}, code, "%s as %s", path, who)
		}
	}
	anon := b.anon(t)
	for _, path := range routes {
		resp := anon.get(path)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, path)
		require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login?next="), path)
	}
	// Another project's picture is not found, not someone else's.
	other := fmt.Sprintf("/projects/%d", b.project.ID+1000)
	require.Equal(t, http.StatusNotFound, b.as(t, studio.RoleEditor).get(other+"/video/proxy.mp4").StatusCode)
}
