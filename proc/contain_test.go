//go:build linux

package proc_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
)

// caseEnv marks every process a containment case starts, so the test can
// count survivors in /proc without trusting the mechanism under test.
const caseEnv = "OFFSTAGE_TEST_CASE"

// containCase is a command that leaves processes behind in a way that
// escapes the process group, or the lifeline, or both. Each leaves n
// sleep processes; the shell then ends as one more ("exec sleep") unless
// a test wants the leader to exit.
type containCase struct {
	name string
	cmd  string
	n    int
	// cgroupOnly: a documented limit of the marks (see "Containment"):
	// the case runs in ModeCgroup only.
	cgroupOnly bool
}

var containCases = []containCase{
	{"setsid subshell", "(setsid sleep 1000 &)", 1, false},
	{"setsid -f", "setsid -f sleep 1000", 1, false},
	{"double-fork daemon", "(setsid sh -c 'sleep 1000 & exit' &)", 1, false},
	{"ignores TERM HUP IO", "(trap '' TERM HUP IO; exec sleep 1000) &", 1, false},
	{"setsid and ignores all", `setsid sh -c "trap '' TERM HUP IO INT QUIT; exec sleep 1000" &`, 1, false},
	{"nohup", "nohup sleep 1000 >/dev/null 2>&1 &", 1, false},
	{"200 sleepers", "i=0; while [ $i -lt 200 ]; do sleep 1000 & i=$((i+1)); done", 200, false},
	// The four of issue 22: the first forks at once, before a mark set
	// after the exec could be, and clears the environment; the others
	// reset RLIMIT_RTTIME, and clear the environment too.
	{"env -i subshell race", "( setsid env -i bash -c 'exec -a kworker/u8:3 SLEEP 1000' & )", 1, false},
	{"rlimit reset", "prlimit --rttime=unlimited setsid -f SLEEP 1000", 1, true},
	{"rlimit reset, env -i, exec -a", "prlimit --rttime=unlimited setsid -f env -i bash -c 'exec -a kworker/u8:3 SLEEP 1000'", 1, true},
	{"other rlimit, double fork, empty env", `prlimit --rttime=12345:unlimited env -i /bin/sh -c "(setsid /bin/sh -c 'SLEEP 1000 & exit' &)"`, 1, true},
}

// caseCommand returns c's command with every sleep of it carrying the
// case's token as its argument (a duration a little over 1000s), so that
// the test finds its processes by their command line even when they
// cleared their environment; SLEEP is sleep's full path, for shells
// started without PATH.
func caseCommand(t *testing.T, cmd, token string) string {
	t.Helper()
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("sleep(1) not installed")
	}
	cmd = strings.ReplaceAll(cmd, "sleep 1000", "sleep "+token)
	return strings.ReplaceAll(cmd, "SLEEP 1000", path+" "+token)
}

// casesHere returns the cases this host's containment must contain.
func casesHere() []containCase {
	var out []containCase
	for _, c := range containCases {
		if !c.cgroupOnly || proc.Containment().Mode == "cgroup" {
			out = append(out, c)
		}
	}
	return out
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s(1) not installed", tool)
		}
	}
}

var caseSeq atomic.Int64

// newCase returns a unique marker and the environment that carries it.
// The marker is also a sleep duration (see caseCommand).
func newCase(t *testing.T) (string, []string) {
	t.Helper()
	id := fmt.Sprintf("1000.%07d%05d", os.Getpid()%10_000_000, caseSeq.Add(1))
	return id, append(os.Environ(), caseEnv+"="+id)
}

// sleepers returns the live sleep processes whose environment carries the
// marker id, or whose argument it is.
func sleepers(t *testing.T, id string) []int {
	t.Helper()
	want := []byte(caseEnv + "=" + id)
	paths, err := filepath.Glob("/proc/[0-9]*/environ")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, path := range paths {
		dir := filepath.Dir(path)
		comm, err := os.ReadFile(dir + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "sleep" {
			continue
		}
		env, _ := os.ReadFile(path) // unreadable (another user's): the arguments still tell
		args, _ := os.ReadFile(dir + "/cmdline")
		if !slicesContain(bytes.Split(env, []byte{0}), want) && !slicesContain(bytes.Split(args, []byte{0}), []byte(id)) {
			continue
		}
		if stat, err := os.ReadFile(dir + "/stat"); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
				continue
			}
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		pids = append(pids, pid)
	}
	return pids
}

