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
	start, _, err := processStat(pid)
	return start, err
}

// processStat returns when process pid started (see ProcessStart) and its
// state (field 3: 'R', 'S', 'Z' for a zombie, which has exited and waits
// for its parent to reap it).
func processStat(pid int) (start int64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("journal: unreadable stat of pid " + strconv.Itoa(pid))
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, 0, errors.New("journal: short stat of pid " + strconv.Itoa(pid))
	}
	start, err = strconv.ParseInt(f[19], 10, 64) // field 22 is the 20th after the name
	return start, f[0][0], err
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
	// A zombie has exited: its tasks were shown running until its parent
	// reaped it (an outsider's script that waited later: 1.5 s).
	start, state, err := processStat(h.PID)
	return err == nil && start == h.Start && state != 'Z' && state != 'X'
}

// Stopped reports whether process pid is stopped (state 'T': SIGSTOP,
// SIGTSTP, a terminal's Ctrl-Z) or held by a debugger ('t'): it runs no
// code until it is continued. False where /proc cannot tell.
func Stopped(pid int) bool {
	_, state, err := processStat(pid)
	return err == nil && (state == 'T' || state == 't')
}

// Exited reports whether process pid is a zombie: it has exited, and
// its parent has not reaped it yet (a supervisor started with --detach
// waits on pid 1 for that, which can take seconds, or for ever in a
// container without an init). False where /proc does not say.
func Exited(pid int) bool {
	_, state, err := processStat(pid)
	return err == nil && (state == 'Z' || state == 'X')
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
// that still run on this machine are killed, if they provably are what
// a dead host started (its mark, or its cgroup: see ours); a record
// alone never names a process to kill.
// Hosts still alive, and self, are left alone; each dead host is handled
// once, by one of the processes that look.
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
		r.add([]Host{h}, tasks)
	}
	if l, ok := store.(Leaser); ok {
		dead, tasks, err := l.OrphanExpired(ctx, time.Now())
		if err != nil {
			return r, fmt.Errorf("journal: %w", err)
		}
		r.add(dead, tasks)
	}
	return r, nil
}

// add records orphaned tasks of the dead hosts, killing their shells that
// still run here and are provably theirs.
func (r *Recovered) add(dead []Host, tasks []Task) {
	name, _ := os.Hostname()
	for _, t := range tasks {
		if (t.Hostname == "" || t.Hostname == name) && ours(t.PID, t.PIDStart, dead) && syscall.Kill(-t.PID, syscall.SIGKILL) == nil {
			r.Killed++
		}
	}
	r.Tasks = append(r.Tasks, tasks...)
}

// ours reports whether the process group led by pid is one an offstage
// host started and may be killed for one of the dead hosts: a journal
// record is trusted only as far as its writer, and whoever can write the
// journal must not be able to name a process for offstage to kill. So it
// is not pid 0 or 1, nor this process or its group; pid still started at
// start and still leads its own group; and it carries what offstage gave
// its commands, its mark (an OFFSTAGE_MARK in its environment or its
// RLIMIT_RTTIME, see package proc) or a cgroup under one of the dead
// hosts' directories. A process in the cgroup directory of another host
// (alive, or not among the dead) is that host's. Anything else is left
// alone: its task is orphaned all the same.
func ours(pid int, start int64, dead []Host) bool {
	if pid <= 1 || pid == os.Getpid() || pid == syscall.Getpgrp() || !Same(pid, start) {
		return false
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		return false
	}
	if dir, ok := hostCgroupDir(pid); ok {
		for _, h := range dead {
			if strings.HasSuffix(dir, "-"+strconv.Itoa(h.PID)+"-"+strconv.FormatInt(h.Start, 10)) {
				return true
			}
		}
		return false // another host's command
	}
	return marked(pid)
}

// hostCgroupDir returns the name of the offstage host directory (see
// package proc: offstage-PIDNS-PID-START) pid's cgroup v2 lies under, if
// it lies under one.
func hostCgroupDir(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		path, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		for part := range strings.SplitSeq(path, "/") {
			if strings.HasPrefix(part, "offstage-") && strings.Count(part, "-") == 3 {
				return part, true
			}
		}
	}
	return "", false
}

// markMagic is the top 16 bits of every mark proc gives (see package
// proc, "Containment by marks").
const markMagic = 0x5eed

// marked reports whether pid carries an offstage mark: in its environment
// (OFFSTAGE_MARK) or as its soft RLIMIT_RTTIME (/proc/PID/limits is
// readable by anyone; the environment only by its owner and root).
func marked(pid int) bool {
	isMark := func(v string) bool {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		return err == nil && n>>48 == markMagic
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); err == nil {
		for kv := range strings.SplitSeq(string(b), "\x00") {
			if v, ok := strings.CutPrefix(kv, "OFFSTAGE_MARK="); ok && isMark(v) {
				return true
			}
		}
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Max realtime timeout"); ok {
				if f := strings.Fields(rest); len(f) > 0 && isMark(f[0]) {
					return true
				}
			}
		}
	}
	return false
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
