package step

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The forker. A host that is not root needs a user namespace for a
// sandboxed command's namespaces, and a process with threads cannot make
// one for itself: through the step, each command paid a second start of
// this whole binary in a new user namespace (6 to 7 ms as nobody on the
// project's machine, against 1 ms unsandboxed). The forker is the step
// started once per host, in a user namespace of its own, and kept: for
// each command it fences a thread of its own exactly as a root host does
// (namespaces, mounts, Landlock, capabilities, seccomp), forks the
// command from it and lets the thread end. The command is cloned with
// CLONE_PARENT: it is the host's child, not the forker's, so the host
// waits for it, and gets its status and resource usage, as for any
// command of its own. It starts behind the gate (see package sandbox),
// which the host opens once the forker's thread is gone and the
// command's mark is set.
//
// The host speaks to it over a unix stream socket, descriptor
// ForkerFD: a Request and its descriptors (SCM_RIGHTS), then a Reply;
// one at a time. At the end of the socket (the host is gone, or gave it
// up) the forker exits.

// Forker, as Env's value, makes the step the forker.
const Forker = "forker"

// ForkerFD is the forker's socket to its host.
const ForkerFD = 3

// Request is one command for the forker. Descriptor indices are into the
// descriptors sent with it.
type Request struct {
	Spec Spec     `json:"spec"` // WriteFDs: indices
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Files are the command's descriptors 0, 1, 2, ...: an index, or -1
	// for one closed.
	Files   []int `json:"files"`
	Setsid  bool  `json:"setsid,omitempty"`
	Setpgid bool  `json:"setpgid,omitempty"`
	Setctty bool  `json:"setctty,omitempty"` // descriptor 0 is its terminal
	// Ended lists earlier commands of this forker that have ended, by
	// pid: Reuse says that nothing of it was left when it ended (no
	// process), so that its network namespace may serve a later command.
	Ended []Ended `json:"ended,omitempty"`
}

// Ended is a command of the forker's that has ended.
type Ended struct {
	PID   int  `json:"pid"`
	Reuse bool `json:"reuse,omitempty"`
}

// Reply is the forker's answer: the command's pid, or why it did not
// start; both when it was forked and cannot be let run (the host kills
// and reaps it).
type Reply struct {
	PID int    `json:"pid,omitempty"`
	Err string `json:"err,omitempty"`
}

// Bounds on what the forker reads: a request as large as the kernel lets
// an exec carry (ARG_MAX is at most a quarter of the stack limit, 2 MiB
// by default), and a few descriptors.
const (
	MaxRequest = 8 << 20
	MaxFDs     = 64
)

// The network namespaces of the forker's commands, by pid, and those
// whose command left nothing in them (spares), which serve a later
// command with the network off as a root host's do (see package sandbox:
// making one costs the kernel most of a millisecond). Both bounded.
type forkerNets struct {
	byPID  map[int]int // pid → its namespace (open)
	spares []int
}

const (
	maxNets   = 64 // namespaces of running commands kept to be reused
	maxSpares = 4
)

// keep keeps the namespace of the command pid until the host says it
// has ended. News the host dropped (it keeps a bounded number between
// two requests) would leave one here for good: past maxNets another is
// given up, and a pid used again replaces its entry.
func (n *forkerNets) keep(pid, fd int) {
	if old, ok := n.byPID[pid]; ok {
		syscall.Close(old)
	} else if len(n.byPID) >= maxNets {
		for p, old := range n.byPID {
			syscall.Close(old)
			delete(n.byPID, p)
			break
		}
	}
	n.byPID[pid] = fd
}

// ended takes in the host's news of ended commands.
func (n *forkerNets) ended(es []Ended) {
	for _, e := range es {
		fd, ok := n.byPID[e.PID]
		if !ok {
			continue
		}
		delete(n.byPID, e.PID)
		if e.Reuse && len(n.spares) < maxSpares {
			n.spares = append(n.spares, fd)
		} else {
			syscall.Close(fd)
		}
	}
}