func slicesContain(list [][]byte, b []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, b) {
			return true
		}
	}
	return false
}

// awaitSleepers polls until exactly n marked sleepers are alive and
// returns how long it took; it fails the test after timeout. Polling is
// how an outside observer sees processes come and go: /proc has no
// notifications.
func awaitSleepers(t *testing.T, id string, n int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := sleepers(t, id)
		if len(got) == n {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("after %v: %d marked sleepers alive (pids %v), want %d", timeout, len(got), got[:min(len(got), 10)], n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killSleepers is the test's own clean-up, so a failure leaves nothing.
func killSleepers(t *testing.T, id string) {
	t.Cleanup(func() {
		for _, pid := range sleepers(t, id) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// TestContainment starts each case and ends it each way a process can
// end: Stop, its context ending (a task's cancel, its owner's end, a
// table's Close), its context's deadline (a task's timeout), and its
// leader's exit. No process of the case may outlive it, and Wait returns
// only once none is left. (Shell tasks end through the same contexts;
// tools tests the states they end in.)
func TestContainment(t *testing.T) {
	needTools(t, "setsid", "nohup", "prlimit", "bash")
	t.Log(proc.Containment())
	stopped := errors.New("context ended")
	ends := []struct {
		name   string
		leader string // what the shell does after the case
		end    func(p *proc.Process, cancel context.CancelCauseFunc)
		cause  error // the exit's, when stopped
	}{
		{"stop", "exec sleep 1000", func(p *proc.Process, _ context.CancelCauseFunc) { p.Stop(500 * time.Millisecond) }, proc.ErrStopped},
		{"cancel", "exec sleep 1000", func(_ *proc.Process, cancel context.CancelCauseFunc) { cancel(stopped) }, stopped},
		{"timeout", "exec sleep 1000", nil, context.DeadlineExceeded},
		{"leader exits", "echo done", nil, nil},
	}
	for _, c := range casesHere() {
		for _, end := range ends {
			t.Run(c.name+"/"+end.name, func(t *testing.T) {
				t.Parallel()
				id, env := newCase(t)
				killSleepers(t, id)
				ctx, cancel := context.WithCancelCause(t.Context())
				defer cancel(nil)
				want := c.n + 1
				if end.name == "timeout" {
					// Long enough for 200 sleepers to start on a loaded
					// machine, under the race detector.
					var stop context.CancelFunc
					ctx, stop = context.WithTimeout(ctx, 8*time.Second)
					defer stop()
				}
				cmd := caseCommand(t, c.cmd, id) + "\n" + end.leader
				if end.name == "leader exits" {
					// The leader has to see its processes started before
					// it exits, or the test could not tell.
					want = c.n
					cmd = caseCommand(t, c.cmd, id) + "\n" + waitForSleepers(id, c.n) + "\n" + end.leader
				}
				p, err := proc.Start(ctx, proc.Config{Command: cmd, Env: env, Grace: 500 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				if end.name != "leader exits" {
					awaitSleepers(t, id, want, 20*time.Second)
				}
				if end.end != nil {
					end.end(p, cancel)
				}
				e := mustWait(t, p)
				if got := sleepers(t, id); len(got) != 0 {
					t.Errorf("process ended (%v) with %d of its processes alive: %v", e.Err(), len(got), got[:min(len(got), 10)])
				}
				if err := e.Err(); !errors.Is(err, end.cause) || (end.cause == nil) != (err == nil) {
					t.Errorf("Exit.Err() = %v, want %v", err, end.cause)
				}
			})
		}
	}
}

// waitForSleepers is shell code that waits until n sleep processes of the
// case run, so that a leader that exits right after its case exits only
// once there is something to leave behind. It counts them as the test
// does, by the token in their command line.
func waitForSleepers(id string, n int) string {
	return fmt.Sprintf(`k=0; while [ "$(grep -lzx %s /proc/[0-9]*/cmdline 2>/dev/null | sed 's#cmdline#comm#' | xargs -r cat 2>/dev/null | grep -cx sleep)" -lt %d ] && [ $k -lt 2000 ]; do sleep 0.01; k=$((k+1)); done`,
		shellQuote(id), n)
}

// TestContainmentSparesOthers: stopping one command kills none of a
// sibling command's processes, nor a process with the same command line that
// no task started.
func TestContainmentSparesOthers(t *testing.T) {
	needTools(t, "setsid")
	mine, env := newCase(t)
	theirs, theirEnv := newCase(t)
	killSleepers(t, mine)
	killSleepers(t, theirs)
	cmd := "setsid -f sleep 1000; exec sleep 1000"
	a := mustStart(t, proc.Config{Command: cmd, Env: env})
	b := mustStart(t, proc.Config{Command: cmd, Env: theirEnv})
	stranger := exec.Command("setsid", "-f", "sleep", "1000")
	stranger.Env = theirEnv
	if err := stranger.Run(); err != nil {
		t.Fatal(err)
	}
	awaitSleepers(t, mine, 2, 20*time.Second)
	awaitSleepers(t, theirs, 3, 20*time.Second)
	a.Stop(3 * time.Second)
	mustWait(t, a)
	if got := sleepers(t, mine); len(got) != 0 {
		t.Errorf("the stopped process left %v", got)
	}
	if got := sleepers(t, theirs); len(got) != 3 {
		t.Errorf("after stopping %d: %d of the sibling's and the stranger's 3 sleepers alive, want 3", a.PID(), len(got))
	}
	b.Stop(3 * time.Second)
	mustWait(t, b)
	if got := sleepers(t, theirs); len(got) != 1 {
		t.Errorf("after stopping %d too: %d sleepers alive, want the stranger's 1", b.PID(), len(got))
	}
}

// TestProcessesCountsEscapees: Processes counts the leader and what left
// its group, and the exit says how many were left when the leader went.
func TestProcessesCountsEscapees(t *testing.T) {
	needTools(t, "setsid")
	id, env := newCase(t)
	killSleepers(t, id)
	p := mustStart(t, proc.Config{Command: "setsid -f sleep 1000; setsid -f sleep 1000; sleep 1000 & echo up; read _; exit 0", Env: env, Stdin: true})
	readUntil(t, p, "up")
	awaitSleepers(t, id, 3, 20*time.Second)
	if got := p.Processes(); got != 4 {
		t.Errorf("Processes() = %d, want 4 (the shell and 3 sleepers, 2 of them in sessions of their own)", got)
	}
	p.CloseInput(t.Context()) // read returns: the leader exits
	e := mustWait(t, p)
	if e.Contained.Leftovers != 3 || e.Contained.Survivors != 0 {
		t.Errorf("Exit = %+v, want Leftovers 3, Survivors 0", e)
	}
	if got := p.Processes(); got != 0 {
		t.Errorf("Processes() after Wait = %d, want 0", got)
	}
	if got := sleepers(t, id); len(got) != 0 {
		t.Errorf("leftovers alive after Wait: %v", got)
	}
}

// TestStopGivesEscapeesTheGrace: a process out of the group that handles
// SIGTERM gets the grace to end by itself, even after the leader went.
func TestStopGivesEscapeesTheGrace(t *testing.T) {
	needTools(t, "setsid")
	dir := t.TempDir()
	flag := filepath.Join(dir, "cleaned")
	// The escapee takes 200ms to clean up after SIGTERM, then exits.
	escapee := fmt.Sprintf(`setsid sh -c "trap 'sleep 0.2; touch %s; exit 0' TERM; echo ready; while :; do sleep 0.05; done" &`, flag)
	p := mustStart(t, proc.Config{Command: escapee + " exec sleep 1000", Grace: 3 * time.Second})
	readUntil(t, p, "ready")
	p.Stop(3 * time.Second)
	e := mustWait(t, p)
	if _, err := os.Stat(flag); err != nil {
		t.Errorf("the escapee was not given the time to clean up: %v (exit %+v)", err, e)
	}
	if e.Duration > 2500*time.Millisecond {
		t.Errorf("Wait took %v: it waited out the grace though everything had ended", e.Duration)
	}
}

// TestNoFDLeak: starting and containing processes leaves no descriptor
// open (the keeper's one pipe, and the root fence's namespace and
// ruleset, are opened by the first Start, before the count; the spare
// cgroups, which keep their files open for the next command, are
// removed before each count).
func TestNoFDLeak(t *testing.T) {
	needTools(t, "setsid")
	mustWait(t, mustStart(t, proc.Config{Command: "true"}))
	proc.DrainSpareCgroups()
	before := openFDs(t)
	id, env := newCase(t)
	for range 5 {
		p := mustStart(t, proc.Config{Command: "setsid -f sleep 1000; echo x", Env: env})
		mustWait(t, p)
		p2 := mustStart(t, proc.Config{Command: "setsid -f sleep 1000; exec sleep 1000", Env: env})
		p2.Stop(time.Second)
		mustWait(t, p2)
	}
	if got := sleepers(t, id); len(got) != 0 {
		t.Errorf("sleepers left: %v", got)
	}
	proc.DrainSpareCgroups()
	if after := openFDs(t); after != before {
		t.Errorf("open descriptors: %d before, %d after", before, after)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestHostDeath runs a host (this binary re-executed) that starts every
// case, then ends it: by a normal exit with nothing closed, or by
// SIGKILL. Its keeper must end every process of every case.
func TestHostDeath(t *testing.T) {
	needTools(t, "setsid", "nohup", "prlimit", "bash")
	for _, how := range []string{"exit", "SIGKILL"} {
		t.Run(how, func(t *testing.T) {
			id, env := newCase(t)
			killSleepers(t, id)
			want := 0
			var cmds []string
			cases := casesHere()
			for _, c := range cases {
				cmds = append(cmds, caseCommand(t, c.cmd, id)+"\nexec sleep 1000")
				want += c.n + 1
			}
			host, stdin, dir, _ := startHost(t, env, cmds...)
			awaitSleepers(t, id, want, 30*time.Second)
			start := time.Now()
			switch how {
			case "exit":
				stdin.Close() // the host exits 0 without stopping anything
			case "SIGKILL":
				host.Process.Kill()
			}
			host.Wait()
			awaitSleepers(t, id, 0, 10*time.Second)
			t.Logf("%d processes of %d cases gone %v after the host's %s", want, len(cases), time.Since(start).Round(time.Millisecond), how)
			if dir != "" {
				awaitGone(t, dir, 10*time.Second)
			}
		})
	}
}

// TestKeeper: one keeper per host, small, and replaced if it is killed.
func TestKeeper(t *testing.T) {
	k := proc.Keeper()
	if k.PID == 0 {
		t.Fatalf("Keeper() = %+v, want a running keeper", k)
	}
	again := proc.Keeper()
	if again.PID != k.PID {
		t.Errorf("second Keeper() = %d, want the same keeper %d", again.PID, k.PID)
	}
	t.Logf("keeper pid %d, resident memory %d KiB, %d KiB of it its own", again.PID, again.RSS>>10, again.Private>>10)
	if again.RSS == 0 || again.Private == 0 || again.Private > again.RSS {
		t.Errorf("Keeper() memory = %d resident, %d private; want both read, private within resident", again.RSS, again.Private)
	}
	if err := syscall.Kill(k.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		again := proc.Keeper()
		if again.PID != k.PID && again.PID != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Keeper() after killing it = %+v, want a new one", again)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitGone polls until path no longer exists (the keeper removes a dead
// host's cgroups: no notification reaches the test).
func awaitGone(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(path)
			t.Fatalf("%s still there after %v, holding %d entries", path, timeout, len(entries))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readHost reads what the contain-host helper says up to "ready": its
// cgroup directory ("" in ModeMarks) and its keeper's pid.
func readHost(t *testing.T, stdout io.Reader) (dir string, keeper int) {
	t.Helper()
	out := bufio.NewReader(stdout)
	var said []string
	for {
		line, err := out.ReadString('\n')
		said = append(said, line)
		line = strings.TrimSuffix(line, "\n")
		switch {
		case err != nil:
			t.Fatalf("host said %q, want its cgroup directory, its keeper, then ready", said)
		case line == "ready":
			return dir, keeper
		case strings.HasPrefix(line, "dir "):
			dir = strings.TrimPrefix(line, "dir ")
		case strings.HasPrefix(line, "keeper "):
			keeper, _ = strconv.Atoi(strings.TrimPrefix(line, "keeper "))
		}
	}
}

// startHost starts the contain-host helper with cmds, and reads what it
// says up to ready. Closing stdin ends it.
func startHost(t *testing.T, env []string, cmds ...string) (host *exec.Cmd, stdin io.WriteCloser, dir string, keeper int) {
	t.Helper()
	host = exec.Command(os.Args[0], append([]string{"contain-host"}, cmds...)...)
	host.Env = append(env, helperEnv+"=1")
	stdin, err := host.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })
	dir, keeper = readHost(t, stdout)
	return host, stdin, dir, keeper
}

// TestRestartSweepsStale: a host killed together with its keeper leaves
// its cgroups, with what escaped its process group alive in them; the
// next host on the same cgroup ends them and removes the directory.
func TestRestartSweepsStale(t *testing.T) {
	needTools(t, "setsid")
	if proc.Containment().Mode != "cgroup" {
		requireFeature(t, requireCgroup, fmt.Sprint("no cgroups in ", proc.Containment()))
	}
	id, env := newCase(t)
	killSleepers(t, id)
	host, _, dir, keeper := startHost(t, env, caseCommand(t, "setsid -f sleep 1000\nexec sleep 1000", id))
	awaitSleepers(t, id, 2, 20*time.Second)
	if keeper == 0 {
		t.Fatal("the host has no keeper")
	}
	syscall.Kill(keeper, syscall.SIGKILL)
	host.Process.Kill()
	host.Wait()
	// The lifeline ends the group; the setsid'd one stays, in the dead
	// host's directory, until a host starts. Any host of this pid
	// namespace sweeps on its start, and other test binaries start hosts
	// (go test runs packages side by side): one may have come first.
	var left []int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if left = sleepers(t, id); len(left) <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: sleepers %v alive, want the group's gone with its host", left)
		}
	}
	if _, err := os.Stat(dir); len(left) == 1 && err != nil {
		t.Fatalf("the dead host's directory: %v while its escaped sleeper %v lives, want it left for the next host", err, left)
	} else if len(left) == 0 {
		t.Logf("another host swept the dead host's directory first (%v)", err)
	}
	_, stdin, _, _ := startHost(t, os.Environ())
	defer stdin.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the next host left the dead host's %s (%v)", dir, err)
	}
	if got := sleepers(t, id); len(got) != 0 {
		t.Errorf("the next host left the dead host's processes %v", got)
	}
}

// TestNestedHost: a host that runs as a task nests its cgroups in the
// task's; the task counts and ends what they hold, and removes them. A
// host run by root as a task of a root host is behind the root fence,
// where cgroups are read-only: it contains its commands by marks, and
// the outer task still counts and ends them all.
func TestNestedHost(t *testing.T) {
	needTools(t, "setsid")
	if proc.Containment().Mode != "cgroup" {
		requireFeature(t, requireCgroup, fmt.Sprint("no cgroups in ", proc.Containment()))
	}
	if os.Geteuid() != 0 {
		nestedHost(t, false)
		return
	}
	t.Run("fenced", func(t *testing.T) { nestedHost(t, true) })
	t.Run("unfenced", func(t *testing.T) {
		proc.RootFence(false)
		defer proc.RootFence(true)
		nestedHost(t, false)
	})
}

func nestedHost(t *testing.T, fenced bool) {
	id, env := newCase(t)
	killSleepers(t, id)
	cfg := helperConfig("contain-host", caseCommand(t, "setsid -f sleep 1000\nexec sleep 1000", id))
	cfg.Env, cfg.Stdin = append(env, helperEnv+"=1"), true
	p := mustStart(t, cfg)
	readUntil(t, p, "ready")
	awaitSleepers(t, id, 2, 20*time.Second)
	out := string(p.Read(proc.Combined, 0, 4096).Data)
	_, rest, _ := strings.Cut(out, "dir ")
	inner, _, _ := strings.Cut(rest, "\n")
	switch {
	case fenced && inner != "":
		t.Fatalf("the inner host behind the root fence made cgroups in %q", inner)
	case !fenced && !strings.HasPrefix(inner, proc.Containment().Dir+"/"):
		t.Fatalf("the inner host's directory %q is not in one of ours (%s)", inner, proc.Containment().Dir)
	}
	// The inner host, its keeper, and its task's two sleepers.
	if got := p.Processes(); got != 4 {
		t.Errorf("Processes() = %d, want 4: the inner host, its keeper, its task's 2 sleepers", got)
	}
	p.Stop(time.Second)
	e := mustWait(t, p)
	if got := sleepers(t, id); len(got) != 0 || e.Contained.Survivors != 0 {
		t.Errorf("after the outer task ended: sleepers %v, exit %+v", got, e)
	}
	if _, err := os.Stat(inner); inner != "" && !os.IsNotExist(err) {
		t.Errorf("the inner host's directory is still there (%v)", err)
	}
}
