package contain

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setMark puts m on process pid (which must not have forked yet, or the
// forks are found by the environment marker). Failure is not fatal: the
// process group and the environment marker still hold.
func setMark(pid int, m mark) error {
	lim := unix.Rlimit{Cur: uint64(m), Max: unix.RLIM_INFINITY}
	return unix.Prlimit(pid, unix.RLIMIT_RTTIME, &lim, nil)
}

// clearOwnMark gives the calling process an unmarked RLIMIT_RTTIME, so
// that a keeper started by a host that itself runs inside someone's task
// is not killed with that task before it has done its own work.
func clearOwnMark() {
	lim := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	unix.Prlimit(0, unix.RLIMIT_RTTIME, &lim, nil)
}

// scanner reads /proc to find marked processes. Its buffers are reused
// between scans; it is not safe for concurrent use.
type scanner struct {
	self int // this process, never a match
	skip int // another pid that never matches: a leader known to have exited
	buf  []byte
}

func newScanner() *scanner { return &scanner{self: os.Getpid(), buf: make([]byte, 4<<10)} }

// match says whether a process's mark matches.
type match func(mark) bool

// exact matches one Process's mark; ofHost matches every mark of one host.
func exact(m mark) match       { return func(x mark) bool { return x == m } }
func ofHost(host uint64) match { return func(x mark) bool { return x.host() == host } }

// each calls f with the pid of every process on the machine but this one,
// reading /proc's entries with one reused buffer.
func (s *scanner) each(f func(pid int)) error {
	fd, err := syscall.Open("/proc", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var buf [8 << 10]byte
	for {
		n, err := syscall.ReadDirent(fd, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for b := buf[:n]; len(b) >= direntName; {
			reclen := int(binary.NativeEndian.Uint16(b[direntReclen:]))
			if reclen < direntName || reclen > len(b) {
				return errors.New("proc: malformed directory entry in /proc")
			}
			if pid := atoiName(b[direntName:reclen]); pid > 0 && pid != s.self && pid != s.skip {
				f(pid)
			}
			b = b[reclen:]
		}
	}
}

// Offsets in struct linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen
// (2), d_type (1), then the name, NUL-terminated.
const (
	direntReclen = 16
	direntName   = 19
)

// atoiName returns the number a NUL-terminated name spells, or 0 if it is
// not all digits (or overflows a pid).
func atoiName(b []byte) int {
	pid := 0
	for i, c := range b {
		if c == 0 {
			if i == 0 {
				return 0
			}
			break
		}
		if c < '0' || c > '9' || pid > 1<<30 {
			return 0
		}
		pid = pid*10 + int(c-'0')
	}
	return pid
}

// scan calls f with the pid of every live (not zombie) process whose mark
// matches. deep also reads the environment of processes whose limit does
// not match, to find the few that reset it; that costs a read of every
// other process's environment, so only the paths that kill do it.
func (s *scanner) scan(want match, deep bool, f func(pid int)) error {
	return s.each(func(pid int) {
		if s.matches(pid, want, deep) {
			f(pid)
		}
	})
}

// matches reads pid's mark and its state. A process whose limit is a
// host mark (forked by a leader before the leader got its own mark; see
// hostOnly) is matched by the mark in its environment, and given it as its
// limit, so that the next look is cheap. deep reads the environment of
// every process whose limit does not match.
func (s *scanner) matches(pid int, want match, deep bool) bool {
	m, ok := s.markOf(pid)
	if !(ok && want(m)) && (deep || ok && m.hostOnly()) {
		em, eok := s.environMark(pid)
		if !eok || !want(em) {
			return false
		}
		if ok && m.hostOnly() {
			setMark(pid, em)
		}
		m, ok = em, true
	}
	return ok && want(m) && !s.zombie(pid)
}

var rttimeLine = []byte("Max realtime timeout")

// markOf returns pid's mark, and false if it has none or is gone. It asks
// the kernel (prlimit, one system call) and reads /proc/PID/limits only
// for a process whose credentials differ from ours (a setuid program the
// command ran), which prlimit refuses and the file, readable by all, does
// not.
func (s *scanner) markOf(pid int) (mark, bool) {
	var lim unix.Rlimit
	err := unix.Prlimit(pid, unix.RLIMIT_RTTIME, nil, &lim)
	switch {
	case err == nil:
		return checkMark(lim.Cur)
	case !errors.Is(err, syscall.EPERM):
		return 0, false // gone
	}
	b := s.read("/proc/"+strconv.Itoa(pid)+"/limits", 4<<10)
	i := bytes.Index(b, rttimeLine)
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(b[i+len(rttimeLine):])
	if len(fields) == 0 {
		return 0, false
	}
	return parseMark(fields[0])
}

// environMax bounds how much of a process's environment is searched.
const environMax = 1 << 20

func (s *scanner) environMark(pid int) (mark, bool) {
	b := s.read("/proc/"+strconv.Itoa(pid)+"/environ", environMax)
	prefix := []byte(MarkEnv + "=")
	for len(b) > 0 {
		entry, rest, _ := bytes.Cut(b, []byte{0})
		if v, ok := bytes.CutPrefix(entry, prefix); ok {
			return parseMark(v)
		}
		b = rest
	}
	return 0, false
}

func parseMark(b []byte) (mark, bool) {
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, false // "unlimited"
	}
	return checkMark(v)
}

func checkMark(v uint64) (mark, bool) {
	if v>>(markHostBits+markSeqBits) != markMagic {
		return 0, false // unlimited, or someone else's value
	}
	return mark(v), true
}

// zombie says whether pid has exited and waits to be reaped (or is gone).
func (s *scanner) zombie(pid int) bool {
	b := s.read("/proc/"+strconv.Itoa(pid)+"/stat", 512)
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	state := b[i+2]
	return state == 'Z' || state == 'X'
}

// read reads up to max bytes of a /proc file into the scanner's buffer,
// growing it as needed; nil if the file cannot be read.
func (s *scanner) read(path string, max int) []byte {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	n := 0
	for {
		if n == len(s.buf) {
			if len(s.buf) >= max {
				return s.buf[:n]
			}
			s.buf = append(s.buf, make([]byte, len(s.buf))...)
		}
		k, err := syscall.Read(fd, s.buf[n:min(len(s.buf), max)])
		if err == syscall.EINTR {
			continue
		}
		if k <= 0 || err != nil {
			return s.buf[:n]
		}
		n += k
	}
}

// signalMarked sends sig to pid if it still carries a matching mark. The check is made through a pidfd
// opened first, so a pid reused by an unrelated process is never
// signalled. It reports whether the process was there to signal, and
// errors other than the process being gone (EPERM, for a process that
// changed its user).
func (s *scanner) signalMarked(pid int, want match, sig syscall.Signal) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, syscall.ENOSYS) {
		return s.signalUnverified(pid, want, sig)
	}
	if err != nil {
		return false, nil // gone
	}
	defer syscall.Close(fd)
	if !s.matches(pid, want, true) {
		return false, nil // gone, and the pid reused
	}
	err = unix.PidfdSendSignal(fd, sig, nil, 0)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.ESRCH):
		return false, nil
	default:
		return true, err
	}
}

