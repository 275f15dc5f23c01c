// Package static embeds the web app's CSS, scripts and vendored front-end libraries
// (versions pinned in package.json and listed in vendor/VERSIONS), so the binary serves
// everything itself and works offline.
package static

import "embed"

// FS holds the files served under /static/.
//
//go:embed css js vendor
var FS embed.FS
