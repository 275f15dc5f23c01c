package studio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"gorm.io/gorm"

	"dubstudio/i18n"
	"dubstudio/internal/perm"
)

// ReviewAction is something an editor did to a line's takes while reviewing.
type ReviewAction string

const (
	ReviewComment    ReviewAction = "comment"
	ReviewApprove    ReviewAction = "approve"
	ReviewUse        ReviewAction = "use" // went back to an earlier take
	ReviewRegenerate ReviewAction = "regenerate"
)

// MaxCommentRunes bounds a comment on a take.
const MaxCommentRunes = 2000

// TakeReview is one entry of a line's review history: a comment on a take, or an
// approval, a return to an earlier take, a regeneration; who did it and when.
type TakeReview struct {
	ID        int64
	ProjectID int64
	LineID    int64
	TakeID    *int64
	UserID    *int64
	UserName  string `gorm:"->;-:migration"` // joined from users, read only
	Action    ReviewAction
	Body      string
	CreatedAt time.Time
}

// CommentTake adds a comment to a take and returns it.
func (s *Store) CommentTake(ctx context.Context, userID, projectID, takeID int64, body string) (*TakeReview, error) {
	body = strings.TrimSpace(strings.ReplaceAll(body, "\r\n", "\n"))
	if body == "" || len([]rune(body)) > MaxCommentRunes {
		return nil, FieldsError{"comment": i18n.Errorf(ErrInvalid, "review.bad_comment", MaxCommentRunes)}
	}
	t, err := s.Take(ctx, projectID, takeID)
	if err != nil {
		return nil, err
	}
	r := &TakeReview{ProjectID: projectID, LineID: t.LineID, TakeID: &t.ID, UserID: &userID, Action: ReviewComment, Body: body}
	if err := s.db.WithContext(ctx).Omit("ID", "CreatedAt").Create(r).Error; err != nil {
		return nil, fmt.Errorf("error saving comment: %w", err)
	}
	return r, nil
}

// RecordReview adds an approval, a return to an earlier take or a regeneration to a
// line's review history. takeID is nil for a regeneration.
func (s *Store) RecordReview(ctx context.Context, userID, projectID, lineID int64, takeID *int64, action ReviewAction) error {
	switch action {
	case ReviewApprove, ReviewUse, ReviewRegenerate:
	default:
		return fmt.Errorf("review action %q: %w", action, ErrInvalid)
	}
	r := &TakeReview{ProjectID: projectID, LineID: lineID, TakeID: takeID, UserID: &userID, Action: action}
	if err := s.db.WithContext(ctx).Omit("ID", "CreatedAt").Create(r).Error; err != nil {
		return fmt.Errorf("error recording review: %w", err)
	}
	return nil
}

// ApproveTakeAs approves a take (ApproveTake) and records who did it in the line's
// review history.
func (s *Store) ApproveTakeAs(ctx context.Context, userID, projectID, takeID int64) (*Take, error) {
	t, err := s.Take(ctx, projectID, takeID)
	if err != nil {
		return nil, err
	}
	if err := s.ApproveTake(ctx, userID, projectID, takeID); err != nil {
		return nil, err
	}
	return t, s.RecordReview(ctx, userID, projectID, t.LineID, &t.ID, ReviewApprove)
}

// UseTakeAs goes back to an earlier take (UseTake) and records it in the line's
// review history.
func (s *Store) UseTakeAs(ctx context.Context, userID, projectID, takeID int64) (*Take, error) {
	t, err := s.Take(ctx, projectID, takeID)
	if err != nil {
		return nil, err
	}
	if err := s.UseTake(ctx, projectID, takeID); err != nil {
		return nil, err
	}
	return t, s.RecordReview(ctx, userID, projectID, t.LineID, &t.ID, ReviewUse)
}