// signalUnverified is signalMarked on kernels older than 5.3, which have
// no pidfds: the check and the signal are microseconds apart, and a pid
// is reused only after the whole pid space has been allocated since.
func (s *scanner) signalUnverified(pid int, want match, sig syscall.Signal) (bool, error) {
	if !s.matches(pid, want, true) {
		return false, nil
	}
	if err := syscall.Kill(pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return true, err
	}
	return true, nil
}

// killRound signals every live process that matches once, and returns how
// many it found and the last error other than "gone".
func (s *scanner) killRound(want match, deep bool, sig syscall.Signal) (int, error) {
	var pids []int
	err := s.scan(want, deep, func(pid int) { pids = append(pids, pid) })
	if err != nil {
		return 0, err
	}
	found, firstErr := 0, error(nil)
	for _, pid := range pids {
		ok, err := s.signalMarked(pid, want, sig)
		if ok {
			found++
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return found, firstErr
}

// killAll sends SIGKILL to every process that matches until a scan finds
// none, or until deadline; each round also finds what the last one's
// victims forked while dying. It returns how many processes it killed (the
// first round's count) and, if some could not be killed, an error.
func (s *scanner) killAll(want match, deep bool, deadline time.Time) (int, error) {
	first := -1
	for delay := 200 * time.Microsecond; ; delay = min(2*delay, 20*time.Millisecond) {
		n, err := s.killRound(want, deep, syscall.SIGKILL)
		if first < 0 {
			first = n
		}
		if n == 0 {
			return first, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errSurvivors{n}
			}
			return first, err
		}
		time.Sleep(delay) // SIGKILL is delivered; the dying need a moment to go
	}
}

// lastPID returns the pid most recently allocated on the machine (in this
// pid namespace), from /proc/loadavg. If it is still our leader's pid, no
// process can have been forked since the leader, so it has no
// descendants: the check that keeps a command that forks nothing as cheap
// as before.
func (s *scanner) lastPID() (int, bool) {
	b := s.read("/proc/loadavg", 256)
	i := bytes.LastIndexByte(bytes.TrimSpace(b), ' ')
	if i < 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[i+1:])))
	return pid, err == nil
}

// The containment calls of Process (see process.go); contain_other.go has
// their stand-ins for systems without /proc.

// markHost gives this process its host mark, once, before its first
// command is started (see hostOnly). A host that runs as another
// offstage's task replaces that task's mark with its own: its environment
// still names the outer task, where the outer host's scans look for it.
func markHost() { setMark(0, hostMark()) }

// signalMarks sends sig once to every live process carrying m, in its
// limit or its environment, and says how many it found.
func signalMarks(m mark, sig syscall.Signal) int {
	n, _ := newScanner().killRound(exact(m), true, sig)
	return n
}

