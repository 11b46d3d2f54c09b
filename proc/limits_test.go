//go:build linux

package proc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/resource"
)

// limited skips nothing: where this host cannot enforce l (marks mode, a
// missing controller), it checks that asking for l is a clear error, at
// CheckLimits and at Start, and reports false. Under
// OFFSTAGE_REQUIRE_LIMITS=1 (the CI's VM, a delegated cgroup v2) such a
// host fails the test.
func limited(t *testing.T, l resource.Limits) bool {
	t.Helper()
	err := resource.Check(l)
	if err == nil {
		return true
	}
	if os.Getenv("OFFSTAGE_REQUIRE_LIMITS") == "1" {
		t.Fatalf("OFFSTAGE_REQUIRE_LIMITS=1, but CheckLimits(%v) = %v", l, err)
	}
	t.Logf("CheckLimits(%v) = %v", l, err)
	if !strings.Contains(err.Error(), "limit") {
		t.Errorf("CheckLimits(%v) = %q, want an error that names the limit", l, err)
	}
	p, serr := proc.Start(context.Background(), proc.Config{Command: "true", Limits: l})
	if serr == nil {
		p.Stop(0)
		p.Wait(context.Background())
		t.Fatalf("Start with %v = nil error, want %v", l, err)
	}
	if info := proc.Containment(); info.Mode == "cgroup" {
		t.Fatalf("containment is cgroup (%v), yet %v cannot be enforced: %v", info, l, err)
	}
	if os.Getenv(requireCgroup) != "" {
		t.Fatalf("%s is set, but %v cannot be enforced here (%v): %v", requireCgroup, l, proc.Containment(), err)
	}
	return false
}

// TestLimitMemory: a task with a 64 MiB memory limit that allocates 256
// MiB is killed by the kernel, and its exit says so (issue 22).
func TestLimitMemory(t *testing.T) {
	l := resource.Limits{Memory: 64 << 20}
	if !limited(t, l) {
		return
	}
	cfg := helperConfig("hold", "268435456")
	cfg.Limits = l
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
	if e.Contained.MemoryKills == 0 || e.Contained.MemoryLimit != 64<<20 {
		t.Errorf("Exit = %+v, want MemoryKills > 0 and MemoryLimit 64 MiB", e)
	}
	const want = "killed: it reached its memory limit of 64 MiB"
	if err := e.Err(); err == nil || err.Error() != want {
		t.Errorf("Exit.Err() = %v, want %q", err, want)
	}
	// The task that ran it ended by a limit (issue 38): ExitError is a
	// task.Ender.
	if by, reason := e.Err().(*proc.ExitError).EndedBy(); by != "limit" || !strings.Contains(reason, "memory") {
		t.Errorf("EndedBy() = %q, %q; want limit, memory", by, reason)
	}
}

// TestLimitMemoryFits: a command under its memory limit runs as ever.
func TestLimitMemoryFits(t *testing.T) {
	l := resource.Limits{Memory: 256 << 20, CPUs: 1.5}
	if !limited(t, l) {
		return
	}
	p, err := proc.Start(context.Background(), proc.Config{Command: "echo ok", Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := p.Wait(context.Background())
	if e.Err() != nil || e.Contained.MemoryKills != 0 {
		t.Errorf("Exit = %+v, want a clean exit", e)
	}
}

// TestLimitPids: a pids limit of 32 stops a fork bomb inside the task,
// and nothing outside it (issue 22).
func TestLimitPids(t *testing.T) {
	l := resource.Limits{Pids: 32}
	if !limited(t, l) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bomb := `i=0; while [ $i -lt 200 ]; do sleep 300 & i=$((i+1)); done; echo "spawned $i"; wait`
	p, err := proc.Start(ctx, proc.Config{Command: bomb, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(context.Background())
	defer p.Stop(0)
	if _, err := p.WaitLine(ctx, 0, regexp.MustCompile(`(?i)fork|resource temporarily unavailable`)); err != nil {
		t.Fatalf("WaitLine(fork failure) = %v; output: %q", err, p.Read(proc.Combined, 0, 0).Data)
	}
	if n := p.Processes(); n > 32 {
		t.Errorf("Processes() = %d, want at most 32", n)
	}
	// Outside the task, forking 64 processes still works.
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", `i=0; while [ $i -lt 64 ]; do sleep 0.2 & i=$((i+1)); done; wait; echo done`).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "done" {
		t.Errorf("64 forks outside the task: %v, %q", err, out)
	}
}

// TestLimitsInvalid: a negative or too small limit is refused with a
// sentence, before anything is started.
func TestLimitsInvalid(t *testing.T) {
	for _, l := range []resource.Limits{{Memory: -1}, {Memory: 1000}, {Pids: 1}, {CPUs: 0.001}} {
		if err := resource.Check(l); err == nil {
			t.Errorf("CheckLimits(%+v) = nil, want an error", l)
		}
		if _, err := proc.Start(context.Background(), proc.Config{Command: "true", Limits: l}); err == nil {
			t.Errorf("Start with %+v = nil error, want one", l)
		}
	}
}

// TestLimitCgroupsGoWithTheHost: the cgroups of a limited task, v1 ones
// included, are removed by the keeper when its host is killed, and by the
// next host's sweep when the keeper was killed too.
func TestLimitCgroupsGoWithTheHost(t *testing.T) {
	l := resource.Limits{Memory: 64 << 20, Pids: 64, CPUs: 1}
	if !limited(t, l) {
		return
	}
	hostDirs := func(dir string) []string {
		dirs := []string{dir}
		for _, v1 := range proc.V1Dirs() {
			dirs = append(dirs, filepath.Join(filepath.Dir(v1), filepath.Base(dir)))
		}
		return dirs
	}
	for _, keeperToo := range []bool{false, true} {
		host, _, dir, keeper := startHost(t, os.Environ(), "limited:sleep 1000")
		dirs := hostDirs(dir)
		for _, d := range dirs {
			if entries, err := os.ReadDir(d); err != nil || !slices.ContainsFunc(entries, os.DirEntry.IsDir) {
				t.Fatalf("the limited task's cgroup in %s: %v, %d entries", d, err, len(entries))
			}
		}
		if keeperToo {
			syscall.Kill(keeper, syscall.SIGKILL)
		}
		host.Process.Kill()
		host.Wait()
		if keeperToo {
			_, stdin, _, _ := startHost(t, os.Environ())
			stdin.Close()
		}
		for _, d := range dirs {
			awaitGone(t, d, 10*time.Second)
		}
	}
}

// TestLimitCPUs: a busy loop capped at a tenth of a CPU gets no more than
// that (and a period's worth of slack), however long it runs.
func TestLimitCPUs(t *testing.T) {
	l := resource.Limits{CPUs: 0.1}
	if !limited(t, l) {
		return
	}
	start := time.Now()
	p, err := proc.Start(context.Background(), proc.Config{Command: "while :; do :; done", Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(context.Background())
	defer p.Stop(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p.Wait(ctx) // runs until the timeout: the loop never ends
	u, elapsed := p.Usage(), time.Since(start)
	t.Logf("%v of CPU in %v", u.CPU, elapsed)
	if limit := time.Duration(0.1*float64(elapsed)) + 100*time.Millisecond; u.CPU > limit || u.CPU == 0 {
		t.Errorf("a busy loop capped at 0.1 CPUs used %v of CPU in %v, want some and at most %v", u.CPU, elapsed, limit)
	}
}