// enter moves the calling (locked) thread into a network namespace with
// loopback alone, a spare with no socket left in it or a new one, and
// returns it open (-1 where it cannot be kept). It runs on the fencing
// thread, and touches n.spares alone, which forkerMain does not while it
// runs.
func (n *forkerNets) enter() (int, error) {
	for len(n.spares) > 0 {
		fd := n.spares[len(n.spares)-1]
		n.spares = n.spares[:len(n.spares)-1]
		if err := unix.Setns(fd, syscall.CLONE_NEWNET); err == nil && NoSockets() {
			return fd, nil
		}
		syscall.Close(fd)
	}
	if err := NewNetwork(); err != nil {
		return -1, err
	}
	fd, err := syscall.Open("/proc/thread-self/ns/net", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil // used once, then
	}
	return fd, nil
}

// NoSockets says whether the calling thread's network namespace holds no
// socket at all, so that it may be used again. Its sockstat counts them,
// per namespace: "sockets: used N" every socket, of every family, and the
// TCP line's "tw N" those in TIME_WAIT. (Listing them, /proc/net/tcp,
// walks the host's whole table: milliseconds.) The forker and the host's
// fenced thread both ask it.
func NoSockets() bool {
	b, err := os.ReadFile("/proc/thread-self/net/sockstat")
	if err != nil {
		return false
	}
	used, tw := -1, -1
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "sockets:" && f[1] == "used":
			used, _ = strconv.Atoi(f[2])
		case len(f) >= 7 && f[0] == "TCP:" && f[5] == "tw":
			tw, _ = strconv.Atoi(f[6])
		}
	}
	return used == 0 && tw == 0
}

// forkerMain serves requests on ForkerFD until its end, and returns the
// exit code.
func forkerMain() int {
	// A descriptor inherited without close-on-exec (from whoever started
	// the host) reaches no command: the commands' own, 0 to KeepFDs-1,
	// are all set or closed at each fork.
	closeInherited()
	syscall.CloseOnExec(ForkerFD)
	nets := forkerNets{byPID: make(map[int]int)}
	next := newStandby(standbyPlan{net: true, mounts: true}, &nets) // the default policy's, here
	for {
		req, fds, err := readRequest(ForkerFD)
		if err == io.EOF {
			return 0
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "offstage sandbox forker: %v\n", err)
			return 1
		}
		nets.ended(req.Ended)
		plan := standbyPlan{net: req.Spec.Loopback, mounts: req.Spec.Mounts}
		if next.plan != plan || next.err != nil {
			next.discard(&nets)
			next = newStandby(plan, &nets)
		}
		var rep Reply
		pid, err := forkFenced(req, fds, &nets, next)
		rep.PID = pid
		if err != nil {
			rep.Err = err.Error()
		}
		for _, fd := range fds {
			syscall.Close(fd)
		}
		b, _ := json.Marshal(rep)
		if err := WriteMsg(ForkerFD, b, nil); err != nil {
			return 0 // the host is gone
		}
		// The next command's thread, prepared as this one's would have
		// been, while the host runs this one: most commands of a host
		// share a policy.
		next = newStandby(plan, &nets)
	}
}

// A standby is the thread the next command is fenced on and forked
// from, made ahead (a thread fenced for one command is never used for
// another: it ends after the fork), with what does not depend on the
// command done: its network namespace entered (a spare, or a new one)
// and its mount and IPC namespaces made, every mount read-only. A
// request of another plan gives it up (its thread ends) for a new one.
type standby struct {
	plan  standbyPlan
	job   chan func() // the fork; the goroutine returns after it, locked, and so its thread ends
	tid   int
	netns int   // the network namespace entered, open; -1 where none is kept
	err   error // the preparation failed: the thread is given up
}

type standbyPlan struct{ net, mounts bool }

