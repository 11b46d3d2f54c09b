//go:build linux

package proc

import (
	"context"
	"os"
	"testing"
	"time"
)

// startedIn runs command to its end and returns its exit and the cgroup
// it ran in.
func startedIn(t *testing.T, cfg Config) (Exit, string) {
	t.Helper()
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := p.Wait(context.Background())
	if p.cg == nil {
		t.Fatal("no cgroup in ModeCgroup")
	}
	return e, p.cg.dir
}

// TestSpareCgroup: the empty cgroup a command leaves serves the next one,
// which is not charged the CPU time of the one before; a command with
// limits, one that left a process behind, or one whose cgroup had a
// cgroup nested in it, never leaves a spare.
func TestSpareCgroup(t *testing.T) {
	if info, _ := containment(); info.Mode != ModeCgroup {
		t.Skip("no cgroups:", info)
	}
	drainSpares()
	defer drainSpares()

	busy, dir := startedIn(t, Config{Command: "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"})
	if busy.CPU < 50*time.Millisecond {
		t.Fatalf("the busy loop used %v of CPU, want more to tell it from the next", busy.CPU)
	}
	next, dir2 := startedIn(t, Config{Command: "true"})
	if dir2 != dir {
		t.Errorf("the next command ran in %s, want the spare %s", dir2, dir)
	}
	if next.CPU > busy.CPU/2 {
		t.Errorf("true used %v of CPU in the spare of a loop that used %v: charged the loop's", next.CPU, busy.CPU)
	}

	// A nested cgroup (a host running as a task makes them) is not kept.
	p, err := Start(context.Background(), Config{Command: "read x", Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.cg.dir != dir {
		t.Errorf("ran in %s, want the spare %s", p.cg.dir, dir)
	}
	if err := os.Mkdir(p.cg.dir+"/nested", 0o755); err != nil {
		t.Fatal(err)
	}
	p.CloseInput(context.Background())
	p.Wait(context.Background())
	if n := drainSpares(); n != 0 {
		t.Errorf("%d spares after a command whose cgroup had a nested one, want 0", n)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cgroup with a nested one is still there (%v)", err)
	}

	// A command that left a process behind (ended with cgroup.kill)
	// leaves no spare: the kernel went on killing what joined it.
	drainSpares()
	left, dir := startedIn(t, Config{Command: "sleep 1000 & exit 0"})
	if left.Leftovers != 1 {
		t.Errorf("leftovers = %d, want the sleep", left.Leftovers)
	}
	if n := drainSpares(); n != 0 {
		t.Errorf("%d spares after a command that left a process, want 0", n)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cgroup of a command that left a process is still there (%v)", err)
	}

	if CheckLimits(Limits{Pids: 64}) == nil {
		_, dir := startedIn(t, Config{Command: "true"})
		_, limited := startedIn(t, Config{Command: "true", Limits: Limits{Pids: 64}})
		if limited == dir {
			t.Errorf("a command with limits got the spare %s", dir)
		}
		if n := drainSpares(); n != 1 {
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
	if Containment().Mode != ModeCgroup {
		t.Skip("cgroups are not in use here")
	}
	kept := 0
	for range 20 {
		p, err := Start(t.Context(), Config{Command: "true"})
		if err != nil {
			t.Fatal(err)
		}
		base := p.cg.cpuBase
		for done := false; !done; {
			select {
			case <-p.Done():
				done = true
			default:
			}
			p.Usage()
		}
		p.Wait(t.Context())
		p.Usage()
		if p.cg.cpuBase != base {
			t.Fatalf("keeping the cgroup changed the ended command's CPU base from %v to %v", base, p.cg.cpuBase)
		}
		p.cg.mu.RLock()
		if p.cg.released {
			kept++
		}
		p.cg.mu.RUnlock()
	}
	if kept == 0 {
		t.Errorf("no cgroup of 20 commands was kept for the next: the test proves nothing")
	}
}
