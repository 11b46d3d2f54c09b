package step

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// No set-id bits. A command owns what it makes, and may set the set-uid
// and set-gid bits on it with no capability at all: run by root, it
// could leave a set-uid root program in the workspace (or its $TMPDIR,
// while it runs) for any user of the machine to become root with, and
// the bit is on disk, so no mount option outside holds it. A seccomp
// filter on the calling thread refuses (EPERM) every way to give a file
// those bits: chmod, fchmod, fchmodat(2) and mknod(at) with them in the
// mode, and open, openat and creat that create a file with them. openat2
// (whose mode is in a struct the filter cannot read) and io_uring (whose
// opens it cannot see) are refused with ENOSYS, on which programs fall
// back to openat and plain system calls. Filtered for the compatibility
// ABI too (i386 on amd64, arm on arm64); x32 is refused whole.
//
// The same filter refuses clone3 (ENOSYS, on which libc and Go fall back
// to clone): with CLONE_INTO_CGROUP and a descriptor of any cgroup
// directory, opened read-only on a read-only mount, it starts a process
// in that cgroup, which the kernel allows a writer of its cgroup.procs
// (an outsider's finding: a root command, sandboxed or not, left its
// task's cgroup, and its limits, for the root one). ContainFilter is
// that part alone, for the root fence.

// setidFilter lists, per system call number, how to judge it.
type setidCall struct {
	nr   uint32
	mode int // argument holding the mode; -1: refused whole (ENOSYS)
	open int // argument holding the open flags, when it creates only with O_CREAT or O_TMPFILE; -1 else
	// others: prlimit64, refused (EPERM) when it would set the limits of
	// another process (a pid, not 0, and new limits given). A command
	// lowered its forker's descriptors to 3, which broke every sandboxed
	// start after, or a supervisor's CPU time to 0, which killed it and
	// every session's work (an outsider's finding); reading them stays.
	others bool
}

// setidArch is one ABI's calls, under its audit architecture.
type setidArch struct {
	arch  uint32
	calls []setidCall
	x32   bool // refuse system calls with the x32 bit (0x40000000)
}

const (
	setidBits   = 0o6000
	createFlags = 0x40 | 0x400000 // O_CREAT, __O_TMPFILE
)

// SetIDFenced says whether this build filters set-id bits on this
// architecture (amd64, arm64).
func SetIDFenced() bool { return len(setidArches) > 0 }

// noSetID refuses set-id bits to what the calling thread starts. It needs
// no_new_privs (Fence sets it); without a filter for this architecture
// it does nothing and says so.
func noSetID() error {
	if len(setidArches) == 0 {
		return nil
	}
	prog := setidProgram(setidArches)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}

// setidProgram assembles the filter: the architecture, then the call,
// then its mode (and flags) argument.
func setidProgram(arches []setidArch) []unix.SockFilter {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K

		offNR   = 0
		offArch = 4
		offArgs = 16 // args[i] at 16+8i; its low 32 bits first (little-endian)

		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(syscall.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(syscall.ENOSYS)
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
	}
	arg := func(i int) uint32 { return uint32(offArgs + 8*i) }

	prog := []unix.SockFilter{stmt(ldW, offArch)}
	for _, a := range arches {
		var block []unix.SockFilter
		block = append(block, stmt(ldW, offNR))
		if a.x32 {
			block = append(block, jump(jge, 0x40000000, 0, 1), stmt(ret, enosys))
		}
		for _, c := range a.calls {
			var check []unix.SockFilter
			switch {
			case c.others:
				check = []unix.SockFilter{
					stmt(ldW, arg(2)), jump(jeq, 0, 0, 2), // new limits: low word
					stmt(ldW, arg(2)+4), jump(jeq, 0, 3, 0), // and high: none given, allow
					stmt(ldW, arg(0)), jump(jeq, 0, 1, 0), // pid 0: its own
					stmt(ret, eperm), stmt(ret, allow)}
			case c.mode < 0:
				check = []unix.SockFilter{stmt(ret, enosys)}
			case c.open < 0:
				check = []unix.SockFilter{stmt(ldW, arg(c.mode)), jump(jset, setidBits, 0, 1), stmt(ret, eperm), stmt(ret, allow)}
			default:
				check = []unix.SockFilter{stmt(ldW, arg(c.open)), jump(jset, createFlags, 0, 3),
					stmt(ldW, arg(c.mode)), jump(jset, setidBits, 0, 1), stmt(ret, eperm), stmt(ret, allow)}
			}
			block = append(block, jump(jeq, c.nr, 0, uint8(len(check))))
			block = append(block, check...)
		}
		block = append(block, stmt(ret, allow))
		prog = append(prog, jump(jeq, a.arch, 0, uint8(len(block))))
		prog = append(prog, block...)
	}
	return append(prog, stmt(ret, allow))
}

// ContainFilter is the root fence's seccomp program: clone3 refused
// (ENOSYS; see above), with x32 where the sandbox refuses it, every
// other call allowed; nil where this build has no filter for the
// architecture. Made once and never changed: a forked child may install
// it (seccomp, with CAP_SYS_ADMIN or no_new_privs).
func ContainFilter() *unix.SockFprog { return containFilter() }

var containFilter = sync.OnceValue(func() *unix.SockFprog {
	if len(setidArches) == 0 {
		return nil
	}
	var arches []setidArch
	for _, a := range setidArches {
		arches = append(arches, setidArch{arch: a.arch, x32: a.x32, calls: []setidCall{{nr: clone3NR, mode: -1}}})
	}
	// Every call it refuses is numbered clone3NR or above (the x32 ones
	// too), so a call below is allowed before the architecture is looked
	// at. Installing a filter, the kernel runs it over every call number
	// of both ABIs to learn which it always allows (and then lets them
	// through unfiltered); each root command installs this one, and the
	// three instructions that say so for most numbers, not six, take a
	// third off what the install costs it (about 34 µs to 23 µs here,
	// BenchmarkSpawnPaired).
	body := setidProgram(arches)
	prog := append([]unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // the call's number
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: clone3NR, Jt: 0, Jf: uint8(len(body) - 1)},
	}, body...) // body ends in allow
	return &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
})

// clone3NR is clone3's number, one for every architecture.
const clone3NR = 435

// containNoClone3 installs ContainFilter on the calling thread, with
// SECCOMP_FILTER_FLAG_SPEC_ALLOW: before Linux 5.16 a seccomp filter also
// turned the speculation mitigations on (spec_store_bypass_disable and
// spectre_v2_user defaulted to "seccomp"), which slows every program of
// the command; the filter is about clone3, not about code the command
// cannot otherwise run. (Before Linux 4.17, which lacks the flag,
// without it.)
func containNoClone3() error {
	f := ContainFilter()
	if f == nil {
		return nil
	}
	_, _, errno := syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_SPEC_ALLOW, uintptr(unsafe.Pointer(f)))
	if errno == syscall.EINVAL {
		_, _, errno = syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(f)))
	}
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}
