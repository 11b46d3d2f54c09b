//go:build linux

package proc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
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
//
// Both ways a fenced command starts are tried: forked from the caller's
// thread and fenced in the child (the fork of our own), and forked from
// the fenced thread. (A traced start, which v1 limits take, always goes
// to the fenced thread: TestRootCommandForkedFenced sees the fork of our
// own taken.)
func TestRootCommandStaysContained(t *testing.T) {
	requireRootCgroup(t)
	t.Run("own fork", func(t *testing.T) { stayContained(t) })
	t.Run("fenced thread", func(t *testing.T) {
		proc.OwnFork(false)
		defer proc.OwnFork(true)
		stayContained(t)
	})
}

// TestRootCommandForkedFenced: a root command without limits is forked
// by the fork of our own (on amd64), and fenced as from the fenced
// thread: the capabilities dropped from its bounding set, /sys read-only,
// no mount even in a user namespace of its own (Landlock), no clone3
// (which starts a process in any cgroup it has a descriptor of), in its
// directory, with its files, in a process group of its own, with the
// open-file limit os/exec gives (not the one Go raised for itself).
func TestRootCommandForkedFenced(t *testing.T) {
	requireRootCgroup(t)
	nofile, err := exec.Command("/bin/sh", "-c", "ulimit -Sn").Output()
	if err != nil {
		t.Fatal(err)
	}
	const script = `grep CapBnd /proc/self/status; awk '$5 == "/sys" { split($6, o, ","); print "sys", o[1] }' /proc/self/mountinfo; pwd; ps -o pgid= -p $$; echo $$; echo err >&2; unshare -Urm --propagation unchanged sh -c 'mount -t tmpfs none /mnt 2>/dev/null && echo mount ok || echo mount refused'; ulimit -Sn`
	for _, own := range []bool{true, false} {
		before := proc.OwnFork(own)
		dir := t.TempDir()
		p := mustStart(t, proc.Config{Command: script + "; " + os.Args[0] + " clone3 " + v2Root(t), Dir: dir, Env: append(os.Environ(), helperEnv+"=1")})
		mustWait(t, p)
		after := proc.OwnFork(true)
		out := p.Tail(10)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 9 {
			t.Fatalf("own fork %v: want 9 lines, got:\n%s", own, out)
		}
		var bnd uint64
		fmt.Sscanf(strings.TrimPrefix(lines[0], "CapBnd:"), "%x", &bnd)
		if bnd&(1<<21) != 0 || bnd&(1<<19) != 0 || bnd&(1<<23) != 0 || bnd&(1<<24) != 0 || bnd == 0 {
			t.Errorf("own fork %v: CapBnd %x keeps CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_NICE or CAP_SYS_RESOURCE", own, bnd)
		}
		if lines[1] != "sys ro" {
			t.Errorf("own fork %v: /sys is %q, want read-only", own, lines[1])
		}
		if lines[2] != dir {
			t.Errorf("own fork %v: ran in %q, want %q", own, lines[2], dir)
		}
		if strings.TrimSpace(lines[3]) != lines[4] {
			t.Errorf("own fork %v: process group %s, want its own (%s)", own, lines[3], lines[4])
		}
		if lines[5] != "err" {
			t.Errorf("own fork %v: stderr said %q", own, lines[5])
		}
		if lines[6] != "mount refused" {
			t.Errorf("own fork %v: in a user namespace of its own: %s", own, lines[6])
		}
		if want := strings.TrimSpace(string(nofile)); lines[7] != want {
			t.Errorf("own fork %v: open-file limit %s, os/exec gives %s", own, lines[7], want)
		}
		if want := "clone3: fork/exec /bin/true: function not implemented"; lines[8] != want {
			t.Errorf("own fork %v: clone3 into the root cgroup: %s, want %s", own, lines[8], want)
		}
		if forked := after > before; forked != (own && runtime.GOARCH == "amd64") {
			t.Errorf("own fork %v on %s: forked by it: %v", own, runtime.GOARCH, forked)
		}
	}
}

