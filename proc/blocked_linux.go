package proc

import (
	"bytes"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"unsafe"
)

// readSyscalls are the numbers of read and readv on this architecture, as
// the first field of /proc/PID/syscall shows them; none (so no kernel
// rule) on an architecture not listed.
var readSyscalls = map[string][]int64{
	"amd64":   {0, 19},
	"arm64":   {63, 65},
	"riscv64": {63, 65},
	"loong64": {63, 65},
	"386":     {3, 145},
	"arm":     {3, 145},
}

// devTTY is /dev/tty's device number (5, 0): a process that opened it to
// read the keyboard (less, more) reads its controlling terminal.
const devTTY = 5 << 8

// blockedReading reports whether one of the command's processes is asleep
// in read or readv on its input: with Config.Stdin, a descriptor that is
// the stdin pipe; with Config.TTY, a process of the terminal's foreground
// process group reading the terminal (descriptor 0, or /dev/tty opened
// again). It returns that process's name (/proc/PID/comm). It looks at
// /proc/PID/stat, /proc/PID/syscall and /proc/PID/fd of each process; where
// /proc/PID/syscall cannot be read (it needs ptrace access: we are the
// parent and the same user, so normally it can) it reports false, and the
// prompt-line rule alone applies.
func (p *Process) blockedReading() (string, bool) {
	reads := readSyscalls[runtime.GOARCH]
	if len(reads) == 0 || p.stdin == nil {
		return "", false
	}
	in, ok := p.inputID()
	if !ok {
		return "", false
	}
	for _, pid := range p.task.Pids() {
		if name, ok := readingInput(pid, in, reads); ok {
			return name, true
		}
	}
	return "", false
}

// input identifies the command's input: a pipe by device and inode, a
// terminal by its device number and foreground process group.
type input struct {
	tty      bool
	dev, ino uint64 // the pipe
	rdev     uint64 // the terminal
	fg       int    // the terminal's foreground process group
}

// inputID finds what the command's input is, from our end of it: the
// pipe's write end shares the read end's inode; the terminal's master
// says which terminal it drives (TIOCGPTN) and its foreground group
// (TIOCGPGRP). A terminal whose output waits on the master, not read by
// us yet (TIOCINQ), is not quiet: it is not identified, so nothing is
// marked until that output is taken.
func (p *Process) inputID() (input, bool) {
	rc, err := p.stdin.SyscallConn()
	if err != nil {
		return input{}, false
	}
	var in input
	ok := false
	cerr := rc.Control(func(fd uintptr) {
		if !p.cfg.TTY {
			var st syscall.Stat_t
			if syscall.Fstat(int(fd), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
				in, ok = input{dev: st.Dev, ino: st.Ino}, true
			}
			return
		}
		var n, pgrp, unread int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&unread))); e != 0 || unread > 0 {
			return // output we have not read yet: not quiet
		}
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
			return
		}
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); e != 0 {
			return
		}
		var st syscall.Stat_t
		if syscall.Stat("/dev/pts/"+strconv.Itoa(int(n)), &st) != nil {
			return
		}
		in, ok = input{tty: true, rdev: st.Rdev, fg: int(pgrp)}, true
	})
	return in, ok && cerr == nil
}

// readingInput reports whether process pid sleeps in one of the read
// syscalls on a descriptor that is the input in, and returns its name.
func readingInput(pid int, in input, reads []int64) (string, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	stat, err := os.ReadFile(dir + "stat")
	if err != nil {
		return "", false
	}
	// pid (comm) state ppid pgrp ...: comm may hold anything, so split
	// after its last ')'.
	lp, rp := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if lp < 0 || rp < lp {
		return "", false
	}
	f := bytes.Fields(stat[rp+1:])
	if len(f) < 3 || string(f[0]) != "S" {
		return "", false
	}
	if in.tty {
		if pgrp, err := strconv.Atoi(string(f[2])); err != nil || pgrp != in.fg {
			return "", false
		}
	}
	sc, err := os.ReadFile(dir + "syscall")
	if err != nil {
		return "", false // no ptrace access, or gone
	}
	// "nr arg1 arg2 ... sp pc" while blocked in a syscall; "running" or
	// "-1 sp pc" otherwise.
	sf := bytes.Fields(sc)
	if len(sf) < 2 {
		return "", false
	}
	nr, err := strconv.ParseInt(string(sf[0]), 10, 64)
	if err != nil || !slices.Contains(reads, nr) {
		return "", false
	}
	fd, err := strconv.ParseUint(string(bytes.TrimPrefix(sf[1], []byte("0x"))), 16, 31)
	if err != nil {
		return "", false
	}
	var st syscall.Stat_t
	if syscall.Stat(dir+"fd/"+strconv.FormatUint(fd, 10), &st) != nil {
		return "", false
	}
	switch {
	case !in.tty && st.Mode&syscall.S_IFMT == syscall.S_IFIFO && st.Dev == in.dev && st.Ino == in.ino:
	case in.tty && st.Mode&syscall.S_IFMT == syscall.S_IFCHR && (st.Rdev == in.rdev || st.Rdev == devTTY):
	default:
		return "", false
	}
	return string(stat[lp+1 : rp]), true
}