// killMarks kills every process carrying m but leader (which has
// exited), until none is left or deadline, and says how many were alive
// at first. deep also looks for m in environments (see scan).
func killMarks(m mark, leader int, deep bool, deadline time.Time) (int, error) {
	s := newScanner()
	s.skip = leader
	return s.killAll(exact(m), deep, deadline)
}

// countMarks counts the live processes carrying m (by their limit only).
func countMarks(m mark) int {
	n := 0
	newScanner().scan(exact(m), false, func(int) { n++ })
	return n
}

// forkedSince says whether any process may have been created on the
// machine since pid was (false means pid can have no descendants), and
// the last pid allocated.
func forkedSince(pid int) (bool, int) {
	s := scanner{buf: make([]byte, 256)}
	last, ok := s.lastPID()
	if !ok || last == pid {
		return !ok, last
	}
	return !helpersOnly(pid, last), last
}

// Helpers are processes of this host's own that make threads while its
// commands run: the sandbox's forker makes the thread that fences the
// next command after forking the last one (the Go runtime decides when).
// A pid made after a leader that is a thread of a helper is no
// descendant of the leader, and its end need not look for leftovers
// through every process of the machine.
var helpers struct {
	mu   sync.Mutex
	pids []int // guarded by mu
}

// maxHelperPIDs bounds the pids after a leader checked one by one.
const maxHelperPIDs = 8

// Helper counts the threads of process pid (a child of this host that
// never starts a command's processes itself) as none of a command's
// descendants, until the returned function is called.
func Helper(pid int) (remove func()) {
	helpers.mu.Lock()
	helpers.pids = append(helpers.pids, pid)
	helpers.mu.Unlock()
	return func() {
		helpers.mu.Lock()
		defer helpers.mu.Unlock()
		if i := slices.Index(helpers.pids, pid); i >= 0 {
			helpers.pids = slices.Delete(helpers.pids, i, i+1)
		}
	}
}

// helpersOnly says whether every pid after leader up to last is a live
// thread of a helper (one that is gone may have been anything).
func helpersOnly(leader, last int) bool {
	if last <= leader || last-leader > maxHelperPIDs {
		return false
	}
	helpers.mu.Lock()
	pids := slices.Clone(helpers.pids)
	helpers.mu.Unlock()
	if len(pids) == 0 {
		return false
	}
	for p := leader + 1; p <= last; p++ {
		if !slices.ContainsFunc(pids, func(h int) bool {
			_, err := os.Stat("/proc/" + strconv.Itoa(h) + "/task/" + strconv.Itoa(p))
			return err == nil
		}) {
			return false
		}
	}
	return true
}

// The fork race of the marks: a shell exec'd before the host set its mark
// may fork at once, and its child inherits the host's mark instead of the
// command's (with env -i, nothing tells which command it is). So in
// ModeMarks a command is started traced (PTRACE_TRACEME right before its
// exec, SysProcAttr.Ptrace): the kernel stops it at the exec, before the
// first instruction of the shell runs; the host sets the mark and detaches.
// Its descendants can only ever carry the command's mark. ptrace requests
// must come from the thread that forked, so the goroutine is locked to it
// from the start until the detach.

// markTraced says whether commands are started traced; decided with the
// containment (detectTrace), false where ptrace is refused (Yama's
// ptrace_scope 3, a seccomp policy, a host itself under strace -f).
var markTraced bool

// detectTrace starts this binary traced, as a command would be, and lets
// it go; nil if that works.
func detectTrace() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"offstage-probe"}, &syscall.ProcAttr{
		Dir: "/",
		Env: []string{keeperEnv + "=" + probeArg},
		Sys: &syscall.SysProcAttr{Ptrace: true},
	})
	if err != nil {
		return err
	}
	err = detach(pid)
	var ws syscall.WaitStatus
	for {
		if _, werr := syscall.Wait4(pid, &ws, 0, nil); werr != syscall.EINTR {
			break
		}
	}
	return err
}

// traceStart prepares sys for a traced start, in ModeMarks where ptrace
// works, and says whether it did: then the caller's goroutine is locked
// to its thread until markStarted or untrace.
func traceStart(sys *syscall.SysProcAttr) bool {
	if !markTraced {
		return false
	}
	runtime.LockOSThread()
	sys.Ptrace = true
	return true
}

// untrace ends a traced start that failed.
func untrace() { runtime.UnlockOSThread() }

// markStarted marks a started leader; a traced one is then let go. A
// failure leaves the environment marker and the process group to hold the
// task together.
func markStarted(pid int, m mark, traced bool) error {
	err := setMark(pid, m)
	if traced {
		defer runtime.UnlockOSThread()
		if derr := detach(pid); err == nil {
			err = derr
		}
	}
	return err
}

// detach waits, without reaping, until the traced child pid stops at its
// exec (or exits), then lets it go.
func detach(pid int) error {
	const pPID = 1 // P_PID
	var info [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WSTOPPED|syscall.WNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		break
	}
	if err := syscall.PtraceDetach(pid); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("ptrace detach: %w", err)
	}
	return nil
}
