package studio_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/migrations"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// Migration 0023's recount of audible_revision from line_history gives what the store
// itself computed (studio.Audible) for lines edited through it: notes, text, slot,
// emotion, duration lock, a split, a merge, a character assigned.
func TestAudibleRevisionMigrationAgreesWithTheStore(t *testing.T) {
	t.Parallel()
	b := setup(t, 6)
	ctx := context.Background()
	lines, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	edit := func(l studio.Line, e studio.LineEdit) *studio.Line {
		t.Helper()
		e.BaseRevision = l.Revision
		got, err := b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, e)
		require.NoError(t, err)
		return got
	}
	l0 := edit(lines[0], studio.LineEdit{Notes: ptr("breathe first")})
	l1 := edit(lines[1], studio.LineEdit{Text: ptr("Another text.")})
	edit(*l1, studio.LineEdit{Notes: ptr("louder")})
	l2 := edit(lines[2], studio.LineEdit{EndMs: ptr(lines[2].EndMs + 200)})
	l2 = edit(*l2, studio.LineEdit{Notes: ptr("slower")})
	edit(*l2, studio.LineEdit{DurationLock: ptr(false)})
	angry := &studio.Emotion{Mode: studio.EmotionText, Text: "angry"}
	l3 := edit(lines[3], studio.LineEdit{Emotion: &angry})
	edit(*l3, studio.LineEdit{Notes: ptr("again")})
	first, _, err := b.store.SplitLine(ctx, b.editor.ID, b.project.ID, lines[4].ID, lines[4].Revision, 4, 0)
	require.NoError(t, err)
	_, err = b.store.MergeLines(ctx, b.editor.ID, b.project.ID, first.ID, first.Revision)
	require.NoError(t, err)
	_, err = b.store.AssignCharacter(ctx, b.editor.ID, b.project.ID, []int64{lines[5].ID, l0.ID}, nil)
	require.NoError(t, err)

	want := audibleRevisions(t, b)
	require.Equal(t, 3, want[l0.ID], "notes (not audible), then its character taken away (audible)")
	require.Equal(t, 2, want[l1.ID], "text, then notes")
	studiotest.Exec(t, b.store, `UPDATE lines SET audible_revision = revision`) // as 0015 left them
	all, err := migrations.All()
	require.NoError(t, err)
	var recount string
	for _, m := range all {
		if m.Version == 23 {
			recount, _, _ = strings.Cut(m.SQL, "ALTER TABLE gpu_profiles")
		}
	}
	require.Contains(t, recount, "UPDATE lines")
	studiotest.Exec(t, b.store, recount)
	require.Equal(t, want, audibleRevisions(t, b))
}

func audibleRevisions(t *testing.T, b *testBundle) map[int64]int {
	t.Helper()
	ls, err := b.store.AllLines(context.Background(), b.project.ID)
	require.NoError(t, err)
	out := map[int64]int{}
	for _, l := range ls {
		out[l.ID] = l.AudibleRevision
	}
	return out
}
