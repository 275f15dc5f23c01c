package workflow

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// TestALastAttemptProxyThatCannotRecordRunsAgain: a proxy's last attempt fails (the
// project's "video" is a recording) and its failure cannot be written (the database
// refuses it: here a trigger). River discarded the job and the video stayed running
// for good; the job is snoozed instead, without spending an attempt, and its next
// run records the failure.
func TestALastAttemptProxyThatCannotRecordRunsAgain(t *testing.T) {
	t.Parallel()
	b := setupRivertest(t, 1, 1)
	ctx := context.Background()
	wav := filepath.Join(t.TempDir(), "tone.wav")
	out, err := exec.Command("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "sine=duration=1", "-y", wav).CombinedOutput()
	require.NoError(t, err, string(out))
	blob, err := b.store.PutBlob(ctx, b.w.blobs, wav, studio.Blob{Format: "wav"})
	require.NoError(t, err)
	_, err = b.w.pipeline.QueueProxy(ctx, studio.ProjectVideo{ProjectID: b.project.ID, VideoSHA256: blob.SHA256, FileName: "tone.wav"})
	require.NoError(t, err)
	studiotest.Exec(t, b.store, `CREATE FUNCTION refuse_failed() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'the server is going away'; END $$`)
	studiotest.Exec(t, b.store, `CREATE TRIGGER refuse_failed BEFORE UPDATE ON project_videos FOR EACH ROW
		WHEN (NEW.state = 'failed') EXECUTE FUNCTION refuse_failed()`)
	worker := rivertest.NewWorker(t, b.driver, &river.Config{}, river.Worker[ProxyArgs](&proxyWorker{w: b.w}))
	work := func() (*studio.ProjectVideo, river.EventKind) {
		res, _ := worker.Work(ctx, t, b.tx, ProxyArgs{ProjectID: b.project.ID, VideoSHA256: blob.SHA256},
			&river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{}})
		v, err := b.store.ProjectVideo(ctx, b.project.ID)
		require.NoError(t, err)
		return v, res.EventKind
	}
	v, kind := work()
	require.Equal(t, river.EventKindJobSnoozed, kind, "the job comes back")
	require.Equal(t, studio.VideoRunning, v.State)

	studiotest.Exec(t, b.store, `DROP TRIGGER refuse_failed ON project_videos`)
	v, kind = work()
	require.Equal(t, river.EventKindJobCancelled, kind)
	require.Equal(t, studio.VideoFailed, v.State)
	require.Equal(t, "video.not_video", v.Error)
}
