package studio_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/i18n"
	"dubstudio/studio"
)

// putBlob stores content as a blob, as an upload or a render does.
func putBlob(t *testing.T, s *studio.Store, bs studio.BlobStore, content string) *studio.Blob {
	t.Helper()
	p := filepath.Join(t.TempDir(), "blob")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	b, err := s.PutBlob(context.Background(), bs, p, studio.Blob{Format: "wav", DurationMs: 1000, SampleRate: 48000, Channels: 1})
	require.NoError(t, err)
	return b
}

// addTake finishes a render of line l with a take whose audio is content.
func addTake(t *testing.T, b *testBundle, bs studio.BlobStore, l studio.Line, content string) *studio.Take {
	t.Helper()
	blob := putBlob(t, b.store, bs, content)
	tk := &studio.Take{LineID: l.ID, ProjectID: l.ProjectID, Revision: l.Revision, RenderSeq: l.RenderSeq, Engine: "test",
		SpokenText: l.Text, DurationMs: 1000, StretchRatio: 1, AudioSHA256: blob.SHA256}
	ok, err := b.store.FinishRender(context.Background(), tk)
	require.NoError(t, err)
	require.True(t, ok)
	return tk
}

func TestReviewHistoryKeepsWhoDidWhat(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := context.Background()
	bs := studio.BlobStore{Dir: t.TempDir()}
	lines, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	first := addTake(t, b, bs, lines[0], "take one")
	// A second render of the same line.
	n, err := b.store.QueueRenders(ctx, b.project.ID, studio.RenderChosen, []int64{lines[0].ID},
		func(_ context.Context, _ *sql.Tx, ls []studio.QueuedLine) ([]int64, error) {
			return make([]int64, len(ls)), nil
		})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	l, err := b.store.Line(ctx, b.project.ID, lines[0].ID)
	require.NoError(t, err)
	second := addTake(t, b, bs, *l, "take two")

	c, err := b.store.CommentTake(ctx, b.editor.ID, b.project.ID, first.ID, "  Too fast at the end.\r\nBreathe first.  ")
	require.NoError(t, err)
	require.Equal(t, "Too fast at the end.\nBreathe first.", c.Body)
	_, err = b.store.ApproveTakeAs(ctx, b.editor.ID, b.project.ID, second.ID)
	require.NoError(t, err)
	_, err = b.store.UseTakeAs(ctx, b.editor.ID, b.project.ID, first.ID)
	require.NoError(t, err)
	require.NoError(t, b.store.RecordReview(ctx, b.editor.ID, b.project.ID, l.ID, nil, studio.ReviewRegenerate))

	h, err := b.store.ReviewHistory(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, h, 4)
	var actions []studio.ReviewAction
	for _, e := range h {
		actions = append(actions, e.Action)
		require.Equal(t, b.editor.Name(), e.UserName)
		require.Equal(t, b.editor.ID, *e.UserID)
		require.False(t, e.CreatedAt.IsZero())
	}
	require.Equal(t, []studio.ReviewAction{studio.ReviewComment, studio.ReviewApprove, studio.ReviewUse, studio.ReviewRegenerate}, actions)
	require.Equal(t, first.ID, *h[0].TakeID)
	require.Equal(t, second.ID, *h[1].TakeID)
	require.Nil(t, h[3].TakeID)

	// Going back to the first take cleared the approval of the second.
	l, err = b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, first.ID, *l.CurrentTakeID)
	require.Nil(t, l.ApprovedTakeID)

	other, err := b.store.ReviewHistory(ctx, b.project.ID, lines[1].ID)
	require.NoError(t, err)
	require.Empty(t, other)
}

