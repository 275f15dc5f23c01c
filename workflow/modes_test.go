package workflow_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDataFileModes renders a scene and exports it, then checks that nothing under the
// data directory (blobs, takes, the export, the worker's scratch) is open to the
// group or to others: they hold the studio's unreleased audio and scripts. Checking
// only those bits keeps the test independent of the umask.
func TestDataFileModes(t *testing.T) {
	t.Parallel()
	b := renderScene(t)
	b.export(t, false)

	var blobs, zips int
	err := filepath.WalkDir(b.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == b.DataDir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.DataDir, path)
		require.Zero(t, info.Mode().Perm()&0o077, "%s is %v", rel, info.Mode())
		switch {
		case d.Type().IsRegular() && strings.HasPrefix(rel, "blobs"+string(filepath.Separator)):
			blobs++
		case strings.HasSuffix(rel, ".zip"):
			zips++
		}
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, blobs, "the render stored its takes as blobs")
	require.Equal(t, 1, zips, "the export is there")
}
