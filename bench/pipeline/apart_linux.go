package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsTopDir is FS_TOPDIR_FL of linux/fs.h (chattr +T), which golang.org/x/sys does not
// name.
const fsTopDir = 0x00020000

// placeApart marks dir as the top of a directory hierarchy for ext4's Orlov
// allocator (chattr +T): the directories created in it (the worker's blob store and
// scratch directory) then go to block groups of their own, with free inodes, rather
// than beside dir. Without it they share the block groups where the previous run's
// cleanup and the machine's builds under $TMPDIR just freed thousands of inodes, and
// on ext4 without a journal creating a file there costs 0.2-0.5 ms of CPU
// (docs/benchmarks.md), which is the file system's state, not the pipeline's cost. It
// reports whether the flag is set: file systems other than ext2/3/4 have none.
func placeApart(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return false
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsTopDir)) == nil
}