// newStandby starts a standby and waits until it is prepared (meanwhile
// the caller touches nothing of nets).
func newStandby(plan standbyPlan, nets *forkerNets) *standby {
	s := &standby{plan: plan, job: make(chan func(), 1), netns: -1}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		s.tid = syscall.Gettid()
		if s.tid == syscall.Getpid() {
			runtime.UnlockOSThread() // the main thread (locked to init's goroutine), never fenced
			s.tid, s.err = 0, errors.New("fenced on the main thread")
			close(ready)
			return
		}
		if plan.net {
			s.netns, s.err = nets.enter()
		}
		if plan.mounts && s.err == nil {
			s.err = readOnlyAll()
		}
		close(ready)
		if s.err == nil {
			(<-s.job)()
		}
	}()
	<-ready
	return s
}

// discard gives s up: its thread ends, its network namespace, which no
// process entered, is a spare again.
func (s *standby) discard(nets *forkerNets) {
	if s.err == nil {
		s.job <- func() {}
	}
	if s.netns >= 0 {
		if len(nets.spares) < maxSpares {
			nets.spares = append(nets.spares, s.netns)
		} else {
			syscall.Close(s.netns)
		}
		s.netns = -1
	}
}

// forkFenced starts req from a thread of its own, fenced, and returns
// once that thread has ended (until then it is in the command's own
// domain).
func forkFenced(req Request, fds []int, nets *forkerNets, s *standby) (int, error) {
	at := func(i int) (int, error) {
		if i < 0 || i >= len(fds) {
			return 0, fmt.Errorf("bad request: descriptor %d of %d", i, len(fds))
		}
		return fds[i], nil
	}
	for i, x := range req.Spec.WriteFDs {
		fd, err := at(x)
		if err != nil {
			return 0, err
		}
		req.Spec.WriteFDs[i] = fd
	}
	attr := &syscall.ProcAttr{Dir: req.Dir, Env: req.Env, Sys: &syscall.SysProcAttr{
		Setsid: req.Setsid, Setpgid: req.Setpgid, Setctty: req.Setctty,
		Cloneflags: syscall.CLONE_PARENT,
	}}
	for _, x := range req.Files {
		if x < 0 {
			attr.Files = append(attr.Files, ^uintptr(0))
			continue
		}
		fd, err := at(x)
		if err != nil {
			return 0, err
		}
		attr.Files = append(attr.Files, uintptr(fd))
	}
	if s.err != nil {
		return 0, s.err
	}
	type result struct {
		pid int
		err error
	}
	res := make(chan result, 1)
	s.job <- func() {
		pid, err := startFenced(req, attr, nets, s)
		res <- result{pid, err}
	}
	r := <-res
	if err := threadGone(s.tid); err != nil && r.err == nil {
		// Behind the gate, it never ran; its host, told its pid, kills
		// and reaps it.
		return r.pid, err
	}
	return r.pid, r.err
}

// startFenced fences the calling (locked) thread and starts the command
// from it.
func startFenced(req Request, attr *syscall.ProcAttr, nets *forkerNets, s *standby) (pid int, err error) {
	sp := req.Spec
	if netns := s.netns; netns >= 0 {
		s.netns = -1
		defer func() {
			if err != nil {
				syscall.Close(netns)
				return
			}
			nets.keep(pid, netns)
		}()
	}
	if sp.Mounts {
		if err := writablePlaces(sp.Write, sp.WriteFDs, sp.Terminal == ""); err != nil {
			return 0, err
		}
	}
	if err := Fence(sp); err != nil {
		return 0, err
	}
	// Failing exec leaves a zombie of the host's that no one knows of
	// (CLONE_PARENT; Go reaps only a child of its own, and returns no
	// pid when the exec failed, so the host cannot be told): so what
	// would make it fail fails here, before the fork, from the fenced
	// thread (its mounts, its Landlock domain): a directory the command
	// cannot enter, a program it cannot run, arguments and environment
	// the kernel will not carry.
	if err := syscall.Access(req.Dir, 1); err != nil { // X_OK
		return 0, fmt.Errorf("chdir %s: %w", req.Dir, err)
	}
	if err := syscall.Access(req.Path, 1); err != nil {
		return 0, fmt.Errorf("fork/exec %s: %w", req.Path, err)
	}
	if err := fitsExec(req.Args, req.Env); err != nil {
		return 0, fmt.Errorf("fork/exec %s: %w", req.Path, err)
	}
	pid, err = syscall.ForkExec(req.Path, req.Args, attr)
	if err != nil {
		return 0, fmt.Errorf("fork/exec %s: %w", req.Path, err)
	}
	return pid, nil
}

