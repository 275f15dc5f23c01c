// Package proxy benchmarks the transcoding of a source video into its browser
// proxy (media.MakeProxy, as the make_proxy job runs it): a minute of 720p, 25 fps
// picture (ffmpeg's testsrc2) with espeak-ng speech, made at the start, transcoded
// with the default settings (480p, CRF 28, x264 veryfast, a keyframe a second). The
// figure is seconds of transcoding per minute of video. See docs/benchmarks.md.
package proxy_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/media"
	"dubstudio/media/mediatest"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

const benchSeconds = 60

func BenchmarkProxyMinute(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	src := mediatest.VideoSized(b, dir, "minute.mp4", benchSeconds, "1280x720",
		"This is a minute of picture with speech over it, as a programme to dub would be.")
	store := studiotest.Store(b)
	ed := studiotest.User(b, store, studio.RoleEditor)
	p := studiotest.Project(b, store, ed, 0)
	lib := media.NewLibrary(store, studio.BlobStore{Dir: filepath.Join(dir, "blobs")})
	_, v, err := lib.SetProjectSourceVideo(ctx, p.ID, ed.ID, media.Upload{Path: src, Name: "minute.mp4"})
	require.NoError(b, err)
	require.NotNil(b, v)
	var total time.Duration
	var proxy *studio.Blob
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		proxy, err = lib.MakeProxy(ctx, v.VideoSHA256, media.ProxyOpts{}, nil)
		total += time.Since(start)
		require.NoError(b, err)
	}
	b.StopTimer()
	perMinute := total.Seconds() / float64(b.N) * 60 / benchSeconds
	b.ReportMetric(perMinute, "s/min-of-video")
	b.ReportMetric(60/perMinute, "x-realtime")
	path, err := studio.BlobStore{Dir: filepath.Join(dir, "blobs")}.Path(proxy.SHA256)
	require.NoError(b, err)
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0", path).Output()
	require.NoError(b, err)
	b.Logf("proxy %s, %d bytes (%.0f kbit/s)", strings.TrimSpace(string(out)), proxy.SizeBytes, float64(proxy.SizeBytes)*8/1000/benchSeconds)
}
