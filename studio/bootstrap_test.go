package studio_test

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"dubstudio/internal/testdb"
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

// TestCreateDatabase: a missing database is created, an existing one is left alone,
// and a user who may not create databases is told what to do.
func TestCreateDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := testdb.ServerURL()
	admin, err := pgx.Connect(ctx, server)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(ctx) })
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	name := "dubstudio_createdb_" + suffix
	t.Cleanup(func() {
		_, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		require.NoError(t, err)
	})
	u, err := url.Parse(server)
	require.NoError(t, err)
	u.Path = "/" + name

	created, err := studio.CreateDatabase(ctx, u.String())
	require.NoError(t, err)
	require.True(t, created)
	created, err = studio.CreateDatabase(ctx, u.String())
	require.NoError(t, err)
	require.False(t, created, "an existing database is left as it is")

	role := "dubstudio_nocreate_" + suffix
	_, err = admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN NOCREATEDB")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+role)
		require.NoError(t, err)
	})
	u.User = url.User(role)
	u.Path = "/" + name + "_x"
	_, err = studio.CreateDatabase(ctx, u.String())
	require.ErrorContains(t, err, "may not create it: create it as a PostgreSQL superuser (createdb")
	require.ErrorContains(t, err, name+"_x")
}
