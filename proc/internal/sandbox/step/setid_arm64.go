//go:build linux

package step

import "golang.org/x/sys/unix"

// The calls that can give a file set-id bits, on arm64 and, for 32-bit
// programs, arm.
var setidArches = []setidArch{
	{arch: unix.AUDIT_ARCH_AARCH64, calls: []setidCall{
		{nr: 52, mode: 1, open: -1},  // fchmod
		{nr: 53, mode: 2, open: -1},  // fchmodat
		{nr: 452, mode: 2, open: -1}, // fchmodat2
		{nr: 33, mode: 2, open: -1},  // mknodat
		{nr: 56, mode: 3, open: 2},   // openat
		{nr: 437, mode: -1},          // openat2
		{nr: 425, mode: -1},          // io_uring_setup
		{nr: 261, others: true},      // prlimit64
		{nr: 435, mode: -1},          // clone3
	}},
	{arch: unix.AUDIT_ARCH_ARM, calls: []setidCall{
		{nr: 15, mode: 1, open: -1},  // chmod
		{nr: 94, mode: 1, open: -1},  // fchmod
		{nr: 333, mode: 2, open: -1}, // fchmodat
		{nr: 452, mode: 2, open: -1}, // fchmodat2
		{nr: 14, mode: 1, open: -1},  // mknod
		{nr: 324, mode: 2, open: -1}, // mknodat
		{nr: 8, mode: 1, open: -1},   // creat
		{nr: 5, mode: 2, open: 1},    // open
		{nr: 322, mode: 3, open: 2},  // openat
		{nr: 437, mode: -1},          // openat2
		{nr: 425, mode: -1},          // io_uring_setup
		{nr: 369, others: true},      // prlimit64
		{nr: 435, mode: -1},          // clone3
	}},
}