// ReviewHistory returns a line's review history, oldest first, with user names.
func (s *Store) ReviewHistory(ctx context.Context, projectID, lineID int64) ([]TakeReview, error) {
	var rs []TakeReview
	err := s.db.WithContext(ctx).Raw(`SELECT r.*, coalesce(nullif(u.display_name, ''), u.username, '') AS user_name
		FROM take_reviews r LEFT JOIN users u ON u.id = r.user_id
		WHERE r.project_id = ? AND r.line_id = ? ORDER BY r.id`, projectID, lineID).Scan(&rs).Error
	return rs, err
}

// LinePlace is where a line stands in its project's script.
type LinePlace struct {
	Prev, Next *int64 // the lines before and after it in script order; nil at either end
	Position   int    // 1-based
	Total      int
}

// LinePlace returns where the line at idx stands in the project's script.
func (s *Store) LinePlace(ctx context.Context, projectID int64, idx int) (LinePlace, error) {
	var pl LinePlace
	err := s.db.WithContext(ctx).Raw(`SELECT
		(SELECT id FROM lines WHERE project_id = ? AND idx < ? ORDER BY idx DESC LIMIT 1) AS prev,
		(SELECT id FROM lines WHERE project_id = ? AND idx > ? ORDER BY idx LIMIT 1) AS next,
		(SELECT count(*) FROM lines WHERE project_id = ? AND idx <= ?) AS position,
		(SELECT count(*) FROM lines WHERE project_id = ?) AS total`,
		projectID, idx, projectID, idx, projectID, idx, projectID).Scan(&pl).Error
	return pl, err
}

// FirstLineToReview returns the first line, in script order, that has a take waiting
// for approval (a current take that is not the approved one), or else the first
// line of the project.
func (s *Store) FirstLineToReview(ctx context.Context, projectID int64) (*Line, error) {
	var l Line
	err := s.db.WithContext(ctx).Where("project_id = ?", projectID).
		Order("(current_take_id IS NULL OR current_take_id IS NOT DISTINCT FROM approved_take_id), idx").First(&l).Error
	return &l, notFound(err, "line")
}

// ProjectSource is a project's original performance: the audio of the programme
// being dubbed, as a 48 kHz WAV blob.
type ProjectSource struct {
	ProjectID   int64  `gorm:"primaryKey"`
	AudioSHA256 string `gorm:"column:audio_sha256"`
	FileName    string // the uploaded file's name, for display only
	DurationMs  int
	Channels    int
	UploadedBy  *int64
	CreatedAt   time.Time
}

// SetProjectSource records (or replaces) a project's source audio.
func (s *Store) SetProjectSource(ctx context.Context, src ProjectSource) error {
	return s.db.WithContext(ctx).Exec(`INSERT INTO project_sources (project_id, audio_sha256, file_name, duration_ms, channels, uploaded_by)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (project_id) DO UPDATE SET audio_sha256 = excluded.audio_sha256,
		file_name = excluded.file_name, duration_ms = excluded.duration_ms, channels = excluded.channels,
		uploaded_by = excluded.uploaded_by, created_at = now()`,
		src.ProjectID, src.AudioSHA256, src.FileName, src.DurationMs, src.Channels, src.UploadedBy).Error
}

// ProjectSource returns a project's source audio; ErrNotFound when it has none.
func (s *Store) ProjectSource(ctx context.Context, projectID int64) (*ProjectSource, error) {
	var src ProjectSource
	err := s.db.WithContext(ctx).Where("project_id = ?", projectID).First(&src).Error
	return &src, notFound(err, "source audio")
}

// DeleteProjectSource forgets a project's source audio (the blob stays: takes or
// other projects may share it).
func (s *Store) DeleteProjectSource(ctx context.Context, projectID int64) error {
	return s.db.WithContext(ctx).Exec(`DELETE FROM project_sources WHERE project_id = ?`, projectID).Error
}

// MakeAudioFunc writes derived audio to path and describes it.
type MakeAudioFunc func(ctx context.Context, path string) (Blob, error)

