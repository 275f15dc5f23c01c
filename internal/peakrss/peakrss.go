// Package peakrss measures the peak resident memory of this process over a piece of
// work, for benchmarks: Reset clears the kernel's high-water mark, Peak reads it back.
// It reads Linux's /proc/self (VmHWM, reset through clear_refs); elsewhere both
// report ErrUnsupported. Child processes (ffmpeg) are not counted.
package peakrss

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrUnsupported: the system has no per-process high-water mark to read or reset.
var ErrUnsupported = errors.New("peak resident memory is read on Linux only")

// Reset sets the high-water mark to the memory resident now.
func Reset() error {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return nil
}

// Peak is the most bytes resident since the start or the last Reset.
func Peak() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return vmHWM(status)
}

// vmHWM reads the "VmHWM:  1234 kB" line of a /proc/PID/status file.
func vmHWM(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 3 && string(f[0]) == "VmHWM:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("peakrss: VmHWM %q: %w", f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%w: no VmHWM line", ErrUnsupported)
}
