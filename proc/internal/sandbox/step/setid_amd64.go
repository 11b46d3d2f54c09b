//go:build linux

package step

import "golang.org/x/sys/unix"

// The calls that can give a file set-id bits, on amd64 and, for 32-bit
// programs, i386.
var setidArches = []setidArch{
	{arch: unix.AUDIT_ARCH_X86_64, x32: true, calls: []setidCall{
		{nr: 90, mode: 1, open: -1},  // chmod
		{nr: 91, mode: 1, open: -1},  // fchmod
		{nr: 268, mode: 2, open: -1}, // fchmodat
		{nr: 452, mode: 2, open: -1}, // fchmodat2
		{nr: 133, mode: 1, open: -1}, // mknod
		{nr: 259, mode: 2, open: -1}, // mknodat
		{nr: 85, mode: 1, open: -1},  // creat
		{nr: 2, mode: 2, open: 1},    // open
		{nr: 257, mode: 3, open: 2},  // openat
		{nr: 437, mode: -1},          // openat2
		{nr: 425, mode: -1},          // io_uring_setup
		{nr: 302, others: true},      // prlimit64
		{nr: 435, mode: -1},          // clone3
	}},
	{arch: unix.AUDIT_ARCH_I386, calls: []setidCall{
		{nr: 15, mode: 1, open: -1},  // chmod
		{nr: 94, mode: 1, open: -1},  // fchmod
		{nr: 306, mode: 2, open: -1}, // fchmodat
		{nr: 452, mode: 2, open: -1}, // fchmodat2
		{nr: 14, mode: 1, open: -1},  // mknod
		{nr: 297, mode: 2, open: -1}, // mknodat
		{nr: 8, mode: 1, open: -1},   // creat
		{nr: 5, mode: 2, open: 1},    // open
		{nr: 295, mode: 3, open: 2},  // openat
		{nr: 437, mode: -1},          // openat2
		{nr: 425, mode: -1},          // io_uring_setup
		{nr: 340, others: true},      // prlimit64
		{nr: 435, mode: -1},          // clone3
	}},
}
