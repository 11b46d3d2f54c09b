package contain

import (
	"bytes"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Spare cgroups. Making a cgroup (mkdir on cgroupfs builds its whole set
// of files) and removing it were a fifth of what a short command cost us
// beyond os/exec. A command without limits leaves an empty cgroup that is
// as good as new for the next one, so the host keeps a few: the next
// command without limits is cloned into one of them, and they are removed
// after spareIdle without use, or with the host's directory when the host
// goes (by its keeper, or by the next host's sweep).
//
// A cgroup is kept only when nothing of it can tell one command from the
// next: no limits (their files would need resetting, and the v1 ones are
// per command), no memory accounting (memory.peak cannot be reset for
// every reader), no cgroup nested in it, no process left in it when its
// leader exited, and never a cgroup.kill (processes cloned into a cgroup
// right after one were killed too). Its CPU
// time (cpu.stat, which only grows) is read when it is kept and
// subtracted for the next command.
const (
	MaxSpares = 4
	SpareIdle = 5 * time.Second
)

type spares struct {
	mu    sync.Mutex
	list  []*cgroup
	timer *time.Timer // drains the list after spareIdle without a release
}

// takeSpare returns a kept cgroup, opened for clone3, or nil.
func (h *cgroupHost) takeSpare() *cgroup {
	s := &h.spares
	for {
		s.mu.Lock()
		n := len(s.list)
		if n == 0 {
			s.mu.Unlock()
			return nil
		}
		c := s.list[n-1]
		s.list = s.list[:n-1]
		s.mu.Unlock()
		fd, err := syscall.Open(c.dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			c.remove() // someone removed or broke it: the next one, or a new one
			continue
		}
		c.fd = fd
		return c
	}
}

// release removes the cgroup of a command that has ended, or keeps it as
// a spare. alone says that no process of the command outlived its leader
// (the cgroup was unpopulated when the leader had exited). It fails as
// remove does.
func (c *cgroup) release(alone bool) error {
	h := c.host
	if h == nil || !alone {
		return c.remove()
	}
	base, ok := c.reusable()
	if !ok {
		return c.remove()
	}
	s := &h.spares
	s.mu.Lock()
	if len(s.list) >= MaxSpares {
		s.mu.Unlock()
		return c.remove()
	}
	// From here the cgroup is the next command's: this one's Process
	// must not signal or count what will be in it.
	c.mu.Lock()
	c.released = true
	c.mu.Unlock()
	spare := &cgroup{dir: c.dir, fd: -1, hasKill: c.hasKill, host: h, cpuBase: base, ends: c.ends}
	c.ends, c.endsGone = [len(endFiles)]keptFile{}, true // the spare's now
	s.list = append(s.list, spare)
	if s.timer == nil {
		s.timer = time.AfterFunc(SpareIdle, h.drainSpares)
	} else {
		s.timer.Reset(SpareIdle)
	}
	s.mu.Unlock()
	return nil
}

// reusable says whether the next command may have this cgroup (see
// above), and returns its CPU time so far, the next command's base. It
// leaves c.cpuBase alone: this command's Usage may still be reading it.
func (c *cgroup) reusable() (time.Duration, bool) {
	if c.limited || c.memAcct || len(c.v1) > 0 || c.killed.Load() {
		return 0, false
	}
	var buf [1024]byte
	stat := c.readEnd(endStat, buf[:])
	if n, ok := eventValue(stat, "nr_descendants"); !ok || n != 0 {
		return 0, false
	}
	if n, ok := eventValue(stat, "nr_dying_descendants"); !ok || n != 0 {
		return 0, false
	}
	if !c.endRead {
		c.finalUsage()
	}
	return c.endUsage, c.endRead
}

// drainSpares removes the kept cgroups.
func (h *cgroupHost) drainSpares() {
	s := &h.spares
	s.mu.Lock()
	list := s.list
	s.list = nil
	s.mu.Unlock()
	for _, c := range list {
		c.remove()
	}
}

// DrainSpares removes this host's kept cgroups, and says how many.
func DrainSpares() int {
	_, h := containment()
	if h == nil {
		return 0
	}
	h.spares.mu.Lock()
	n := len(h.spares.list)
	h.spares.mu.Unlock()
	h.drainSpares()
	return n
}

// finalUsage reads what a command used, from its cgroup, once it has
// ended: its CPU time, and its memory peak where the memory controller
// counts it (0 elsewhere: the caller has the leader's own figures). It
// keeps the CPU time read for reusable.
func (c *cgroup) finalUsage() (cpu time.Duration, peak int64) {
	var buf [1024]byte
	if us, ok := eventValue(c.readEnd(endCPU, buf[:]), "usage_usec"); ok {
		c.endUsage, c.endRead = time.Duration(us)*time.Microsecond, true
		cpu = c.endUsage - c.cpuBase
	}
	// A cgroup of this host has memory.peak only once the host enabled
	// the memory controller in its directory (memoryOn): no need to look
	// before.
	if c.host == nil || c.host.memoryOn.Load() {
		if b := readSmall(c.dir + "/memory.peak"); b != nil {
			c.memAcct = true
			peak, _ = strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
			return cpu, peak
		}
	}
	if c.memV1 != "" {
		peak, _ = strconv.ParseInt(string(bytes.TrimSpace(readSmall(c.memV1+"/memory.max_usage_in_bytes"))), 10, 64)
	}
	return cpu, peak
}