// TestRootCommandGetsTheSignalStateOsExecGives: a root command forked by
// the fork of our own, which takes its signal handlers from the kernel
// (CLONE_CLEAR_SIGHAND) and restores the signal mask itself, starts with
// what os/exec gives a command: no signal blocked, none caught, and the
// signals the host ignores still ignored (SIGPWR, ignored here for the
// test). A mask not restored would start the command with every signal
// blocked, and a handler reset where it was ignored would lose the
// ignore.
func TestRootCommandGetsTheSignalStateOsExecGives(t *testing.T) {
	requireRootCgroup(t)
	signal.Ignore(syscall.SIGPWR)
	defer signal.Reset(syscall.SIGPWR)
	const script = `exec grep -E '^Sig(Blk|Ign|Cgt)' /proc/self/status`
	want, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(want), "SigBlk:\t0000000000000000\n") {
		t.Fatalf("os/exec's command has signals blocked, so the test proves nothing:\n%s", want)
	}
	var ign uint64
	for line := range strings.Lines(string(want)) {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			fmt.Sscanf(strings.TrimSpace(v), "%x", &ign)
		}
	}
	if ign&(1<<(syscall.SIGPWR-1)) == 0 {
		t.Fatalf("os/exec's command does not ignore SIGPWR, so the test proves nothing:\n%s", want)
	}
	for _, own := range []bool{true, false} {
		before := proc.OwnFork(own)
		p := mustStart(t, proc.Config{Command: script})
		mustWait(t, p)
		after := proc.OwnFork(true)
		if got := p.Tail(10); !slices.Equal(strings.Fields(got), strings.Fields(string(want))) {
			t.Errorf("own fork %v: the command's signals:\n%s\nos/exec gives:\n%s", own, got, want)
		}
		if forked := after > before; forked != (own && runtime.GOARCH == "amd64") {
			t.Errorf("own fork %v on %s: forked by it: %v", own, runtime.GOARCH, forked)
		}
	}
}

func stayContained(t *testing.T) {
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
	for _, want := range []string{"root commands: cgroup file systems, sysfs and /proc/sys read-only", "CAP_SYS_ADMIN", "no clone3", "daemon"} {
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

// TestRootCommandForkedFencedUnderALowLimit runs
// TestRootCommandForkedFenced in a copy of this test binary started with
// a soft open-file limit below its hard one, which Go raises for itself
// and os/exec gives back to its children: the fork of our own must too.
func TestRootCommandForkedFencedUnderALowLimit(t *testing.T) {
	requireRootCgroup(t)
	cmd := exec.Command("/bin/sh", "-c", `ulimit -Sn 512 && exec "$0" -test.run '^TestRootCommandForkedFenced$' -test.v`, os.Args[0])
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRootCommandForkedFenced") {
		t.Errorf("under a soft open-file limit of 512: %v\n%s", err, out)
	}
}

// TestRootCommandThatCannotExec: a fenced command whose exec fails is
// refused with exec's error, and its child is reaped, both ways.
func TestRootCommandThatCannotExec(t *testing.T) {
	requireRootCgroup(t)
	for _, own := range []bool{true, false} {
		proc.OwnFork(own)
		_, err := proc.Start(context.Background(), proc.Config{Args: []string{"/nonexistent/offstage-cmd"}})
		if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
			t.Errorf("own fork %v: start of a missing program: %v", own, err)
		}
		if z := zombieChildren(); len(z) > 0 {
			t.Errorf("own fork %v: children left unreaped: %v", own, z)
		}
	}
	proc.OwnFork(true)
}

// zombieChildren lists this process's children that have exited and not
// been reaped.
func zombieChildren() []int {
	var zs []int
	for _, pid := range childPIDs() {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i:]), ") Z") {
			zs = append(zs, pid)
		}
	}
	return zs
}

// childPIDs lists this process's children.
func childPIDs() []int {
	var pids []int
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			var pid int
			fmt.Sscan(f, &pid)
			pids = append(pids, pid)
		}
	}
	return pids
}

// v2Root is where cgroup v2 is mounted here.
func v2Root(t *testing.T) string {
	t.Helper()
	for _, m := range ownCgroups() {
		if _, err := os.Stat(m.point + "/cgroup.controllers"); err == nil {
			return m.point
		}
	}
	t.Fatal("no cgroup v2 mount")
	return ""
}

// TestRootFenceCoversEveryProc (an outsider's finding): a proc mounted
// elsewhere than /proc (a chroot's) had a writable sys/kernel/core_pattern
// behind the fence, and /proc/sysrq-trigger was writable everywhere. A
// host made fresh, in a mount namespace of its own where such a proc is
// mounted, fences both.
func TestRootFenceCoversEveryProc(t *testing.T) {
	requireRootCgroup(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "proc-host", dir)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	want := dir + "/sys/kernel/core_pattern: refused\n" + dir + "/sysrq-trigger: refused\n"
	if err != nil || !strings.HasSuffix(string(out), want) {
		t.Errorf("%v:\n%s\nwant it to end:\n%s", err, out, want)
	}
}

