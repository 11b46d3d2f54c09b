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
// prompt-line rule alone applies. The reader it returns also says how
// often that process had run so far, so that two looks can tell one long
// read from a process that reads often and works between its reads.
func (p *Process) blockedReading() (reader, bool) {
	reads := readSyscalls[runtime.GOARCH]
	if len(reads) == 0 || p.stdin == nil {
		return reader{}, false
	}
	in, ok := p.inputID()
	if !ok {
		return reader{}, false
	}
	for _, pid := range p.task.Pids() {
		if r, ok := readingInput(pid, in, reads); ok {
			return r, true
		}
	}
	return reader{}, false
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
// syscalls on a descriptor that is the input in, and returns it.
func readingInput(pid int, in input, reads []int64) (reader, bool) {
	r, ok := readingInputName(pid, in, reads)
	if !ok {
		return reader{}, false
	}
	r.pid = pid
	// How many times it was put on a CPU (schedstat's third field), where
	// the kernel counts it (CONFIG_SCHED_INFO); else its CPU time in
	// clock ticks, from stat.
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	if b, err := os.ReadFile(dir + "schedstat"); err == nil {
		if f := bytes.Fields(b); len(f) == 3 {
			r.ran, _ = strconv.ParseUint(string(f[2]), 10, 64)
			return r, true
		}
	}
	r.ran = r.ticks
	return r, true
}

// reader is a process found reading its input: its name, its pid, and
// how often it had run (see readingInput).
type reader struct {
	name  string
	pid   int
	ran   uint64
	ticks uint64 // its CPU time (utime + stime), in clock ticks
}

func readingInputName(pid int, in input, reads []int64) (reader, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	stat, err := os.ReadFile(dir + "stat")
	if err != nil {
		return reader{}, false
	}
	// pid (comm) state ppid pgrp ...: comm may hold anything, so split
	// after its last ')'.
	lp, rp := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if lp < 0 || rp < lp {
		return reader{}, false
	}
	f := bytes.Fields(stat[rp+1:])
	if len(f) < 3 || string(f[0]) != "S" {
		return reader{}, false
	}
	if in.tty {
		if pgrp, err := strconv.Atoi(string(f[2])); err != nil || pgrp != in.fg {
			return reader{}, false
		}
	}
	sc, err := os.ReadFile(dir + "syscall")
	if err != nil {
		return reader{}, false // no ptrace access, or gone
	}
	// "nr arg1 arg2 ... sp pc" while blocked in a syscall; "running" or
	// "-1 sp pc" otherwise.
	sf := bytes.Fields(sc)
	if len(sf) < 2 {
		return reader{}, false
	}
	nr, err := strconv.ParseInt(string(sf[0]), 10, 64)
	if err != nil || !slices.Contains(reads, nr) {
		return reader{}, false
	}
	fd, err := strconv.ParseUint(string(bytes.TrimPrefix(sf[1], []byte("0x"))), 16, 31)
	if err != nil {
		return reader{}, false
	}
	var st syscall.Stat_t
	if syscall.Stat(dir+"fd/"+strconv.FormatUint(fd, 10), &st) != nil {
		return reader{}, false
	}
	switch {
	case !in.tty && st.Mode&syscall.S_IFMT == syscall.S_IFIFO && st.Dev == in.dev && st.Ino == in.ino:
	case in.tty && st.Mode&syscall.S_IFMT == syscall.S_IFCHR && (st.Rdev == in.rdev || st.Rdev == devTTY):
	default:
		return reader{}, false
	}
	r := reader{name: string(stat[lp+1 : rp])}
	if len(f) > 12 {
		utime, _ := strconv.ParseUint(string(f[11]), 10, 64)
		stime, _ := strconv.ParseUint(string(f[12]), 10, 64)
		r.ticks = utime + stime
	}
	return r, true
}
