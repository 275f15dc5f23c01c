package workflow_test

import (
	"context"
	"os"
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
	"dubstudio/tts"
	"dubstudio/workflow"
)

// proxyBundle is a project whose source video is uploaded, its proxy to be made by
// a real worker.
type proxyBundle struct {
	*testBundle
	lib   *media.Library
	blobs studio.BlobStore
}

func setupProxy(t *testing.T) *proxyBundle {
	t.Helper()
	b := setup(t, 1)
	blobs := studio.BlobStore{Dir: filepath.Join(b.DataDir, "blobs")}
	// Every change of a video's row is logged, so the test sees each progress the
	// job wrote, however fast it ran.
	studiotest.Exec(t, b.Store, `CREATE TABLE video_log (state text, progress int, error text, attempts int)`)
	studiotest.Exec(t, b.Store, `CREATE FUNCTION log_video() RETURNS trigger AS $$ BEGIN
		INSERT INTO video_log VALUES (NEW.state, NEW.progress, NEW.error, NEW.attempts); RETURN NEW; END $$ LANGUAGE plpgsql`)
	studiotest.Exec(t, b.Store, `CREATE TRIGGER video_log AFTER INSERT OR UPDATE ON project_videos FOR EACH ROW EXECUTE FUNCTION log_video()`)
	return &proxyBundle{testBundle: b, lib: media.NewLibrary(b.Store, blobs), blobs: blobs}
}

// upload takes a video as the project's source, as the web handler does, and queues
// its proxy.
func (b *proxyBundle) upload(t *testing.T, seconds int) *studio.ProjectVideo {
	t.Helper()
	dir := t.TempDir()
	path := mediatest.Video(t, dir, "episode.mp4", seconds, "Where were you last night? Out walking, like I said.")
	_, v, err := b.lib.SetProjectSourceVideo(context.Background(), b.Project.ID, b.Editor.ID, media.Upload{Path: path, Name: "episode.mp4"})
	require.NoError(t, err)
	require.NotNil(t, v)
	v, err = b.Pipeline.QueueProxy(context.Background(), *v)
	require.NoError(t, err)
	require.Equal(t, studio.VideoQueued, v.State)
	return v
}

// wait waits for the project's video to be done or failed.
func (b *proxyBundle) wait(t *testing.T) *studio.ProjectVideo {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := b.Store.ProjectVideo(context.Background(), b.Project.ID)
		require.NoError(t, err)
		if !v.Active() {
			return v
		}
		require.True(t, time.Now().Before(deadline), "the proxy is still %s", v.State)
		time.Sleep(50 * time.Millisecond)
	}
}

type videoLog struct {
	State    string
	Progress int
	Error    string
	Attempts int
}

func (b *proxyBundle) log(t *testing.T) []videoLog {
	t.Helper()
	rows, err := b.Store.Pool().Query(context.Background(), `SELECT state, progress, error, attempts FROM video_log`)
	require.NoError(t, err)
	defer rows.Close()
	var out []videoLog
	for rows.Next() {
		var l videoLog
		require.NoError(t, rows.Scan(&l.State, &l.Progress, &l.Error, &l.Attempts))
		out = append(out, l)
	}
	return out
}

func (b *proxyBundle) startProxyWorker(t *testing.T) {
	t.Helper()
	b.startWorkerWith(t, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1), nil)
}

func TestProxyJobReportsProgress(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	b.upload(t, 4)
	b.startProxyWorker(t)
	v := b.wait(t)
	require.Equal(t, studio.VideoDone, v.State, v.Error)
	require.Equal(t, 100, v.Progress)
	require.NotNil(t, v.ProxySHA256)
	path, err := b.blobs.Path(*v.ProxySHA256)
	require.NoError(t, err)
	out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0", path).Output()
	require.NoError(t, err)
	require.Equal(t, "h264\naac", strings.TrimSpace(string(out)))

	var running []int
	for _, l := range b.log(t) {
		if l.State == "running" {
			running = append(running, l.Progress)
		}
	}
	require.Greater(t, len(running), 2, "progress was written as ffmpeg went: %v", running)
	for i := 1; i < len(running); i++ {
		require.GreaterOrEqual(t, running[i], running[i-1], "%v", running)
	}
	require.Greater(t, running[len(running)-1], 50, "%v", running)
}

