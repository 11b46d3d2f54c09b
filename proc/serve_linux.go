package proc

import (
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
func (p *Process) serve(st *streams) {
	defer contain.ReleaseWaitSlot()
	served.Add(1)
	pidfd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil || noPidfd.Load() {
		if err == nil {
			syscall.Close(pidfd)
		}
		pidfd = -1
	}
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	var kinds []Stream
	for i, f := range []*os.File{st.out, st.err} {
		if f == nil {
			continue
		}
		fd := int(f.Fd())
		syscall.SetNonblock(fd, true) // the pipe is not the poller's: poll says when to read
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		kinds = append(kinds, Stdout+Stream(i))
	}
	open := len(kinds)
	buf := make([]byte, minGrow)
	var (
		exited   bool        // the leader has exited
		ending   chan reaped // the leftovers are being ended; nil when not
		r        reaped      // set once reaped is
		reapedOK bool        // the leader is reaped
		deadline time.Time   // for the pipes, once reapedOK
	)
	for open > 0 || !reapedOK {
		timeout := -1
		if reapedOK {
			left := time.Until(deadline)
			if left <= 0 {
				break // the pipes' time is up: processes that left the group hold them
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		if ending != nil {
			timeout = leftoverPollMs
		} else if !exited && pidfd < 0 {
			timeout = exitPollMs
		}
		if _, err := unix.Poll(fds, timeout); err != nil && err != syscall.EINTR {
			time.Sleep(time.Millisecond) // ENOMEM: try again, not in a loop that spins
			continue
		}
		for i := 1; i < len(fds); i++ {
			if fds[i].Fd >= 0 && fds[i].Revents != 0 && !p.readOnce(int(fds[i].Fd), kinds[i-1], &buf) {
				fds[i].Fd = -1 // poll skips it
				open--
			}
		}
		if !exited && (fds[0].Revents != 0 || (pidfd < 0 && contain.HasExited(p.pid))) {
			exited = true
			fds[0].Fd = -1
			if p.task.MayHaveLeftovers() {
				ending = make(chan reaped, 1)
				go func() { ending <- p.leaderExitedWith(true, true) }()
			} else {
				r, reapedOK = p.leaderExitedWith(true, false), true
				deadline = time.Now().Add(p.cfg.WaitDelay)
			}
		}
		if ending != nil {
			select {
			case r = <-ending:
				ending, reapedOK = nil, true
				deadline = time.Now().Add(p.cfg.WaitDelay)
			default:
			}
		}
	}
	if pidfd >= 0 {
		syscall.Close(pidfd)
	}
	closeAll(st.out, st.err)
	p.finish(r)
}

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
