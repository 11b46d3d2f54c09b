//go:build linux

package proc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/resource"
)

// TestRootCommandStaysContained: a command run by root without a
// sandbox cannot lift its pids limit (writing max into its pids.max),
// leave its cgroup (its pid into the root cgroup.procs of each
// hierarchy, directly, through /proc/1/root, after a remount, from pid
// 1's mount namespace, or on a cgroup file system it mounts in a user
// namespace of its own), and so the process it leaves behind in a new
// session ends with it (issue 34, item 2). With the root fence off, the
// same command gets out: the test sees that its checks can fail.
func TestRootCommandStaysContained(t *testing.T) {
	requireRootCgroup(t)
	out, alive := runEscape(t)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasSuffix(line, ": ok") && !strings.HasPrefix(line, "escapee") {
			t.Errorf("a root command got out: %s", line)
		}
	}
	if !strings.Contains(out, "escapee: ok") {
		t.Errorf("the command could not leave a process behind, so proves nothing:\n%s", out)
	}
	if alive > 0 {
		t.Errorf("%d processes the command left behind outlived it", alive)
	}
	t.Logf("the command's attempts:\n%s", out)
}

// TestRootCommandEscapesWithoutTheFence shows the escape the root fence
// stops, so that TestRootCommandStaysContained's checks can fail.
func TestRootCommandEscapesWithoutTheFence(t *testing.T) {
	requireRootCgroup(t)
	proc.RootFence(false)
	defer proc.RootFence(true)
	out, alive := runEscape(t)
	if !strings.Contains(out, "pids.max /") || !strings.Contains(out, ": ok") {
		t.Errorf("without the fence no way out worked:\n%s", out)
	}
	if alive == 0 {
		t.Errorf("without the fence the process left behind ended with the command:\n%s", out)
	}
}

func requireRootCgroup(t *testing.T) {
	t.Helper()
	if info := proc.Containment(); info.Mode != "cgroup" || os.Geteuid() != 0 {
		requireFeature(t, "OFFSTAGE_REQUIRE_CGROUP", fmt.Sprintf("needs root in cgroup mode (%v, euid %d)", info, os.Geteuid()))
	}
}

// runEscape runs the escape helper as root with a pids limit, and
// returns what it printed and how many of the processes it left behind
// were alive after it (then killed).
func runEscape(t *testing.T) (string, int) {
	t.Helper()
	sleep := fmt.Sprintf("4343.%d", time.Now().UnixNano()%1e9)
	cfg := helperConfig("escape", sleep)
	cfg.Limits = resource.Limits{Pids: 32}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := proc.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := p.Tail(100)
	if e.Code != 0 {
		t.Errorf("exit %+v:\n%s", e, out)
	}
	pids := processesNamed("sleep\x00" + sleep + "\x00")
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return out, len(pids)
}

// processesNamed lists the live processes whose command line is cmdline.
func processesNamed(cmdline string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == cmdline {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestContainmentSaysWhatRootCan: version -v and the start-up line (the
// containment's String) say what a root command can do there.
func TestContainmentSaysWhatRootCan(t *testing.T) {
	requireRootCgroup(t)
	s := proc.Containment().String()
	for _, want := range []string{"root commands: cgroup file systems, /sys and /proc/sys read-only", "CAP_SYS_ADMIN", "daemon"} {
		if !strings.Contains(s, want) {
			t.Errorf("Containment() = %q, want it to say %q", s, want)
		}
	}
	proc.RootFence(false)
	defer proc.RootFence(true)
	if s := proc.Containment().String(); !strings.Contains(s, "root commands can lift their limits and leave their cgroup") {
		t.Errorf("without the fence, Containment() = %q, want it to say what root commands can do", s)
	}
}

// TestRootCommandInARelativeDirectory: behind the root fence (whose
// thread's working directory is its namespace's /) a relative Dir is
// still relative to the host's working directory.
func TestRootCommandInARelativeDirectory(t *testing.T) {
	requireRootCgroup(t)
	wd, _ := os.Getwd()
	dir, err := os.MkdirTemp(wd, "relative-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p := mustStart(t, proc.Config{Command: "pwd", Dir: filepath.Base(dir)})
	mustWait(t, p)
	if got := strings.TrimSpace(p.Tail(1)); got != dir {
		t.Errorf("pwd = %q, want %q", got, dir)
	}
}

// TestRootCommandsStartTogether: root commands started at once share the
// fenced thread, or take one of their own while it is busy; each runs
// behind the fence, in its own cgroup.
func TestRootCommandsStartTogether(t *testing.T) {
	requireRootCgroup(t)
	const n = 16
	procs := filepath.Dir(proc.Containment().Dir) + "/cgroup.procs"
	errs := make(chan error, n)
	for range n {
		go func() {
			p, err := proc.Start(context.Background(), proc.Config{Command: "(echo $$ > " + procs + ") 2>&1 || echo refused"})
			if err != nil {
				errs <- err
				return
			}
			p.Wait(context.Background())
			if got := p.Tail(10); !strings.Contains(got, "refused") {
				errs <- fmt.Errorf("a root command wrote where the fence is read-only: %q", got)
				return
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
