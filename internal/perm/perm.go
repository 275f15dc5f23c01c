// Package perm holds the modes of the data files and directories that dubstudio
// creates under its data directory (blobs, takes, exports, uploads, caches): readable
// by the user the server runs as and by nobody else, since they hold the studio's
// unreleased audio and scripts.
package perm

import "io/fs"

// Dir is the mode of a data directory dubstudio creates.
const Dir fs.FileMode = 0o700

// File is the mode of a data file dubstudio creates.
const File fs.FileMode = 0o600