// DerivedAudio returns the blob cached under key, making it with build (into a
// temporary file next to the blobs, then stored like any blob) when it is not cached
// or its file is gone. Two callers making the same audio at once store one blob.
func (s *Store) DerivedAudio(ctx context.Context, bs BlobStore, key string, build MakeAudioFunc) (*Blob, error) {
	var sums []string
	if err := s.db.WithContext(ctx).Raw(`SELECT sha256 FROM derived_audio WHERE key = ?`, key).Scan(&sums).Error; err != nil {
		return nil, err
	}
	if len(sums) == 1 {
		if p, err := bs.Path(sums[0]); err == nil {
			// Touched, not only found: the blob collector leaves a file used within
			// its grace alone (CollectBlobs), and one it has moved aside is made again.
			now := time.Now()
			if err := os.Chtimes(p, now, now); err == nil {
				return s.Blob(ctx, sums[0])
			}
		}
	}
	if err := os.MkdirAll(bs.Dir, perm.Dir); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(bs.Dir, ".derived-*.wav")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp) // gone already once stored
	meta, err := build(ctx, tmp)
	if err != nil {
		return nil, err
	}
	blob, err := s.PutBlob(ctx, bs, tmp, meta)
	if err != nil {
		return nil, err
	}
	err = s.db.WithContext(ctx).Exec(`INSERT INTO derived_audio (key, sha256) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET sha256 = excluded.sha256, created_at = now()`, key, blob.SHA256).Error
	if err != nil {
		return nil, fmt.Errorf("error caching derived audio: %w", err)
	}
	return blob, nil
}

// SourceEmotion is an emotion that takes the project's source audio between startMs
// and endMs as the emotion reference (IndexTTS-2's emotion audio prompt), with weight.
func SourceEmotion(startMs, endMs int, weight float64) Emotion {
	return Emotion{Mode: EmotionAudio, SourceStartMs: startMs, SourceEndMs: endMs, Weight: weight}
}

// FromSource reports whether e takes its emotion from the project's source audio.
func (e Emotion) FromSource() bool {
	return e.Mode == EmotionAudio && e.AudioSHA256 == "" && e.SourceEndMs > e.SourceStartMs
}

// SetLineSourceEmotion makes a line's own segment of the source audio its emotion
// reference, as an edit of the line at baseRevision (with history; a stale edit is a
// *ConflictError). The project must have source audio.
func (s *Store) SetLineSourceEmotion(ctx context.Context, userID, projectID, lineID int64, baseRevision int, weight float64) (*Line, error) {
	if _, err := s.ProjectSource(ctx, projectID); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, i18n.Errorf(ErrInvalid, "source.missing")
		}
		return nil, err
	}
	l, err := s.Line(ctx, projectID, lineID)
	if err != nil {
		return nil, err
	}
	if l.DurationMs() <= 0 {
		return nil, i18n.Errorf(ErrInvalid, "source.no_segment")
	}
	e := SourceEmotion(l.StartMs, l.EndMs, weight)
	if err := e.Validate(); err != nil {
		return nil, err
	}
	ep := &e
	return s.UpdateLine(ctx, userID, projectID, lineID, LineEdit{BaseRevision: baseRevision, Emotion: &ep})
}

// SetCharacterSourceEmotion makes a segment of the source audio (a line's, typically)
// a character's default emotion reference.
func (s *Store) SetCharacterSourceEmotion(ctx context.Context, projectID, characterID int64, startMs, endMs int, weight float64) error {
	if _, err := s.ProjectSource(ctx, projectID); err != nil {
		if errors.Is(err, ErrNotFound) {
			return i18n.Errorf(ErrInvalid, "source.missing")
		}
		return err
	}
	e := SourceEmotion(startMs, endMs, weight)
	if err := s.Limits.checkEmotion(e); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Character{}).Where("project_id = ? AND id = ?", projectID, characterID).
			Updates(map[string]any{"emotion": e, "updated_at": time.Now()})
		if res.Error == nil && res.RowsAffected == 0 {
			return fmt.Errorf("character %d: %w", characterID, ErrNotFound)
		}
		return res.Error
	})
}
