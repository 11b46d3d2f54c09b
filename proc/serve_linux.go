package proc

import (
	"context"
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/proc/internal/contain"
)

// The inline reaper. A process whose output goes to its pipes only (no
// terminal, no Config.Stdout) is served by one goroutine that blocks in
// poll on its pipes and a pidfd of its leader: it reads the output as it
// comes and reaps the leader when it exits. The other way, a reader per
// pipe in Go's poller and a reaper blocked in waitid, costs a start two
// goroutines, the poller's registration of each pipe, and a hand-off
// from each reader to the reaper: about 25 µs of CPU, a few per cent of
// a start (BenchmarkSpawnPaired). The goroutine holds a thread while it
// blocks, as the reaper's waitid does, so it takes one of WaitExited's
// blocking waits (contain.TakeWaitSlot); past those, the other way, and
// the other way too on a kernel without pidfds (before Linux 5.3).

// The server's first run is a Wait's where a Wait comes soon enough: a
// program that starts a command and waits for it (as os/exec's Run does)
// has it served on its own goroutine, which would otherwise sleep in
// Wait, and no other goroutine is started or woken. Handing the command
// from the starting goroutine to a server's, and its exit back, woke an
// idle thread twice a start (the runtime wakes one for each goroutine
// made or readied while a processor is idle), which looked for work,
// found none and slept again: as root in a cgroup, 6% of what the start
// and wait cost altogether (BenchmarkSpawnPaired: 1.26 times os/exec's
// CPU before, 1.20 after; this process's own CPU 316 -> 293 µs). Any other
// look at the process (Done, WaitOutput, Stop, Input, Read…) starts the
// server's goroutine at once, and the sweeper does for a process nobody
// looked at within serveAfter of its start: such a command is served as
// before, serveAfter later at most (its output waits in its pipe
// meanwhile, and its exit as a zombie).
//
// One sweeper for every process, not a timer each: a timer due before
// any other wakes an idle thread too (the runtime's timers are polled by
// a thread that must learn of it), which gave back most of what serving
// in Wait saves. The sweeper runs while processes are waiting for their
// first look, when the first of them is due, and ends when none is left:
// a start wakes a thread to start it at most once per serveAfter. A Wait
// with a context that can end serves its process only where it has no
// log, whose writes may block beyond the context's reach.

// serveAfter is how long after its start a process served inline waits
// for a Wait (or another look) to serve it, at most, before it gets a
// goroutine of its own.
const serveAfter = 20 * time.Millisecond

// sweep is the processes started, served inline, whose first run may
// still be untaken, and whether the sweeper runs.
var sweep struct {
	mu      sync.Mutex
	pending []*Process // guarded by mu
	running bool       // guarded by mu
}

// startServing gets the server of p ready, for a Wait, a look, or the
// sweeper.
func (p *Process) startServing(st *streams) {
	p.srv = newServer(p, st)
	p.unserved.Store(true)
	sweep.mu.Lock()
	sweep.pending = append(sweep.pending, p)
	start := !sweep.running
	sweep.running = true
	sweep.mu.Unlock()
	if start {
		go sweeper()
	}
}

// sweeper serves the pending processes started serveAfter ago and not
// served yet, each in a goroutine of its own, when the first of them is
// due, and forgets those served; it ends when none is pending. (A tick
// every serveAfter served a process started just after a tick at the
// second: 2 serveAfter late, an outsider found.)
func sweeper() {
	timer := time.NewTimer(serveAfter)
	defer timer.Stop()
	for range timer.C {
		now := time.Now()
		next := time.Duration(serveAfter)
		sweep.mu.Lock()
		kept := sweep.pending[:0]
		for _, p := range sweep.pending {
			age := now.Sub(p.started)
			switch {
			case !p.unserved.Load():
			case age < serveAfter:
				kept = append(kept, p)
				next = min(next, serveAfter-age)
			case p.unserved.CompareAndSwap(true, false):
				servedBy[bySweeper].Add(1)
				go p.srv.serve(-1)
			}
		}
		clear(sweep.pending[len(kept):]) // the processes forgotten may go
		sweep.pending = kept
		if len(kept) == 0 {
			sweep.pending = nil // a burst's backing array goes too
			sweep.running = false
			sweep.mu.Unlock()
			return
		}
		sweep.mu.Unlock()
		timer.Reset(next)
	}
}

// servedBy counts, for tests, how the processes served inline were first
// served: by a Wait, on its goroutine; by a goroutine of their own after
// another look; or by the sweeper.
var servedBy [3]atomic.Int64

