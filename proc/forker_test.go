//go:build linux

package proc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/proc/sandbox"
)

// TestSandboxForkerNotRoot (issue 33 item 3): a host that is not root
// started each sandboxed command as this binary re-executed in a user
// namespace of its own (the step), 6 to 7 times an unsandboxed start.
// It now forks them from its forker, the step started once: the command
// is the host's own child (it waits for it, its status and resource
// usage as for any), fenced as before; a command cannot reach the
// forker's memory, signal it where Landlock scopes signals, nor stop the
// next start where it does not (a forker killed is replaced); and the
// forker ends with its host.
func TestSandboxForkerNotRoot(t *testing.T) {
	needSandbox(t)
	bin, cred := proctest.Unprivileged(t)
	cmd := exec.Command(bin, "forker")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = []string{helperEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{
		"way: forker\n", "parent: host\n", "exit: 3\n", "signal: terminated\n", "cpu: yes\n",
		"etc: refused\n", "ws: written\n", "net: own\n", "memory: done\n", "again: forked\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Where Landlock scopes signals (ABI 6) a command cannot kill it;
	// below, or fenced as if below, it can.
	kill := []string{"\nkill: killed\n"}
	if strings.Contains(string(out), "signals: scoped\n") {
		kill = []string{"\nkill: refused\n", "unscoped kill: killed\n"}
	}
	for _, want := range kill {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var pid int
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(line, "forker: "); ok {
			pid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if pid == 0 {
		t.Fatalf("no forker pid in:\n%s", out)
	}
	// Its host has exited: the forker (the one that replaced the killed
	// one), at the end of its socket, too.
	fd, err := unix.PidfdOpen(pid, 0)
	if err == syscall.ESRCH {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, int((10 * time.Second).Milliseconds())); err != nil || n != 1 {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "forker") {
			t.Errorf("the forker %d outlived its host by 10 s", pid)
		}
	}
}

// TestSandboxForkerNetworkIsFresh: the forker keeps the network
// namespace of a command that left nothing in it for the next, as a root
// host does (TestSandboxNetworkIsFreshForEachCommand), and never one
// with a socket left (a connection in TIME_WAIT) or a process. (That a
// namespace with a socket left is not used again is seen where
// commands are contained by cgroups, in the VM: in ModeMarks a command
// that leaves one seldom counts as having left nothing.)
func TestSandboxForkerNetworkIsFresh(t *testing.T) {
	needSandbox(t)
	bin, cred := proctest.Unprivileged(t)
	cmd := exec.Command(bin, "forker-net")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = []string{helperEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("the helper says:\n%s", out)
	lines := strings.Split(string(out), "\n")
	wants := []string{"time_wait: fresh", "process: fresh"}
	if lines[0] == "cgroup" {
		// In ModeMarks "left nothing" is "no pid was made on the machine
		// after its leader" (but the forker's threads): on a busy machine
		// an empty namespace may not be used again.
		wants = append(wants, "empty: reused")
	}
	for _, want := range wants {
		if !slices.Contains(lines, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// forkerNet is the helper "forker-net". Its commands exec at once, so
// that they leave nothing when they end (they fork nothing) but what
// they are asked to.
func forkerNet() int {
	ctx := context.Background()
	s := sandbox.Policy{Mode: sandbox.WorkspaceWrite}
	run := func(command string) string {
		p, err := proc.Start(ctx, proc.Config{Command: command, Dir: os.TempDir(), Sandbox: s, Env: append(os.Environ(), helperEnv+"=1")})
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		p.Wait(ctx)
		if !p.Forked() {
			fmt.Println("not forked")
		}
		return string(p.Read(proc.Combined, 0, 0).Data)
	}
	fmt.Println(proc.Containment().Mode)
	// Python, not this binary: its threads are pids made after the
	// leader, which would keep the namespace from being used again
	// whatever it left.
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		var lerr error
		if python, lerr = exec.LookPath("python3"); lerr != nil {
			fmt.Println("no python3 to leave a connection in TIME_WAIT")
			return 1
		}
	}
	// A namespace is told by its cookie, which the kernel never gives
	// another (SO_NETNS_COOKIE, Linux 5.14): its inode number is given
	// again to a new one once it is freed, which a command's end that
	// kills its leftovers at once makes likely.
	const cookie = `import socket
s = socket.socket(socket.AF_UNIX)
print(int.from_bytes(s.getsockopt(socket.SOL_SOCKET, 71, 8), "little"))
s.close()`
	ns := "exec " + python + " -c '" + cookie + "'"
	say := func(what string, same bool) {
		if same {
			fmt.Println(what + ": reused")
		} else {
			fmt.Println(what + ": fresh")
		}
	}
	// The forker prepares the next command's thread, its namespace
	// entered, as soon as it has answered for one (the command still
	// running): a namespace left empty serves the command after next.
	first, second, third := run(ns), run(ns), run(ns)
	say("empty", second == first || third == first)
	tw := run(`exec ` + python + ` -c 'import os, socket
l = socket.create_server(("127.0.0.1", 0))
c = socket.create_connection(l.getsockname())
s, _ = l.accept()
c.close(); s.recv(1); s.close()
` + cookie + `'`)
	if _, err := strconv.ParseUint(strings.TrimSpace(tw), 10, 64); err != nil {
		fmt.Printf("python3: %q\n", tw)
		return 1
	}
	next1, next2 := run(ns), run(ns)
	say("time_wait", next1 == tw || next2 == tw)
	left := run(python + " -c '" + cookie + "'; sleep 100 &")
	next1, next2 = run(ns), run(ns)
	say("process", next1 == left || next2 == left)
	return 0
}

// forkerHost is the helper "forker": sandboxed commands, as a host that
// is not root starts them, and what they show.
func forkerHost() int {
	ctx := context.Background()
	ws, err := os.MkdirTemp("", "offstage-forker-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(ws)
	s := sandbox.Policy{Mode: sandbox.WorkspaceWrite}
	run := func(command string) (*proc.Process, proc.Exit, string) {
		p, err := proc.Start(ctx, proc.Config{Command: command, Dir: ws, Sandbox: s, Env: append(os.Environ(), helperEnv+"=1")})
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		e, _ := p.Wait(ctx)
		return p, e, string(p.Read(proc.Combined, 0, 0).Data)
	}
	if st, _ := sandbox.Check(s); strings.Contains(strings.Join(st.Enforced, "; "), "signals and ptrace: Landlock scope") {
		fmt.Println("signals: scoped")
	}
	p, e, out := run(`echo "ppid: $PPID"; touch /etc/offstage-forker 2>/dev/null && echo "etc: written" || echo "etc: refused"
echo hi > f && echo "ws: written"
[ "$(readlink /proc/self/ns/net)" != "` + netns() + `" ] && echo "net: own"
i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done
exit 3`)
	fmt.Print(out)
	if p.Forked() {
		fmt.Println("way: forker")
	} else if p.ThroughStep() {
		fmt.Println("way: step")
	}
	if strings.Contains(out, fmt.Sprintf("ppid: %d\n", os.Getpid())) {
		fmt.Println("parent: host")
	}
	fmt.Println("exit:", e.Code)
	if e.CPU > 0 {
		fmt.Println("cpu: yes")
	}
	p, err = proc.Start(ctx, proc.Config{Command: "echo up; sleep 100", Dir: ws, Sandbox: s})
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	p.WaitOutput(ctx, 0)
	p.Stop(time.Second)
	e, _ = p.Wait(ctx)
	fmt.Println("signal:", e.Signal)
	forker := proc.ForkerPID()
	// Its memory: it is not dumpable, and Landlock keeps a command from
	// ptrace (and so /proc/PID/mem) of a process outside its domain.
	grab := `for t in /proc/` + strconv.Itoa(forker) + `/task/*; do if true <"$t/mem"; then echo "opened $t/mem"; fi; done 2>/dev/null; echo "memory: done"`
	for range 20 {
		if _, _, out := run(grab); out != "memory: done\n" {
			fmt.Print(out)
			break
		}
	}
	_, _, out = run(grab)
	fmt.Print(out)
	_, _, out = run("kill -9 " + strconv.Itoa(forker) + ` 2>/dev/null && echo "kill: killed" || echo "kill: refused"`)
	fmt.Print(out)
	if out == "kill: refused\n" {
		// Below ABI 6 a command can: the next start replaces the forker.
		proc.SandboxABI(5)
		defer proc.SandboxABI(0)
		_, _, out = run("kill -9 " + strconv.Itoa(forker) + ` 2>/dev/null && echo "unscoped kill: killed" || echo "unscoped kill: refused"`)
		fmt.Print(out)
	}
	if p, _, _ = run("true"); p.Forked() && proc.ForkerPID() != forker {
		fmt.Println("again: forked")
	}
	fmt.Println("forker:", proc.ForkerPID())
	return 0
}

// netns is this process's network namespace.
func netns() string {
	ns, _ := os.Readlink("/proc/self/ns/net")
	return ns
}

// TestSandboxForkerExecFailureLeavesNoZombie: a command the forker
// forks but cannot exec (a line longer than an argument may be, E2BIG)
// fails to start, saying why, and leaves no zombie behind: the command
// is the host's child (CLONE_PARENT), which the forker cannot reap, and
// whose pid it did not say, so it stayed a zombie of the host's until
// the host exited (an outsider's finding).
func TestSandboxForkerExecFailureLeavesNoZombie(t *testing.T) {
	needSandbox(t)
	bin, cred := proctest.Unprivileged(t)
	cmd := exec.Command(bin, "forker-exec-fails")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = []string{helperEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(string(out), "start: started") {
		t.Errorf("a start the kernel cannot exec started:\n%.2000s", out)
	}
	for _, want := range []string{"start: failed: ", "argument list too long", "zombies: 0\n", "again: forked\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// forkerExecFails is the helper "forker-exec-fails": a start the
// forker's exec fails, then the zombies of this process, then a start
// that works.
func forkerExecFails() int {
	ctx := context.Background()
	s := sandbox.Policy{Mode: sandbox.WorkspaceWrite}
	for _, c := range []proc.Config{
		{Command: "true #" + strings.Repeat("x", 200<<10)}, // one argument longer than the kernel takes
		{Command: "true", Env: append(os.Environ(), "BIG="+strings.Repeat("x", 200<<10))},
	} {
		c.Dir, c.Sandbox = os.TempDir(), s
		if _, err := proc.Start(ctx, c); err != nil {
			msg := err.Error()
			fmt.Println("start: failed:", msg[max(0, len(msg)-200):])
		} else {
			fmt.Println("start: started")
		}
	}
	zombies := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so from its end.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(os.Getpid()) {
			zombies++
		}
	}
	fmt.Println("zombies:", zombies)
	if p, err := proc.Start(ctx, proc.Config{Command: "true", Dir: os.TempDir(), Sandbox: s}); err == nil {
		p.Wait(ctx)
		if p.Forked() {
			fmt.Println("again: forked")
		}
	}
	return 0
}
