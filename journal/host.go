package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/offstage/offstage/agent"
)

// NewID returns a fresh id: the time, sortable, and random hex
// (agent.NewID, the one format of session ids on every surface).
func NewID() string { return agent.NewID() }

// ThisHost describes the calling process, with a fresh id.
func ThisHost(version string) Host {
	name, _ := os.Hostname()
	start, _ := ProcessStart(os.Getpid())
	return Host{ID: NewID(), Hostname: name, PID: os.Getpid(), Start: start, Started: time.Now(), Version: version}
}

// ProcessStart returns when process pid started, in clock ticks since
// boot (field 22 of /proc/PID/stat): with the pid, it names a process
// even after the pid is reused.
func ProcessStart(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("journal: unreadable stat of pid " + strconv.Itoa(pid))
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("journal: short stat of pid " + strconv.Itoa(pid))
	}
	return strconv.ParseInt(f[19], 10, 64) // field 22 is the 20th after the name
}

// Same reports whether pid is still the process that started at start.
func Same(pid int, start int64) bool {
	if pid <= 0 || start == 0 {
		return false
	}
	s, err := ProcessStart(pid)
	return err == nil && s == start
}

// Alive reports whether h still runs. A host of another machine counts as
// alive: this machine cannot tell (a shared journal decides that with
// leases).
func Alive(h Host) bool {
	if name, _ := os.Hostname(); h.Hostname != name {
		return true
	}
	if h.Start == 0 { // no /proc where it ran: a live pid counts
		err := syscall.Kill(h.PID, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	return Same(h.PID, h.Start)
}

// Recovered is what Recover found: tasks of dead hosts, now orphaned, and
// how many of their processes it stopped.
type Recovered struct {
	Tasks  []Task
	Killed int
}

// Recover looks for hosts of this machine that died with sessions open or
// tasks unfinished, and, in a journal several machines share (a Leaser),
// for hosts anywhere whose lease ran out: their unfinished tasks become
// orphaned, their sessions end, and the process groups of their shells
// that still run on this machine (the leader's pid and start time both
// match what was recorded; never a bare pid) are killed. Hosts still
// alive, and self, are left alone; each dead host is handled once, by
// one of the processes that look.
func Recover(ctx context.Context, store Store, self Host) (Recovered, error) {
	var r Recovered
	hosts, err := store.Hosts(ctx, self.ID)
	if err != nil {
		return r, fmt.Errorf("journal: %w", err)
	}
	for _, h := range hosts {
		if Alive(h) {
			continue
		}
		tasks, err := store.Orphan(ctx, h.ID, time.Now())
		if err != nil {
			return r, fmt.Errorf("journal: %w", err)
		}
		r.add(tasks)
	}
	if l, ok := store.(Leaser); ok {
		_, tasks, err := l.OrphanExpired(ctx, time.Now())
		if err != nil {
			return r, fmt.Errorf("journal: %w", err)
		}
		r.add(tasks)
	}
	return r, nil
}

// add records orphaned tasks, killing their shells that still run here.
func (r *Recovered) add(tasks []Task) {
	name, _ := os.Hostname()
	for _, t := range tasks {
		if (t.Hostname == "" || t.Hostname == name) && Same(t.PID, t.PIDStart) && syscall.Kill(-t.PID, syscall.SIGKILL) == nil {
			r.Killed++
		}
	}
	r.Tasks = append(r.Tasks, tasks...)
}

// DefaultLease is how long a host's lease in a shared journal lasts; it
// is renewed every sixth of that.
const DefaultLease = 30 * time.Second

// KeepLease holds host's lease in a shared journal until ctx ends:
// every lease/6 it renews it to lease from now, and runs Recover, so that
// when a host's lease runs out one live host orphans its tasks within
// about lease + lease/6. report hears of trouble once per episode (the
// database cannot be reached; this host was declared gone, which happens
// when it could not renew for longer than the lease); found hears of
// every recovery that orphaned something.
func KeepLease(ctx context.Context, store Leaser, host Host, lease time.Duration, report func(string), found func(Recovered)) {
	tick := time.NewTicker(lease / 6)
	defer tick.Stop()
	var failing, gone bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ok, err := store.Renew(ctx, host.ID, time.Now().Add(lease))
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				report(fmt.Sprintf("cannot renew this instance's lease (%v); the others take its tasks for orphaned if that lasts %s", err, lease))
			}
			failing = true
			continue
		case !ok && !gone:
			report("the other instances took this one for gone (its lease ran out) and marked its unfinished tasks orphaned; it goes on, and its records set them right as they finish")
			gone = true
		}
		if failing {
			report("the lease is renewed again")
			failing = false
		}
		if r, err := Recover(ctx, store, host); err == nil && len(r.Tasks) > 0 {
			found(r)
		}
	}
}
