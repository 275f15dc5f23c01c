package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestRendersQueuedBeforeArchivingFinish: archiving makes a project read-only for
// people (web.refuseArchived), not for the renders it had already asked for. Lines
// queued before the archiving render to the end, each with its take, and none is
// left queued, failed or stuck in a running state.
func TestRendersQueuedBeforeArchivingFinish(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	ctx := context.Background()
	n, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.NoError(t, b.Store.SetProjectArchived(ctx, b.Project.ID, true))

	b.startWorker(t, workerOpts{})
	counts := b.WaitSettled(t, 2*time.Minute)
	require.Equal(t, 4, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	for _, l := range b.Lines(t) {
		require.NotNil(t, l.CurrentTakeID, "line %d has its take", l.Idx)
		require.Empty(t, l.LastError, "line %d", l.Idx)
	}
	p, err := b.Store.Project(ctx, b.Project.ID)
	require.NoError(t, err)
	require.True(t, p.Archived(), "the renders did not restore the project")
}
