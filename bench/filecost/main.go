//go:build unix

// Command filecost measures what the worker's file handling costs on a directory's
// file system, per file: writing a take as the fit does (audio.WriteBytesAtomic:
// a temporary file created, written, fsynced and renamed into place), and apart
// only creating an empty file. The pipeline creates two files per line (the engine's output and the
// fitted take), so on a file system where creating one costs a large share of a
// millisecond that alone bounds lines per second (docs/benchmarks.md, issue 3).
//
//	go run ./bench/filecost                 # under $TMPDIR
//	go run ./bench/filecost -dir /srv/dubstudio/data -n 2000
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"dubstudio/audio"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the file system to measure")
	n := flag.Int("n", 2000, "files per measurement")
	size := flag.Int("size", 144_000, "bytes per file (a 1.5 s take at 48 kHz is 144 KB)")
	flag.Parse()
	if err := run(*dir, *n, *size); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, n, size int) error {
	work, err := os.MkdirTemp(dir, "filecost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	fmt.Printf("%s: %d files of %d bytes\n", dir, n, size)
	measure("create empty", n, func(i int) error {
		f, err := os.OpenFile(filepath.Join(work, fmt.Sprintf("e%d", i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	})
	measure("a take, as the fit writes it", n, func(i int) error {
		return audio.WriteBytesAtomic(filepath.Join(work, fmt.Sprintf("t%d.wav", i)), data)
	})
	return nil
}

// measure runs op n times and prints the wall time and the CPU time (user and
// system, this process) per call.
func measure(label string, n int, op func(i int) error) {
	cpu0, start := cpuTime(), time.Now()
	for i := range n {
		if err := op(i); err != nil {
			log.Fatalf("%s: %v", label, err)
		}
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	fmt.Printf("  %-30s %7.1f µs wall, %7.1f µs CPU per file\n", label,
		float64(wall.Microseconds())/float64(n), float64(cpu.Microseconds())/float64(n))
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