func TestProxyJobIsRetried(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	v := b.upload(t, 2)
	// The video's file is away (a blob store not mounted yet): the attempts fail
	// until it is back, then the retry makes the proxy.
	path, err := b.blobs.Path(v.VideoSHA256)
	require.NoError(t, err)
	require.NoError(t, os.Rename(path, path+".away"))
	b.startProxyWorker(t)
	deadline := time.Now().Add(time.Minute)
	for {
		now, err := b.Store.ProjectVideo(context.Background(), b.Project.ID)
		require.NoError(t, err)
		if now.Error != "" {
			require.Equal(t, studio.VideoQueued, now.State, "a failed attempt waits for its retry")
			require.Contains(t, now.Error, "no such file")
			break
		}
		require.True(t, time.Now().Before(deadline), "no attempt failed")
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, os.Rename(path+".away", path))
	v = b.wait(t)
	require.Equal(t, studio.VideoDone, v.State, v.Error)
	require.GreaterOrEqual(t, v.Attempts, 2)
	require.Empty(t, v.Error, "the success clears the error")
}

func TestProxyJobRefusesWhatIsNotVideo(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	ctx := context.Background()
	// A recording stored as the project's video (as if the video row outlived a
	// mistake): the job gives up at once, saying why.
	wav := filepath.Join(t.TempDir(), "tone.wav")
	out, err := exec.Command("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "sine=duration=1", "-y", wav).CombinedOutput()
	require.NoError(t, err, string(out))
	blob, err := b.Store.PutBlob(ctx, b.blobs, wav, studio.Blob{Format: "wav"})
	require.NoError(t, err)
	_, err = b.Pipeline.QueueProxy(ctx, studio.ProjectVideo{ProjectID: b.Project.ID, VideoSHA256: blob.SHA256, FileName: "tone.wav"})
	require.NoError(t, err)
	b.startProxyWorker(t)
	v := b.wait(t)
	require.Equal(t, studio.VideoFailed, v.State)
	require.Equal(t, "video.not_video", v.Error)
	require.Equal(t, 1, v.Attempts, "not retried")
	// River records the job's end after the job returns.
	require.Eventually(t, func() bool {
		var state string
		require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT state FROM river_job WHERE kind = 'make_proxy'`).Scan(&state))
		return state == "cancelled"
	}, 30*time.Second, 50*time.Millisecond, "the job is cancelled, not retried")
}

// The worker's media library keeps MIN_FREE_MB: a proxy that would leave less free
// in the blob store is refused before ffmpeg writes anything (the worker once built
// its library without the limits, and kept only the default 1 GiB).
func TestProxyJobKeepsMinFreeSpace(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	b.upload(t, 2)
	b.startWorkerWith(t, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1), func(c *workflow.WorkerConfig) {
		c.Media.MinFreeBytes = 1 << 60 // more than any disk has
	})
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := b.Store.ProjectVideo(context.Background(), b.Project.ID)
		require.NoError(t, err)
		require.NotEqual(t, studio.VideoDone, v.State, "the proxy was made")
		if v.Error != "" {
			require.Equal(t, "video.no_space", v.Error)
			require.Nil(t, v.ProxySHA256)
			break
		}
		require.True(t, time.Now().Before(deadline), "no attempt failed")
		time.Sleep(20 * time.Millisecond)
	}
	tmp, err := filepath.Glob(filepath.Join(b.blobs.Dir, ".proxy-*"))
	require.NoError(t, err)
	require.Empty(t, tmp, "nothing written")
}
