//go:build !linux && !darwin

package workflow

// freeBytes cannot tell here.
func freeBytes(string) (uint64, bool) { return 0, false }
