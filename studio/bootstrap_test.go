package studio_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// TestBootstrapOnAFreshInstallation: the first start makes an admin (with a password to
// print once) and the demo project; later starts make neither but still find the demo,
// until it is deleted.
func TestBootstrapOnAFreshInstallation(t *testing.T) {
	t.Parallel()
	store := studiotest.Store(t)
	ctx := context.Background()

	name, password, err := store.EnsureAdmin(ctx)
	require.NoError(t, err)
	require.Equal(t, "admin", name)
	require.NotEmpty(t, password)
	admin, err := store.UserByUsername(ctx, name)
	require.NoError(t, err)

	demo, err := store.EnsureDemoProject(ctx, admin.ID)
	require.NoError(t, err)
	require.NotNil(t, demo)
	page, err := store.Lines(ctx, demo.ID, studio.LineFilter{})
	require.NoError(t, err)
	require.EqualValues(t, 8, page.Total)

	_, password, err = store.EnsureAdmin(ctx)
	require.NoError(t, err)
	require.Empty(t, password, "a password is made once")
	again, err := store.EnsureDemoProject(ctx, admin.ID)
	require.NoError(t, err)
	require.Equal(t, demo.ID, again.ID, "later starts find the demo, not a second one")

	require.NoError(t, store.DeleteProject(ctx, demo.ID))
	gone, err := store.EnsureDemoProject(ctx, admin.ID)
	require.NoError(t, err)
	require.Nil(t, gone, "a deleted demo is not made again")
}
