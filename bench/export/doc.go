// Package export benchmarks the export job on a programme of the size a dubbing
// studio delivers: one hour, a thousand lines, four characters. The takes are made
// directly (48 kHz WAV blobs recorded through the store), so the figure is the
// export's own cost: reading the takes, assembling the mix and the stems, writing the
// subtitles, the manifest and the archive. See docs/benchmarks.md.
package export
