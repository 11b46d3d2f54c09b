//go:build linux

package contain

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// run runs command in a task limited by l, as package proc's Start and
// reaper do, and returns what it ended with: its task, CPU time and the
// containment's report. During tells the caller the task once started.
func run(t *testing.T, command string, l Limits, during func(*Task)) (*Task, time.Duration, Ended) {
	t.Helper()
	task, err := New(l)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(), task.Env())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	task.Prepare(cmd.SysProcAttr)
	if err := task.Start(cmd, nil); err != nil {
		task.Abort()
		t.Fatal(err)
	}
	if err := task.Started(cmd); err != nil {
		KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		task.Abort()
		t.Fatal(err)
	}
	if during != nil {
		during(task)
	}
	var e Ended
	alone := WaitExited(cmd.Process.Pid) == nil
	if alone && task.MayHaveLeftovers() {
		alone = false
		task.EndLeftovers(&e, false, time.Time{})
	}
	KillGroup(cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	cpu, _ := task.Release(&e, alone, cmd.ProcessState)
	return task, cpu, e
}

// startedIn runs command to its end and returns its CPU time, its
// report and the cgroup it ran in.
func startedIn(t *testing.T, command string, l Limits) (time.Duration, Ended, string) {
	t.Helper()
	task, cpu, e := run(t, command, l, nil)
	if task.cg == nil {
		t.Fatal("no cgroup in ModeCgroup")
	}
	return cpu, e, task.cg.dir
}

// TestSpareCgroup: the empty cgroup a command leaves serves the next one,
// which is not charged the CPU time of the one before; a command with
// limits, one that left a process behind, or one whose cgroup had a
// cgroup nested in it, never leaves a spare.
func TestSpareCgroup(t *testing.T) {
	if info, _ := containment(); info.Mode != ModeCgroup {
		t.Skip("no cgroups:", info)
	}
	DrainSpares()
	defer DrainSpares()

	busy, _, dir := startedIn(t, "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done", Limits{})
	if busy < 50*time.Millisecond {
		t.Fatalf("the busy loop used %v of CPU, want more to tell it from the next", busy)
	}
	next, _, dir2 := startedIn(t, "true", Limits{})
	if dir2 != dir {
		t.Errorf("the next command ran in %s, want the spare %s", dir2, dir)
	}
	if next > busy/2 {
		t.Errorf("true used %v of CPU in the spare of a loop that used %v: charged the loop's", next, busy)
	}

	// A nested cgroup (a host running as a task makes them) is not kept.
	run(t, "true", Limits{}, func(task *Task) {
		if task.cg.dir != dir {
			t.Errorf("ran in %s, want the spare %s", task.cg.dir, dir)
		}
		if err := os.Mkdir(task.cg.dir+"/nested", 0o755); err != nil {
			t.Fatal(err)
		}
	})
	if n := DrainSpares(); n != 0 {
		t.Errorf("%d spares after a command whose cgroup had a nested one, want 0", n)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cgroup with a nested one is still there (%v)", err)
	}

	// A command that left a process behind (ended with cgroup.kill)
	// leaves no spare: the kernel went on killing what joined it.
	DrainSpares()
	_, left, dir := startedIn(t, "sleep 1000 & exit 0", Limits{})
	if left.Leftovers != 1 {
		t.Errorf("leftovers = %d, want the sleep", left.Leftovers)
	}
	if n := DrainSpares(); n != 0 {
		t.Errorf("%d spares after a command that left a process, want 0", n)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cgroup of a command that left a process is still there (%v)", err)
	}

	if CheckLimits(Limits{Pids: 64}) == nil {
		_, _, dir := startedIn(t, "true", Limits{})
		_, _, limited := startedIn(t, "true", Limits{Pids: 64})
		if limited == dir {
			t.Errorf("a command with limits got the spare %s", dir)
		}
		if n := DrainSpares(); n != 1 {
			t.Errorf("%d spares after a command without and one with limits, want 1", n)
		}
		if _, err := os.Stat(limited); !os.IsNotExist(err) {
			t.Errorf("the limited command's cgroup is still there (%v)", err)
		}
	}
}

// TestUsageWhileTheCgroupIsKept (found by the race detector in an
// interactive session): the reaper, keeping an ended command's cgroup for
// the next one, wrote the CPU base that the command's Usage was reading
// (the status line polls it). Run with -race, it fails if they share it
// again; without, it fails if the ended command's base changes at all
// (its Usage and Exit would then count from the next command's base).
func TestUsageWhileTheCgroupIsKept(t *testing.T) {
	if info, _ := containment(); info.Mode != ModeCgroup {
		t.Skip("no cgroups:", info)
	}
	kept := 0
	for range 20 {
		var base time.Duration
		var polls sync.WaitGroup
		stop := make(chan struct{})
		task, _, _ := run(t, "true", Limits{}, func(task *Task) {
			base = task.cg.cpuBase
			polls.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					task.Usage()
				}
			})
		})
		close(stop)
		polls.Wait()
		task.Usage()
		if task.cg.cpuBase != base {
			t.Fatalf("keeping the cgroup changed the ended command's CPU base from %v to %v", base, task.cg.cpuBase)
		}
		task.cg.mu.RLock()
		if task.cg.released {
			kept++
		}
		task.cg.mu.RUnlock()
	}
	if kept == 0 {
		t.Errorf("no cgroup of 20 commands was kept for the next: the test proves nothing")
	}
}

// openFds counts this process's open descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestSpareKeepsItsFilesOpen: the files read as a command ends
// (cgroup.events, cpu.stat, cgroup.stat) go with its cgroup to the
// spares, so the next command's end reads them without opening them
// again (opening cost five times the read); and they are closed when the
// cgroup is removed, kept or not: no descriptor is left behind.
func TestSpareKeepsItsFilesOpen(t *testing.T) {
	info, h := containment()
	if info.Mode != ModeCgroup {
		t.Skip("no cgroups:", info)
	}
	DrainSpares()
	before := openFds(t)
	startedIn(t, "true", Limits{})
	h.spares.mu.Lock()
	var spare *cgroup
	if len(h.spares.list) == 1 {
		spare = h.spares.list[0]
	}
	h.spares.mu.Unlock()
	if spare == nil {
		t.Fatal("no spare after a command that left nothing")
	}
	for i, f := range spare.ends {
		if !f.ok {
			t.Errorf("the spare's %s is not kept open", endFiles[i])
		}
	}
	if n := openFds(t); n != before+len(endFiles) {
		t.Errorf("%d descriptors open with one spare, want %d (%d before, and its files)", n, before+len(endFiles), before)
	}
	startedIn(t, "true", Limits{})                // in the spare, which it leaves again
	startedIn(t, "sleep 1000 & exit 0", Limits{}) // takes the spare, leaves none
	DrainSpares()
	if n := openFds(t); n != before {
		t.Errorf("%d descriptors open once the spares are gone, want the %d before", n, before)
	}
}
