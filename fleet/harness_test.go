package fleet_test

import (
	"testing"

	"dubstudio/workflow/workflowtest"
)

// testBundle is a project with lines and a pipeline to render them, for the tests
// that run a worker over GPUs.
type testBundle struct{ *workflowtest.Bundle }

func setup(t *testing.T, lines int) *testBundle {
	t.Helper()
	return &testBundle{workflowtest.Setup(t, lines)}
}