// A root command takes no real-time priority, which its cgroup's CPU
// limit would not bound (without real-time group scheduling, as
// distributions' kernels are built), nor a negative nice value: the fence
// drops CAP_SYS_NICE, and CAP_SYS_RESOURCE, without which it cannot raise
// its real-time limit (RLIMIT_RTPRIO), which lets a process take
// real-time priorities up to it without CAP_SYS_NICE (an outsider's
// finding). Both ways a command is forked.
func TestRootFenceRefusesRealTime(t *testing.T) {
	requireRootCgroup(t)
	for _, tool := range []string{"chrt", "prlimit"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("this test needs %s (util-linux): %v", tool, err)
		}
	}
	const script = `chrt -f 10 true 2>/dev/null && echo real-time || echo no real-time
	nice -n -5 nice 2>/dev/null
	prlimit --pid $$ --rtprio=10:10 2>/dev/null && chrt -f 10 true 2>/dev/null && echo real-time by its limit || echo limit kept`
	for _, own := range []bool{true, false} {
		proc.OwnFork(own)
		p := mustStart(t, proc.Config{Command: script})
		mustWait(t, p)
		proc.OwnFork(true)
		if got, want := p.Tail(5), "no real-time\n0\nlimit kept\n"; got != want {
			t.Errorf("own fork %v: got %q, want %q", own, got, want)
		}
	}
	// The host could, or the test tells nothing: root here may lack
	// CAP_SYS_RESOURCE itself (some containers), and then the limit's
	// way cannot be tried.
	want := "real-time\n-5\nreal-time by its limit\n"
	if !hostHas(t, capSysResource) {
		want = "real-time\n-5\nlimit kept\n"
		t.Log("this host lacks CAP_SYS_RESOURCE: the real-time limit's way is not tried")
	}
	if out, err := exec.Command("sh", "-c", script).Output(); err != nil || string(out) != want {
		t.Errorf("the same script run by the host printed %q (%v), want %q: the test cannot tell", out, err, want)
	}
}

// capSysResource is CAP_SYS_RESOURCE's number.
const capSysResource = 24

// hostHas says whether this process has capability c in its effective set.
func hostHas(t *testing.T, c uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if hex, ok := strings.CutPrefix(line, "CapEff:\t"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && eff&(1<<c) != 0
		}
	}
	return false
}

// TestRootFenceWithInheritableCaps (an outsider's finding): a host
// started with capabilities in its inheritable set (setpriv --inh-caps,
// some container runtimes) gave them back to its root commands past the
// bounding set, CAP_SYS_ADMIN among them. Both ways a command is forked,
// it has none of the fence's dropped capabilities.
func TestRootFenceWithInheritableCaps(t *testing.T) {
	requireRootCgroup(t)
	const capSysPtrace, capSysAdmin = 19, 21
	for _, way := range []string{"own", "thread"} {
		cmd := exec.Command(os.Args[0], "caps-host", way)
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{AmbientCaps: []uintptr{capSysPtrace, capSysAdmin}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", way, err, out)
		}
		n := 0
		for line := range strings.Lines(string(out)) {
			name, hex, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "Cap") {
				continue
			}
			n++
			var set uint64
			fmt.Sscanf(strings.TrimSpace(hex), "%x", &set)
			if set&(1<<capSysAdmin|1<<capSysPtrace) != 0 {
				t.Errorf("%s: the command's %s is %x: CAP_SYS_ADMIN or CAP_SYS_PTRACE is back", way, name, set)
			}
		}
		if n != 4 {
			t.Errorf("%s: want 4 capability sets, got:\n%s", way, out)
		}
	}
}

// TestRootFenceSeesLaterMounts (an outsider's findings): the fence's
// namespace, a copy made at the first root command, did not see what the
// host mounted later where its mounts are private (a workspace mounted
// after it: the command ran in what lay underneath), and, where they are
// shared, saw a proc mounted later writable. The namespace is made again
// when the host's mounts change.
func TestRootFenceSeesLaterMounts(t *testing.T) {
	requireRootCgroup(t)
	for _, mode := range []string{"private", "shared"} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "later-mounts", dir, mode)
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		out, err := cmd.CombinedOutput()
		if want := "mounted later\ncore_pattern: refused\n"; err != nil || !strings.HasSuffix(string(out), want) {
			t.Errorf("%s: %v:\n%s\nwant it to end:\n%s", mode, err, out, want)
		}
	}
}

// TestRootFenceKeptWhileMountsStay: without a change of the host's
// mounts, the fence's namespace is made once.
func TestRootFenceKeptWhileMountsStay(t *testing.T) {
	requireRootCgroup(t)
	mustWait(t, mustStart(t, proc.Config{Command: "true"}))
	before := proc.FenceRemakes()
	for range 5 {
		mustWait(t, mustStart(t, proc.Config{Command: "true"}))
	}
	if n := proc.FenceRemakes() - before; n != 0 {
		t.Errorf("made again %d times over 5 starts with no mount in between", n)
	}
}