func TestCommentIsValidated(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	bs := studio.BlobStore{Dir: t.TempDir()}
	lines, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	tk := addTake(t, b, bs, lines[0], "take")
	for _, body := range []string{"", "   \n ", string(make([]rune, studio.MaxCommentRunes+1))} {
		_, err := b.store.CommentTake(ctx, b.editor.ID, b.project.ID, tk.ID, body)
		var fe studio.FieldsError
		require.ErrorAs(t, err, &fe)
		require.ErrorIs(t, err, studio.ErrInvalid)
		require.Contains(t, fe, "comment")
	}
	// A take of another project is not found.
	other := setup(t, 0)
	_, err = other.store.CommentTake(ctx, b.editor.ID, b.project.ID+1000, tk.ID, "hello")
	require.ErrorIs(t, err, studio.ErrNotFound)
}

func TestLinePlaceAndFirstLineToReview(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	ctx := context.Background()
	bs := studio.BlobStore{Dir: t.TempDir()}
	lines, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)

	pl, err := b.store.LinePlace(ctx, b.project.ID, lines[0].Idx)
	require.NoError(t, err)
	require.Nil(t, pl.Prev)
	require.Equal(t, lines[1].ID, *pl.Next)
	require.Equal(t, 1, pl.Position)
	require.Equal(t, 3, pl.Total)
	pl, err = b.store.LinePlace(ctx, b.project.ID, lines[2].Idx)
	require.NoError(t, err)
	require.Equal(t, lines[1].ID, *pl.Prev)
	require.Nil(t, pl.Next)
	require.Equal(t, 3, pl.Position)

	first, err := b.store.FirstLineToReview(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, lines[0].ID, first.ID, "nothing to review: the first line")
	tk := addTake(t, b, bs, lines[1], "second line")
	first, err = b.store.FirstLineToReview(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, lines[1].ID, first.ID, "the first line with a take waiting for approval")
	require.NoError(t, b.store.ApproveTake(ctx, b.editor.ID, b.project.ID, tk.ID))
	first, err = b.store.FirstLineToReview(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, lines[0].ID, first.ID)
}

func TestDerivedAudioIsMadeOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	bs := studio.BlobStore{Dir: t.TempDir()}
	made := 0
	build := func(_ context.Context, path string) (studio.Blob, error) {
		made++
		return studio.Blob{Format: "wav", DurationMs: 500, SampleRate: 48000, Channels: 1}, os.WriteFile(path, []byte("segment"), 0o644)
	}
	key := "segment:ab:1000:1500"
	one, err := b.store.DerivedAudio(ctx, bs, key, build)
	require.NoError(t, err)
	two, err := b.store.DerivedAudio(ctx, bs, key, build)
	require.NoError(t, err)
	require.Equal(t, 1, made)
	require.Equal(t, one.SHA256, two.SHA256)
	require.Equal(t, 500, two.DurationMs)

	// The file lost (another host's disk, a cleanup): made again.
	p, err := bs.Path(one.SHA256)
	require.NoError(t, err)
	require.NoError(t, os.Remove(p))
	_, err = b.store.DerivedAudio(ctx, bs, key, build)
	require.NoError(t, err)
	require.Equal(t, 2, made)
	require.FileExists(t, p)

	// A failure stores nothing and leaves no temporary file.
	boom := errors.New("ffmpeg failed")
	_, err = b.store.DerivedAudio(ctx, bs, "other", func(context.Context, string) (studio.Blob, error) { return studio.Blob{}, boom })
	require.ErrorIs(t, err, boom)
	left, _ := filepath.Glob(filepath.Join(bs.Dir, ".derived-*"))
	require.Empty(t, left)

}

