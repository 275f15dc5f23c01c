package studio_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// TestBlobsBelongToTheirProjects: a character's reference voice and emotion audio and
// a project's source become audio of the project the moment they are set (migration
// 0012's triggers), so that MayHearBlob lets in the project's members and managers
// and no other editor; ProjectFor hides the project from that editor too.
func TestBlobsBelongToTheirProjects(t *testing.T) {
	t.Parallel()
	s := studiotest.Store(t)
	ctx := context.Background()
	member, outsider := studiotest.User(t, s, studio.RoleEditor), studiotest.User(t, s, studio.RoleEditor)
	manager := studiotest.User(t, s, studio.RoleManager)
	p := studiotest.Project(t, s, member, 2)
	chars, err := s.Characters(ctx, p.ID)
	require.NoError(t, err)
	blob := func(n int) string {
		sha := strings.Repeat(fmt.Sprintf("%x", n), 64)
		studiotest.Exec(t, s, `INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels)
			VALUES ($1, 1, 'wav', 1000, 48000, 1)`, sha)
		return sha
	}
	ref, emo, src, loose := blob(1), blob(2), blob(3), blob(4)
	require.NoError(t, s.SetCharacterReference(ctx, p.ID, chars[0].ID, ref, "ref.wav"))
	require.NoError(t, s.SetCharacterEmotionAudio(ctx, p.ID, chars[1].ID, emo, 0.8))
	require.NoError(t, s.SetProjectSource(ctx, studio.ProjectSource{ProjectID: p.ID, AudioSHA256: src, DurationMs: 1000, Channels: 1}))

	for _, sha := range []string{ref, emo, src, loose} {
		for _, u := range []*studio.User{member, outsider, manager} {
			ok, err := s.MayHearBlob(ctx, u, sha)
			require.NoError(t, err)
			require.Equal(t, sha != loose && u != outsider, ok, "%s hears %s", u.Username, sha[:4])
		}
	}
	_, err = s.ProjectFor(ctx, outsider, p.ID)
	require.ErrorIs(t, err, studio.ErrNotFound)
	_, err = s.ProjectFor(ctx, manager, p.ID)
	require.NoError(t, err)

	// Adding twice and removing a non-member change nothing; history keeps the rest.
	require.NoError(t, s.AddProjectMember(ctx, manager.ID, p.ID, outsider.ID))
	require.NoError(t, s.AddProjectMember(ctx, manager.ID, p.ID, outsider.ID))
	require.NoError(t, s.RemoveProjectMember(ctx, manager.ID, p.ID, manager.ID))
	ms, err := s.ProjectMembers(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	for _, m := range ms {
		want := member.Username
		if m.UserID == outsider.ID {
			want = manager.Username
		}
		require.Equal(t, want, m.AddedBy, m.Username)
	}
	h, err := s.ProjectMemberHistory(ctx, p.ID, 10)
	require.NoError(t, err)
	require.Len(t, h, 2, "the creator's add and the outsider's")
	ps, err := s.Projects(ctx, studio.ProjectsOpts{MemberID: outsider.ID})
	require.NoError(t, err)
	require.Len(t, ps, 1)
}
