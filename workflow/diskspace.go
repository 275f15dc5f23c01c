package workflow

// Some engines do not report a full disk: espeak-ng exits 0 having written nothing or
// a cut-off file, and a model host's error is only text. So the worker checks the
// space left in its data directory itself, before a synthesis and after it.

// minFreeBytes is the space under which an engine's output may have been cut short.
const minFreeBytes = 64 << 10

// takeBytes is what a line of secs seconds needs on disk: the engine's output (at
// most 48 kHz, 16-bit) and the fitted take (48 kHz, 16-bit), with some margin.
func takeBytes(secs float64) uint64 {
	return uint64(1.25*secs*48000*2)*2 + minFreeBytes
}

// hasSpace reports whether dir's file system has n bytes free; true when that cannot
// be told.
func hasSpace(dir string, n uint64) bool {
	free, ok := freeBytes(dir)
	return !ok || free >= n
}
