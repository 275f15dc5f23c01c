// Package workflowtest sets up what the tests of the render pipeline share, in
// package workflow and in the packages that run workers (fleet): a store on a fresh
// database, a pipeline over it, an editor and a project of lines.
package workflowtest

import (
	"context"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/workflow"
)

// Bundle is a project with lines and a pipeline to render them.
type Bundle struct {
	Store    *studio.Store
	Pipeline *workflow.Pipeline
	DataDir  string
	Editor   *studio.User
	Project  *studio.Project
}

// Setup makes a bundle of a project with n lines on a fresh database. It skips the
// test where espeak-ng, which renders the characters' reference voices, is missing.
func Setup(t testing.TB, n int) *Bundle {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed")
	}
	return On(t, studiotest.Store(t), n)
}

// On makes a bundle of a project with n lines on store.
func On(t testing.TB, store *studio.Store, n int) *Bundle {
	t.Helper()
	p, err := workflow.NewPipeline(store, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ed := studiotest.User(t, store, studio.RoleEditor)
	return &Bundle{Store: store, Pipeline: p, DataDir: t.TempDir(), Editor: ed, Project: studiotest.Project(t, store, ed, n)}
}

// WaitSettled waits until no line of the project is queued or running (see
// studiotest.WaitSettled).
func (b *Bundle) WaitSettled(t testing.TB, limit time.Duration) studio.StateCounts {
	t.Helper()
	return studiotest.WaitSettled(t, b.Store, b.Project.ID, limit)
}

// Lines returns the project's lines in order.
func (b *Bundle) Lines(t testing.TB) []studio.Line {
	t.Helper()
	ls, err := b.Store.AllLines(context.Background(), b.Project.ID)
	require.NoError(t, err)
	return ls
}
