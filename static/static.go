// Package static embeds the web app's CSS, scripts and vendored front-end libraries
// (versions pinned in package.json and listed in vendor/VERSIONS), the favicon (drawn by
// favicon_gen.go) and a sample script for a new project, so the binary serves
// everything itself and works offline.
package static

import "embed"

// FS holds the files served under /static/, and favicon.ico, served at /favicon.ico.
//
//go:embed css js vendor samples favicon.ico
var FS embed.FS