// fitsExec says whether the kernel's execve takes args and env, as
// Linux bounds them (fs/exec.c): each string, with its NUL, at most
// MAX_ARG_STRLEN (32 pages); all of them, with their pointers, within a
// quarter of the stack limit, at most three quarters of 8 MiB and at
// least 32 pages. It errs on refusing a start the kernel might take
// (the pointers' array is counted whole) rather than one it would not.
func fitsExec(args, env []string) error {
	const page = 4096 // the least page size: MAX_ARG_STRLEN is 32 of them
	limit := uint64(8<<20) / 4 * 3
	var stack syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &stack); err == nil && stack.Cur/4 < limit {
		limit = stack.Cur / 4
	}
	limit = max(limit, 32*page)
	total := uint64(len(args)+len(env)+2) * 8
	for _, list := range [][]string{args, env} {
		for _, s := range list {
			if len(s)+1 > 32*page {
				return fmt.Errorf("%w: an argument or environment variable of %d bytes (at most %d)", syscall.E2BIG, len(s), 32*page-1)
			}
			total += uint64(len(s)) + 1
		}
	}
	if total > limit {
		return fmt.Errorf("%w: arguments and environment of %d bytes (at most %d)", syscall.E2BIG, total, limit)
	}
	return nil
}

// threadGone waits until this process's thread tid has ended.
func threadGone(tid int) error {
	pid := syscall.Getpid()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		if err := syscall.Tgkill(pid, tid, 0); err == syscall.ESRCH {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the forker's thread %d that started the command did not end", tid)
		}
		if i < 50 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// readRequest reads one request and its descriptors (close-on-exec).
func readRequest(sock int) (Request, []int, error) {
	var req Request
	b, fds, err := ReadMsg(sock)
	if err != nil {
		return req, nil, err
	}
	if err := json.Unmarshal(b, &req); err != nil {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return req, nil, fmt.Errorf("bad request: %w", err)
	}
	return req, fds, nil
}

// WriteMsg writes b, its length first, with fds, on the stream socket
// sock (blocking).
func WriteMsg(sock int, b []byte, fds []int) error {
	if len(b) > MaxRequest || len(fds) > MaxFDs {
		return fmt.Errorf("message of %d bytes and %d descriptors: too large", len(b), len(fds))
	}
	msg := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	msg = append(msg, b...)
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	for len(msg) > 0 {
		n, err := syscall.SendmsgN(sock, msg, oob, nil, syscall.MSG_NOSIGNAL)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		msg, oob = msg[n:], nil
	}
	return nil
}

// ReadMsg reads one message written by WriteMsg from the stream socket
// sock (blocking): io.EOF at its end.
func ReadMsg(sock int) ([]byte, []int, error) {
	var head [4]byte
	oob := make([]byte, syscall.CmsgSpace(4*MaxFDs))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = syscall.Recvmsg(sock, head[:], oob, syscall.MSG_CMSG_CLOEXEC)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return nil, nil, io.EOF
	}
	var fds []int
	if oobn > 0 {
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, err
		}
		for _, m := range msgs {
			got, err := syscall.ParseUnixRights(&m)
			if err == nil {
				fds = append(fds, got...)
			}
		}
	}
	fail := func(err error) ([]byte, []int, error) {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, nil, err
	}
	if err := readFull(sock, head[n:]); err != nil {
		return fail(err)
	}
	size := binary.LittleEndian.Uint32(head[:])
	if size > MaxRequest {
		return fail(fmt.Errorf("message of %d bytes: too large", size))
	}
	b := make([]byte, size)
	if err := readFull(sock, b); err != nil {
		return fail(err)
	}
	return b, fds, nil
}

func readFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Read(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		b = b[n:]
	}
	return nil
}