func TestSourceEmotion(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	bs := studio.BlobStore{Dir: t.TempDir()}
	lines, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	l := lines[0]

	// Without source audio there is nothing to follow.
	_, err = b.store.SetLineSourceEmotion(ctx, b.editor.ID, b.project.ID, l.ID, l.Revision, 0.8)
	require.ErrorIs(t, err, studio.ErrInvalid)
	_, err = b.store.ProjectSource(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound)

	blob := putBlob(t, b.store, bs, "the programme")
	require.NoError(t, b.store.SetProjectSource(ctx, studio.ProjectSource{ProjectID: b.project.ID, AudioSHA256: blob.SHA256,
		FileName: "../../episode 7.mp4", DurationMs: 60000, Channels: 2, UploadedBy: &b.editor.ID}))
	src, err := b.store.ProjectSource(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, "../../episode 7.mp4", src.FileName, "kept for display only")

	saved, err := b.store.SetLineSourceEmotion(ctx, b.editor.ID, b.project.ID, l.ID, l.Revision, 0.7)
	require.NoError(t, err)
	require.True(t, saved.Emotion.FromSource())
	require.Equal(t, studio.SourceEmotion(l.StartMs, l.EndMs, 0.7), *saved.Emotion)
	require.Equal(t, l.Revision+1, saved.Revision, "an edit like any other, with history")
	_, err = b.store.SetLineSourceEmotion(ctx, b.editor.ID, b.project.ID, l.ID, l.Revision, 0.7)
	var ce *studio.ConflictError
	require.ErrorAs(t, err, &ce, "a stale edit is refused")
	_, err = b.store.SetLineSourceEmotion(ctx, b.editor.ID, b.project.ID, l.ID, saved.Revision, 1.5)
	require.ErrorIs(t, err, studio.ErrInvalid)

	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	require.NoError(t, b.store.SetCharacterSourceEmotion(ctx, b.project.ID, chars[0].ID, 2000, 3500, 0.6))
	ch, err := b.store.Character(ctx, b.project.ID, chars[0].ID)
	require.NoError(t, err)
	require.Equal(t, studio.SourceEmotion(2000, 3500, 0.6), ch.Emotion)
	require.ErrorIs(t, b.store.SetCharacterSourceEmotion(ctx, b.project.ID, chars[0].ID+999, 0, 1, 0.5), studio.ErrNotFound)

	// A segment is cut into a blob of its own for each render: at most a line long
	// (MAX_LINE_SECONDS), and within the source; refused, nothing changed.
	hours := studio.SourceEmotion(0, 4*3600_000, 0.5)
	err = b.store.SetCharacterSourceEmotion(ctx, b.project.ID, chars[0].ID, hours.SourceStartMs, hours.SourceEndMs, 0.5)
	var ie *i18n.Error
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "emotion.source_too_long", ie.Key)
	require.Equal(t, []any{"14400", "60"}, ie.Args)
	require.ErrorIs(t, b.store.SetCharacterSourceEmotion(ctx, b.project.ID, chars[0].ID, -500, 1000, 0.5), studio.ErrInvalid)
	ch, err = b.store.Character(ctx, b.project.ID, chars[0].ID)
	require.NoError(t, err)
	require.Equal(t, studio.SourceEmotion(2000, 3500, 0.6), ch.Emotion)
	hp := &hours
	_, err = b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: saved.Revision, Emotion: &hp})
	var fe studio.FieldsError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "emotion.source_too_long", fe["emotion"].Key)
	err = b.store.UpdateCharacter(ctx, b.project.ID, chars[0].ID, studio.CharacterParams{Name: ch.Name, Color: ch.Color,
		PreviewVoice: ch.PreviewVoice, Emotion: hours})
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "emotion.source_too_long", fe["emotion"].Key)

	// Replacing the source keeps one row; removing it forgets it.
	other := putBlob(t, b.store, bs, "a new cut")
	require.NoError(t, b.store.SetProjectSource(ctx, studio.ProjectSource{ProjectID: b.project.ID, AudioSHA256: other.SHA256, DurationMs: 1, Channels: 1}))
	src, err = b.store.ProjectSource(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, other.SHA256, src.AudioSHA256)
	require.NoError(t, b.store.DeleteProjectSource(ctx, b.project.ID))
	_, err = b.store.ProjectSource(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound)
}