const (
	byWait = iota
	byLook
	bySweeper
)

// claimServe takes the server's first run for the caller; false if it
// was taken already, or p is not served inline, or not yet: a look while
// Start sets the process up (its context's end, run at once) finds
// unserved false, leaves it to the sweeper, and reads nothing Start is
// still writing (unserved is set last, p.srv and the rest before). The
// sweeper forgets p at its next round.
func (p *Process) claimServe() bool {
	return p.unserved.Load() && p.unserved.CompareAndSwap(true, false)
}

// serveSoon has p served by a goroutine of its own now, unless it is.
func (p *Process) serveSoon() {
	if p.claimServe() {
		servedBy[byLook].Add(1)
		go p.srv.serve(-1)
	}
}

// serveHere serves p on the calling goroutine until it is done or ctx
// ends; then, unfinished, it goes on in a goroutine of its own. It does
// nothing where p is served already.
func (p *Process) serveHere(ctx context.Context) {
	if ctx.Err() != nil {
		p.serveSoon() // a look all the same
		return
	}
	if !p.claimServe() {
		return
	}
	if ctx.Done() == nil {
		servedBy[byWait].Add(1)
		p.srv.serve(-1)
		return
	}
	// With a log, the server can block where its context's end cannot
	// reach it: queueing output for a log whose disk is behind (a FIFO
	// nobody reads, a hung network mount), or closing the log. Such a
	// Wait must still return when its context ends: it sleeps, and a
	// goroutine serves.
	efd, err := -1, error(nil)
	if p.log == nil {
		efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	}
	if efd < 0 || err != nil {
		servedBy[byLook].Add(1)
		go p.srv.serve(-1)
		return
	}
	servedBy[byWait].Add(1)
	var mu sync.Mutex // the eventfd is not closed under a write
	open := true
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if open {
			var one [8]byte
			binary.NativeEndian.PutUint64(one[:], 1)
			syscall.Write(efd, one[:])
		}
	})
	done := p.srv.serve(efd)
	stop()
	mu.Lock()
	open = false
	syscall.Close(efd)
	mu.Unlock()
	if !done {
		go p.srv.serve(-1)
	}
}

// serveInline says whether a process started with cfg is served inline,
// and if so has taken a blocking wait for it.
func serveInline(cfg Config) bool {
	return !cfg.TTY && cfg.Stdout == nil && !noInline.Load() && pidfds() && contain.TakeWaitSlot()
}

// pidfds says whether this kernel makes pidfds (Linux 5.3), and lets a
// seccomp profile the host runs under do so.
var pidfds = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	syscall.Close(fd)
	return true
})

// Test knobs: noInline turns the inline reaper off, noPidfd makes it
// look for the leader's exit as it does without a pidfd (both ways must
// hold); served counts the processes it served.
var (
	noInline, noPidfd atomic.Bool
	served            atomic.Int64
)

// exitPollMs is how often serve looks for the leader's exit when it has
// no pidfd: pidfd_open failed for this process (out of descriptors),
// though the kernel makes them.
const exitPollMs = 50

// leftoverPollMs is how often serve looks whether the leftovers are
// ended, which another goroutine does meanwhile (see serve).
const leftoverPollMs = 10

// server is serve's state: it is kept between runs, for the first run
// may be a Wait's, given up when the Wait's context ends, and the rest
// then goes on in a goroutine of its own.
type server struct {
	p        *Process
	st       *streams
	pidfd    int // -1 without one: the leader's exit is polled for
	fds      []unix.PollFd
	kinds    []Stream       // of fds[1:]
	open     int            // pipes not at their end
	buf      []byte         // grown from first as capture's is
	first    *[minGrow]byte // from readBufs; given back at the end
	exited   bool           // the leader has exited
	ending   chan reaped    // the leftovers are being ended; nil when not
	r        reaped         // set once reapedOK is
	reapedOK bool           // the leader is reaped
	deadline time.Time      // for the pipes, once reapedOK
}

// newServer opens a pidfd of p's leader and gets ready to serve st.
func newServer(p *Process, st *streams) *server {
	served.Add(1)
	s := &server{p: p, st: st}
	pidfd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil || noPidfd.Load() {
		if err == nil {
			syscall.Close(pidfd)
		}
		pidfd = -1
	}
	s.pidfd = pidfd
	s.fds = make([]unix.PollFd, 1, 4)
	s.fds[0] = unix.PollFd{Fd: int32(pidfd), Events: unix.POLLIN}
	for i, f := range []*os.File{st.out, st.err} {
		if f == nil {
			continue
		}
		// Blocking: one read after poll said the pipe is ready never
		// waits, as nothing else reads it.
		s.fds = append(s.fds, unix.PollFd{Fd: int32(f.Fd()), Events: unix.POLLIN})
		s.kinds = append(s.kinds, Stdout+Stream(i))
	}
	s.open = len(s.kinds)
	return s
}

