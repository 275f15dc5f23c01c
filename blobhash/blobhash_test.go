package blobhash_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/blobhash"
)

func TestFileAndBytesName(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "a.wav")
	require.NoError(t, os.WriteFile(p, []byte("abc"), 0o600))
	// The SHA-256 of "abc".
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	sum, err := blobhash.File(p)
	require.NoError(t, err)
	require.Equal(t, want, sum)
	sum, n, err := blobhash.FileSize(p)
	require.NoError(t, err)
	require.Equal(t, want, sum)
	require.EqualValues(t, 3, n)
	require.Equal(t, want, blobhash.Bytes([]byte("abc")))
	_, err = blobhash.File(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
}
