package studio

import (
	"context"
	"database/sql"
	"math"
	"time"

	"gorm.io/gorm"
)

// VideoState is where a project video's proxy is.
type VideoState string

// States of a video's proxy: its make_proxy job waiting, transcoding, finished, or
// given up (Error says why).
const (
	VideoQueued  VideoState = "queued"
	VideoRunning VideoState = "running"
	VideoDone    VideoState = "done"
	VideoFailed  VideoState = "failed"
)

// ProjectVideo is a project's source video, kept as uploaded, and its browser-ready
// proxy (ProxySHA256, once State is done).
type ProjectVideo struct {
	ProjectID   int64  `gorm:"primaryKey"`
	VideoSHA256 string `gorm:"column:video_sha256"`
	FileName    string // the uploaded file's name, for display only
	DurationMs  int
	Width       int
	Height      int
	ProxySHA256 *string `gorm:"column:proxy_sha256"`
	// FrameRateNum/FrameRateDen is the picture's frame rate as probed (30000/1001);
	// nil for a video recorded before it was (FrameMs falls back to 25 fps).
	FrameRateNum *int
	FrameRateDen *int
	State        VideoState
	Progress     int
	Error        string
	Attempts     int
	UploadedBy   *int64
	CreatedAt    time.Time
	FinishedAt   *time.Time
}

// DefaultFrameMs is a frame at 25 fps: the step of a nudge where the picture's
// frame rate is not known.
const DefaultFrameMs = 40

// FrameMs is one frame of the picture in whole milliseconds (33 at 30 or 29.97 fps,
// 40 at 25); DefaultFrameMs when the rate is not known.
func (v *ProjectVideo) FrameMs() int {
	if v.FrameRateNum == nil || v.FrameRateDen == nil || *v.FrameRateNum <= 0 || *v.FrameRateDen <= 0 {
		return DefaultFrameMs
	}
	return max(1, int(math.Round(1000*float64(*v.FrameRateDen)/float64(*v.FrameRateNum))))
}

// Active reports whether the proxy is still to come.
func (v *ProjectVideo) Active() bool { return v.State == VideoQueued || v.State == VideoRunning }

// QueueVideoFunc inserts a video's proxy job inside tx.
type QueueVideoFunc func(ctx context.Context, tx *sql.Tx, v *ProjectVideo) error

// SetProjectVideo records (or replaces) a project's source video, its proxy to be
// made, and in the same transaction runs queue (which inserts the proxy job).
func (s *Store) SetProjectVideo(ctx context.Context, v ProjectVideo, queue QueueVideoFunc) (*ProjectVideo, error) {
	v.State, v.Progress, v.Error, v.ProxySHA256 = VideoQueued, 0, "", nil
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		err := tx.Exec(`INSERT INTO project_videos (project_id, video_sha256, file_name, duration_ms, width, height,
			frame_rate_num, frame_rate_den, uploaded_by)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project_id) DO UPDATE SET video_sha256 = excluded.video_sha256,
			file_name = excluded.file_name, duration_ms = excluded.duration_ms, width = excluded.width,
			height = excluded.height, frame_rate_num = excluded.frame_rate_num, frame_rate_den = excluded.frame_rate_den,
			uploaded_by = excluded.uploaded_by, proxy_sha256 = NULL, state = 'queued',
			progress = 0, error = '', attempts = 0, created_at = now(), finished_at = NULL`,
			v.ProjectID, v.VideoSHA256, v.FileName, v.DurationMs, v.Width, v.Height, v.FrameRateNum, v.FrameRateDen, v.UploadedBy).Error
		if err != nil {
			return err
		}
		t, err := sqlTx(tx)
		if err != nil {
			return err
		}
		return queue(ctx, t, &v)
	})
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// ProjectVideo returns a project's source video; ErrNotFound when it has none.
func (s *Store) ProjectVideo(ctx context.Context, projectID int64) (*ProjectVideo, error) {
	var v ProjectVideo
	err := s.db.WithContext(ctx).Where("project_id = ?", projectID).First(&v).Error
	return &v, notFound(err, "source video")
}

// DeleteProjectVideo forgets a project's source video (its blobs stay, as a source's
// do). A proxy job still running for it finds the row gone and writes nothing.
func (s *Store) DeleteProjectVideo(ctx context.Context, projectID int64) error {
	return s.db.WithContext(ctx).Exec(`DELETE FROM project_videos WHERE project_id = ?`, projectID).Error
}

// StartProxy marks the proxy of the video videoSHA of a project as being made, by its
// attempt-th attempt. It reports false when the project's video is another one now
// (replaced or removed since the job was queued).
func (s *Store) StartProxy(ctx context.Context, projectID int64, videoSHA string, attempt int) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`UPDATE project_videos SET state = 'running', progress = 0, attempts = ?
		WHERE project_id = ? AND video_sha256 = ?`, attempt, projectID, videoSHA)
	return res.RowsAffected == 1, res.Error
}

// ProxyProgress records how far the proxy of videoSHA is, in percent.
func (s *Store) ProxyProgress(ctx context.Context, projectID int64, videoSHA string, progress int) error {
	return s.db.WithContext(ctx).Exec(`UPDATE project_videos SET progress = ? WHERE project_id = ? AND video_sha256 = ?
		AND state = 'running'`, min(max(progress, 0), 99), projectID, videoSHA).Error
}

// FinishProxy records the made proxy (its blob already stored).
func (s *Store) FinishProxy(ctx context.Context, projectID int64, videoSHA, proxySHA string) error {
	return s.db.WithContext(ctx).Exec(`UPDATE project_videos SET state = 'done', progress = 100, proxy_sha256 = ?,
		error = '', finished_at = now() WHERE project_id = ? AND video_sha256 = ?`, proxySHA, projectID, videoSHA).Error
}

// FailProxy records why an attempt at the proxy failed: final says no attempt will
// follow (the state becomes failed); otherwise it stays queued for the retry.
func (s *Store) FailProxy(ctx context.Context, projectID int64, videoSHA, msg string, final bool) error {
	state := VideoQueued
	if final {
		state = VideoFailed
	}
	return s.db.WithContext(ctx).Exec(`UPDATE project_videos SET state = ?, error = ?,
		finished_at = CASE WHEN ? THEN now() END WHERE project_id = ? AND video_sha256 = ?`,
		state, msg, final, projectID, videoSHA).Error
}
