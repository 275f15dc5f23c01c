package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteReady(t *testing.T) {
	t.Parallel()
	var first strings.Builder
	require.NoError(t, writeReady(&first, readyInfo{BaseURL: "http://127.0.0.1:8080", DemoProject: 3, Admin: "admin",
		Password: "s3cret", DatabaseURL: "postgres://dub:pw@db:5432/dubstudio", Command: "./bin/dubstudio"}))
	require.Equal(t, `
  dubstudio is ready.
    Open:          http://127.0.0.1:8080/projects/3  (the demo project)
    User:          admin
    Password:      s3cret  (shown this once)
    New password:  DATABASE_URL='postgres://dub:xxxxx@db:5432/dubstudio' ./bin/dubstudio user reset-password admin
    Stop:          Ctrl+C

`, first.String())

	var later strings.Builder
	require.NoError(t, writeReady(&later, readyInfo{BaseURL: "http://127.0.0.1:8080", Admin: "admin",
		DatabaseURL: "postgres://root@127.0.0.1:5432/dubstudio?sslmode=disable", Command: "dubstudio"}))
	require.Contains(t, later.String(), "Open:          http://127.0.0.1:8080/projects\n", "no demo: the project list")
	require.NotContains(t, later.String(), "Password:", "the password is shown on the first run only")
	require.Contains(t, later.String(), "DATABASE_URL='postgres://root@127.0.0.1:5432/dubstudio?sslmode=disable' dubstudio user reset-password admin")
}
