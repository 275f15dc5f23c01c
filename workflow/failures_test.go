package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

func TestPermanentFailureFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	l := b.Lines(t)[0]
	empty := "   "
	_, err := b.Store.UpdateLine(ctx, b.Editor.ID, b.Project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision, Text: &empty})
	require.NoError(t, err)
	b.startWorker(t, workerOpts{})
	_, err = b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, time.Minute)
	require.Equal(t, 1, counts[studio.StateFailed])
	got := b.Lines(t)[0]
	require.Equal(t, 1, got.Attempts)
	require.Contains(t, got.LastError, "render.empty_text")

	// Fixed and retried from the failed list, it renders.
	fixed := "Now there is something to say."
	_, err = b.Store.UpdateLine(ctx, b.Editor.ID, b.Project.ID, l.ID, studio.LineEdit{BaseRevision: got.Revision, Text: &fixed})
	require.NoError(t, err)
	n, err := b.Pipeline.RetryFailed(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Zero(t, n, "the edit moved it back to draft")
	n, err = b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	counts = b.WaitSettled(t, time.Minute)
	require.Equal(t, 1, counts[studio.StateDone]+counts[studio.StateNeedsReview])
}
