package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// fileFree returns the space left to unprivileged writers on f's file
// system, and its size; ok false if the file system does not say.
func fileFree(f *os.File) (avail, size int64, ok bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var st unix.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil || serr != nil {
		return 0, 0, false
	}
	bs := uint64(st.Bsize)
	if bs == 0 || st.Blocks == 0 {
		return 0, 0, false // a pseudo file system
	}
	return int64(min(st.Bavail*bs, 1<<62)), int64(min(st.Blocks*bs, 1<<62)), true
}