// serve reads st's pipes into the buffers until their end, and reaps the
// leader when it exits, waiting after it for the pipes' end for
// Config.WaitDelay at most (as waitReaders does); then publishes the
// exit. It gives back the blocking wait serveInline took.
//
// Each wake reads once from each pipe that is ready, then polls again:
// a pipe that never runs dry (a flood of output) delays neither the
// leader's exit, nor the other pipe, nor the deadline. The leftovers of
// a leader, which a stop gives their grace to end (EndLeftovers), are
// ended by another goroutine, while this one reads on: their last words
// (a test runner's report on SIGTERM) must not block on a full pipe.
//
// With wake a descriptor (an eventfd), serve returns false once it is
// readable, its work unfinished: the server is left as it was for a run
// to go on with it. With wake -1 it returns true, done.
func (s *server) serve(wake int) bool {
	p := s.p
	n := len(s.fds)
	if wake >= 0 {
		s.fds = append(s.fds, unix.PollFd{Fd: int32(wake), Events: unix.POLLIN})
		defer func() { s.fds = s.fds[:n] }()
	}
	if s.buf == nil {
		s.first = readBufs.Get().(*[minGrow]byte)
		s.buf = s.first[:]
	}
	for s.open > 0 || !s.reapedOK {
		timeout := -1
		if s.reapedOK {
			left := time.Until(s.deadline)
			if left <= 0 {
				break // the pipes' time is up: processes that left the group hold them
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		if s.ending != nil {
			timeout = leftoverPollMs
		} else if !s.exited && s.pidfd < 0 {
			timeout = exitPollMs
		}
		if _, err := unix.Poll(s.fds, timeout); err != nil && err != syscall.EINTR {
			time.Sleep(time.Millisecond) // ENOMEM: try again, not in a loop that spins
			continue
		}
		for i := 1; i < n; i++ {
			if s.fds[i].Fd >= 0 && s.fds[i].Revents != 0 && !p.readOnce(int(s.fds[i].Fd), s.kinds[i-1], &s.buf) {
				s.fds[i].Fd = -1 // poll skips it
				s.open--
			}
		}
		if !s.exited && (s.fds[0].Revents != 0 || (s.pidfd < 0 && contain.HasExited(p.pid))) {
			s.exited = true
			s.fds[0].Fd = -1
			if p.task.MayHaveLeftovers() {
				ending := make(chan reaped, 1)
				s.ending = ending
				go func() { ending <- p.leaderExitedWith(true, true) }()
			} else {
				s.r, s.reapedOK = p.leaderExitedWith(true, false), true
				s.deadline = time.Now().Add(p.cfg.WaitDelay)
			}
		}
		if s.ending != nil {
			select {
			case s.r = <-s.ending:
				s.ending, s.reapedOK = nil, true
				s.deadline = time.Now().Add(p.cfg.WaitDelay)
			default:
			}
		}
		if wake >= 0 && s.fds[n].Revents != 0 {
			return false
		}
	}
	if s.pidfd >= 0 {
		syscall.Close(s.pidfd)
	}
	closeAll(s.st.out, s.st.err)
	if s.first != nil {
		s.buf = nil
		readBufs.Put(s.first)
	}
	contain.ReleaseWaitSlot()
	p.finish(s.r)
	return true
}

// readBufs are the servers' first read buffers: most commands say little
// or nothing, and a buffer of their own was the largest allocation of a
// start. Nothing keeps a read's bytes (record copies them).
var readBufs = sync.Pool{New: func() any { return new([minGrow]byte) }}

// readOnce reads once from the pipe fd, which poll said is ready, into
// the buffers as stream s, and says whether it is still open: false at
// its end (or on an error, which capture takes as one too). buf grows as
// capture's does.
func (p *Process) readOnce(fd int, s Stream, buf *[]byte) bool {
	for {
		n, err := syscall.Read(fd, *buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return true
		case err != nil || n == 0:
			return false
		}
		p.record((*buf)[:n], s)
		if n == len(*buf) && len(*buf) < readBufferBytes {
			*buf = make([]byte, 2*len(*buf))
		}
		return true
	}
}
