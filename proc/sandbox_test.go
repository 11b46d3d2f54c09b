//go:build linux

package proc_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/proc/sandbox"
)

// runIn runs command under sandbox s in dir and returns its output.
func runIn(t *testing.T, s sandbox.Policy, dir, command string) (string, proc.Exit) {
	t.Helper()
	env := append(os.Environ(), helperEnv+"=1")
	p := mustStart(t, proc.Config{Command: command, Dir: dir, Sandbox: s, Env: env})
	checkWay(t, p)
	e := mustWait(t, p)
	return string(p.Read(proc.Combined, 0, 0).Data), e
}

// stepOnly is the way bothWays is running, for checkWay.
var stepOnly bool

// bothWays runs test twice: as this host starts a sandboxed command (as
// root, from a fenced thread of the test process), and through the
// re-executed step (as a host that must make a user namespace, or
// traces its starts, does). Each must hold the same fence.
func bothWays(t *testing.T, test func(t *testing.T)) {
	t.Run("host", test)
	t.Run("step", func(t *testing.T) {
		proc.SandboxStep(true)
		stepOnly = true
		defer func() { proc.SandboxStep(false); stepOnly = false }()
		test(t)
	})
}

// checkWay fails t if a sandboxed p was not started the way bothWays
// asked.
func checkWay(t *testing.T, p *proc.Process) {
	t.Helper()
	if stepOnly && p.Sandbox().Mode != sandbox.Off && !p.ThroughStep() {
		t.Errorf("started from a fenced thread, not through the step")
	}
}

// needSandbox skips where the host cannot hold the fence at all (the
// machines this project runs on can: Landlock ABI 7, network namespaces).
func needSandbox(t *testing.T) sandbox.Status {
	t.Helper()
	st, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()})
	if err != nil {
		requireFeature(t, requireSandbox, "no sandbox on this host: "+err.Error())
	}
	return st
}

// signalsScoped says whether a sandbox of status st keeps its commands
// from signalling processes outside it (Landlock ABI 6 scopes signals).
// Where it does not, it fails t unless st says so, as the user and the
// model are to be told (docs/sandbox.md's table: "not fenced").
func signalsScoped(t *testing.T, st sandbox.Status) bool {
	t.Helper()
	if strings.Contains(strings.Join(st.Enforced, "; "), "signals and ptrace: Landlock scope") {
		return true
	}
	if gaps := strings.Join(st.Gaps, "; "); !strings.Contains(gaps, "signals: the command can signal processes of the same user outside it") {
		t.Errorf("the sandbox neither scopes signals nor says it does not: Enforced %q, Gaps %q", st.Enforced, st.Gaps)
	} else {
		t.Logf("signals are not scoped on this host, as the sandbox says: %s", gaps)
	}
	return false
}

func TestSandboxWorkspaceWriteFencesWritesAndNetwork(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		needSandbox(t)
		ws := t.TempDir()
		outside := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
			t.Fatal(err)
		}
		home, _ := os.UserHomeDir()
		homeFile := filepath.Join(home, "offstage-sandbox-test-"+strconv.Itoa(os.Getpid()))
		etcFile := "/etc/offstage-sandbox-test-" + strconv.Itoa(os.Getpid())
		t.Cleanup(func() { os.Remove(homeFile); os.Remove(etcFile) })

		tcp, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer tcp.Close()
		udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer udp.Close()

		s := sandbox.Policy{Mode: sandbox.WorkspaceWrite}
		self := os.Args[0]
		script := strings.Join([]string{
			`echo inside > in.txt && echo "ws: ok"`,
			`touch ` + homeFile + ` 2>/dev/null && echo "home: written" || echo "home: refused"`,
			`touch ` + etcFile + ` 2>/dev/null && echo "etc: written" || echo "etc: refused"`,
			`echo x > link/escaped 2>/dev/null && echo "link: written" || echo "link: refused"`,
			// A daemon in a session of its own: its write outside is refused,
			// its write inside lands.
			`setsid -f sh -c 'touch ` + etcFile + ` 2>/dev/null && echo written > daemon || echo refused > daemon'`,
			`for i in $(seq 100); do [ -s daemon ] && break; sleep 0.02; done; echo "daemon: $(cat daemon)"`,
			`head -c1 /etc/hostname >/dev/null && echo "hostname: read"`,
			self + ` dial ` + tcp.Addr().String(),
			self + ` udp ` + udp.LocalAddr().String(),
		}, "\n")
		out, e := runIn(t, s, ws, script)
		for _, want := range []string{"ws: ok", "home: refused", "etc: refused", "link: refused", "daemon: refused", "hostname: read"} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if b, err := os.ReadFile(filepath.Join(ws, "in.txt")); err != nil || string(b) != "inside\n" {
			t.Errorf("in.txt = %q, %v", b, err)
		}
		for _, f := range []string{homeFile, etcFile, filepath.Join(outside, "escaped")} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s was written from the sandbox", f)
			}
		}
		if strings.Contains(out, "connected") || !strings.Contains(out, "dial:") {
			t.Errorf("TCP to the host's 127.0.0.1 was not refused:\n%s", out)
		}
		udp.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, _, err := udp.ReadFrom(make([]byte, 16)); err == nil {
			t.Errorf("a datagram of %d bytes reached the host from the sandbox", n)
		}
		_ = e

		// The same, unsandboxed, reaches both: the test can fail.
		out, _ = runIn(t, sandbox.Policy{}, ws, self+" dial "+tcp.Addr().String()+"; "+self+" udp "+udp.LocalAddr().String())
		if !strings.Contains(out, "connected") {
			t.Errorf("unsandboxed dial: %s", out)
		}
		udp.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := udp.ReadFrom(make([]byte, 16)); err != nil {
			t.Errorf("unsandboxed datagram: %v", err)
		}
	})
}

func TestSandboxReadOnlyWritesOnlyItsTemporaryDirectory(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		needSandbox(t)
		ws := t.TempDir()
		p := mustStart(t, proc.Config{Dir: ws, Sandbox: sandbox.Policy{Mode: sandbox.ReadOnly},
			Command: `echo t > "$TMPDIR/t" && cat "$TMPDIR/t";  { echo w > here; } 2>/dev/null && echo "ws: written" || echo "ws: refused"; ` +
				`touch /tmp/offstage-ro-$$ 2>/dev/null && echo "tmp: written" || echo "tmp: refused"`})
		checkWay(t, p)
		e := mustWait(t, p)
		out := string(p.Read(proc.Combined, 0, 0).Data)
		if out != "t\nws: refused\ntmp: refused\n" {
			t.Errorf("output = %q (exit %+v)", out, e)
		}
		st := p.Sandbox()
		if st.Mode != sandbox.ReadOnly || len(st.Writable) != 1 || st.Network {
			t.Errorf("Sandbox() = %+v, want read-only, its temporary directory alone, no network", st)
		}
		if _, err := os.Stat(st.Writable[0]); !os.IsNotExist(err) {
			t.Errorf("the temporary directory %s is still there after the exit: %v", st.Writable[0], err)
		}
	})
}

// A sandboxed task cannot signal, nor ptrace, the host or another task.
// (Reading /proc/PID/environ of a process of the same user is not a
// ptrace attach, and Landlock lets it through on 6.18: ProtectHost is
// what hides the host's.) Below Landlock ABI 6 signals are not scoped,
// as the sandbox says; ptrace is refused at every ABI.
func TestSandboxCannotSignalOrTraceOutside(t *testing.T) {
	scoped := signalsScoped(t, needSandbox(t))
	bothWays(t, func(t *testing.T) {
		other := mustStart(t, proc.Config{Command: "sleep 100"})
		host := strconv.Itoa(os.Getpid())
		script := os.Args[0] + ` ptrace ` + strconv.Itoa(other.PID()) + ` >/dev/null && echo "ptrace: attached" || echo "ptrace: refused"
	sleep 100 & kill $! && echo "own: signalled"`
		want := "ptrace: refused\nown: signalled\n"
		if scoped {
			script = `kill -0 ` + host + ` 2>/dev/null && echo "host: signalled" || echo "host: refused"
	kill -TERM ` + strconv.Itoa(other.PID()) + ` 2>/dev/null && echo "other: signalled" || echo "other: refused"
	` + script
			want = "host: refused\nother: refused\n" + want
		}
		out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, t.TempDir(), script)
		if out != want {
			t.Errorf("output = %q, want %q", out, want)
		}
		if _, done := other.Exit(); done {
			t.Error("the other task was killed from the sandbox")
		}
	})
}

func TestSandboxOnATerminal(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		needSandbox(t)
		p := mustStart(t, proc.Config{TTY: true, Dir: t.TempDir(), Sandbox: sandbox.Policy{Mode: sandbox.WorkspaceWrite},
			Command: `touch /etc/offstage-tty-$$ 2>/dev/null && echo written || echo refused; stty size; echo ok > f && cat f`})
		checkWay(t, p)
		mustWait(t, p)
		out := strings.ReplaceAll(string(p.Read(proc.Combined, 0, 0).Data), "\r", "")
		if out != "refused\n40 120\nok\n" {
			t.Errorf("output = %q", out)
		}
	})
}

func TestSandboxNetworkOn(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		needSandbox(t)
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}()
		out, _ := runIn(t, sandbox.Policy{Mode: sandbox.ReadOnly, Network: true}, t.TempDir(), os.Args[0]+" dial "+l.Addr().String())
		if out != "connected\n" {
			t.Errorf("with the network on: %q", out)
		}
	})
}

func TestSandboxBadDirectories(t *testing.T) {
	for _, s := range []sandbox.Policy{
		{Mode: "everything"},
		{Mode: sandbox.WorkspaceWrite, Write: []string{"relative"}},
		{Mode: sandbox.WorkspaceWrite, Write: []string{"/nonexistent/offstage"}},
		{Mode: sandbox.ReadOnly, Write: []string{"/tmp"}},
	} {
		if _, err := proc.Start(t.Context(), proc.Config{Command: "true", Sandbox: s}); err == nil {
			t.Errorf("Start with %+v did not fail", s)
		}
	}
}

// TestSandboxAsAnotherUser: a host that is not root gets its network
// namespace inside a user namespace of its own, where it keeps its uid
// and loses the capability it brought lo up with. Run as root, this
// re-executes a copy of the test binary as nobody.
func TestSandboxAsAnotherUser(t *testing.T) {
	needSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to become another user")
	}
	const nobody = 65534
	bin := filepath.Join(t.TempDir(), "proc.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(bin), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(bin)), 0o755) // t.TempDir's parent
	ws := t.TempDir()
	os.Chmod(ws, 0o755)
	os.Chown(ws, nobody, nobody)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	script := `id -u; touch /etc/offstage-nobody 2>/dev/null && echo "etc: written" || echo "etc: refused"
echo hi > f && echo "ws: written"
grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status
` + bin + ` dial ` + l.Addr().String()
	cmd := exec.Command(bin, "sandboxed", script)
	cmd.Dir = ws
	cmd.Env = []string{helperEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + ws, "OFFSTAGE_CONTAINMENT=marks"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"65534\n", "etc: refused\n", "ws: written\n", "CapInh:\t0000000000000000\n", "CapPrm:\t0000000000000000\n", "CapEff:\t0000000000000000\n", "CapAmb:\t0000000000000000\n", "dial: ", "own network namespace"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestSandboxHasNoTerminalToTypeInto (an outsider's finding): a fenced
// command that shared offstage's controlling terminal could push
// keystrokes into it (TIOCSTI through /dev/tty), for the user's shell to
// run outside the sandbox, answers to offstage's own questions included.
// It now leads a session of its own, with no controlling terminal; and
// it has no CAP_SYS_ADMIN, with which it could push them into any
// terminal, nor a way to get it back: root's command has it out of its
// bounding set (an exec by root gets that set); another user's has
// no_new_privs, so no set-uid or file-capability program grants it. (A
// user that is not root keeps a full bounding set: it can never drop
// it, and it grants nothing but through such a program. A user
// namespace's capabilities, which a command can always make, are not
// the initial namespace's that TIOCSTI asks for.)
func TestSandboxHasNoTerminalToTypeInto(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		needSandbox(t)
		// Field 6 of /proc/PID/stat is the session, 7 the controlling tty;
		// CAP_SYS_ADMIN is bit 21.
		script := `set -- $(cut -d')' -f2 /proc/$$/stat); [ "$4" = $$ ] && echo "session: own" || echo "session: $4, not $$"
	echo "tty: $5"
	caps() { grep "^$1:" /proc/$$/status | cut -f2; }
	now=$(( (0x$(caps CapEff) | 0x$(caps CapPrm)) >> 21 & 1 ))
	if [ "$(id -u)" = 0 ]; then later=$(( 0x$(caps CapBnd) >> 21 & 1 )); else later=$(( 1 - $(caps NoNewPrivs) )); fi
	echo "sys_admin: $now, later: $later"`
		out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, t.TempDir(), script)
		if out != "session: own\ntty: 0\nsys_admin: 0, later: 0\n" {
			t.Errorf("output = %q, want its own session, no terminal and no CAP_SYS_ADMIN, now or after an exec", out)
		}
	})
}

// TestSandboxClosesInheritedDescriptors (an outsider's finding): a
// descriptor offstage inherited without close-on-exec (exec 200>>file in
// the shell that started it) reached the fenced command, which wrote
// through it outside the fence: Landlock checks opens, not writes.
func TestSandboxClosesInheritedDescriptors(t *testing.T) {
	needSandbox(t)
	f, err := os.Create(filepath.Join(t.TempDir(), "outside"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// As a launcher would leave it: dup'd high, without close-on-exec.
	fd := 200
	if err := syscall.Dup3(int(f.Fd()), fd, 0); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	p := mustStart(t, proc.Config{Dir: t.TempDir(), Sandbox: sandbox.Policy{Mode: sandbox.WorkspaceWrite},
		Command: `[ -e /proc/$$/fd/200 ] && echo "fd 200: open" || echo "fd 200: closed"`})
	mustWait(t, p)
	if !p.ThroughStep() && !p.Forked() {
		t.Error("a host holding a descriptor without close-on-exec started the command from a thread; only the step and the forker close it")
	}
	if out := string(p.Read(proc.Combined, 0, 0).Data); out != "fd 200: closed\n" {
		t.Errorf("output = %q, want the inherited descriptor closed", out)
	}
	if b, _ := os.ReadFile(f.Name()); len(b) > 0 {
		t.Errorf("the fenced command wrote %q outside through an inherited descriptor", b)
	}
}

// TestSandboxFencesOnlyTheCommand: as root with cgroups, a sandboxed
// command is forked from a thread of this process that fences itself and
// then dies; the process's other threads keep their rights while
// commands start concurrently, and no thread left alive is fenced
// (no_new_privs, which the fence sets, and CAP_SYS_ADMIN, which it drops
// for root, say so).
func TestSandboxFencesOnlyTheCommand(t *testing.T) {
	needSandbox(t)
	if os.Geteuid() != 0 || proc.Containment().Mode != "cgroup" {
		t.Skip("the host forks fenced commands itself as root with cgroups; elsewhere the step does it")
	}
	ws, outside := t.TempDir(), t.TempDir()
	stop := make(chan struct{})
	writes := make(chan error, 1)
	var ps []*proc.Process
	defer func() {
		for _, p := range ps {
			p.Stop(0)
			mustWait(t, p)
		}
	}()
	go func() { // the host's own work goes on meanwhile
		var err error
		for i := 0; err == nil; i++ {
			select {
			case <-stop:
				writes <- nil
				return
			default:
			}
			err = os.WriteFile(filepath.Join(outside, strconv.Itoa(i%10)), []byte("host"), 0o600)
		}
		writes <- err
	}()
	for range 16 {
		p := mustStart(t, proc.Config{Command: "{ echo x > /etc/offstage-fence-$$; } 2>/dev/null || echo refused", Dir: ws, Sandbox: sandbox.Policy{Mode: sandbox.WorkspaceWrite}})
		ps = append(ps, p)
		if p.ThroughStep() {
			close(stop)
			<-writes
			t.Fatal("started through the step; want a fenced thread of this process")
		}
	}
	for _, p := range ps {
		mustWait(t, p)
		if out := string(p.Read(proc.Combined, 0, 0).Data); out != "refused\n" {
			t.Errorf("pid %d: %q, want refused", p.PID(), out)
		}
	}
	close(stop)
	if err := <-writes; err != nil {
		t.Errorf("the host's own write failed while sandboxed commands started: %v", err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		st := string(b)
		if strings.Contains(st, "NoNewPrivs:\t1") {
			t.Errorf("thread %s of the host is fenced (no_new_privs set)", task.Name())
		}
		for _, line := range strings.Split(st, "\n") {
			if bnd, ok := strings.CutPrefix(line, "CapBnd:\t"); ok {
				if v, err := strconv.ParseUint(bnd, 16, 64); err == nil && v>>21&1 == 0 {
					t.Errorf("thread %s of the host lost CAP_SYS_ADMIN", task.Name())
				}
			}
		}
	}
}

// TestSandboxRootKeepsNoPowerOverTheHost (found trying it as root): a
// command root ran in the sandbox kept every capability but
// CAP_SYS_ADMIN, so it made a block device in the workspace (mknod) to
// write a disk through, and a veth pair into the host's network
// namespace (CAP_NET_ADMIN there). It now keeps only those that let it
// work on files it does not own, and bind low ports.
func TestSandboxRootKeepsNoPowerOverTheHost(t *testing.T) {
	needSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("about root's capabilities")
	}
	bothWays(t, func(t *testing.T) {
		ws := t.TempDir()
		out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, ws,
			`mknod blk b 7 0 2>/dev/null && echo "mknod: made" || echo "mknod: refused"
grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status
echo own > f && chown 65534 f && echo "chown: ok"`)
		want := "mknod: refused\nCapInh:\t0000000000000000\nCapPrm:\t000000000000041b\nCapEff:\t000000000000041b\nCapBnd:\t000000000000041b\nCapAmb:\t0000000000000000\nchown: ok\n"
		if out != want {
			t.Errorf("output = %q, want %q", out, want)
		}
		if _, err := os.Stat(filepath.Join(ws, "blk")); err == nil {
			t.Error("a block device was made in the workspace")
		}
	})
}

// TestSandboxNetworkIsFreshForEachCommand: with the network off, each
// command has loopback to itself. The host keeps the namespace of a
// command that left nothing in it for the next (making one is most of
// what the network off costs), but never one with a socket left, such as
// a connection in TIME_WAIT, nor one a process is still in.
func TestSandboxNetworkIsFreshForEachCommand(t *testing.T) {
	needSandbox(t)
	s := sandbox.Policy{Mode: sandbox.WorkspaceWrite}
	ws := t.TempDir()
	netns := func(command string) (ns, out string) {
		t.Helper()
		out, e := runIn(t, s, ws, `readlink /proc/self/ns/net; grep -E '^(sockets|TCP):' /proc/self/net/sockstat; `+command)
		if e.Code != 0 {
			t.Fatalf("%q: exit %+v: %s", command, e, out)
		}
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "net:[") {
				return l, strings.Join(lines[i+1:min(i+3, len(lines))], "\n") + "\n"
			}
		}
		t.Fatalf("no namespace in %q", out)
		return "", ""
	}
	clean := func(stat string) bool {
		return strings.Contains(stat, "sockets: used 0\n") && strings.Contains(stat, " tw 0 ")
	}
	first, stat := netns("true")
	if !clean(stat) {
		t.Errorf("a new command's namespace holds sockets:\n%s", stat)
	}
	host, _ := os.Readlink("/proc/self/ns/net")
	if first == host {
		t.Fatalf("the command ran in the host's network namespace %s", host)
	}
	second, stat := netns(os.Args[0] + " timewait") // leaves a connection in TIME_WAIT
	if !clean(stat) {
		t.Errorf("the next command's namespace holds sockets:\n%s", stat)
	}
	if reuse := os.Geteuid() == 0 && proc.Containment().Mode == "cgroup"; reuse && !stepOnly && second != first {
		t.Errorf("a namespace left empty was not used again: %s, then %s", first, second)
	}
	third, stat := netns("true")
	if !clean(stat) {
		t.Errorf("a namespace with a connection in TIME_WAIT was used again:\n%s", stat)
	}
	if third == second {
		t.Errorf("the namespace %s the last command left a connection in served the next", second)
	}
	// A process left behind ends with its command; its namespace is not
	// used again (nor could it be: the process held it).
	fourth, _ := netns("sleep 100 &")
	if fifth, _ := netns("true"); fifth == fourth {
		t.Errorf("the namespace %s of a command that left a process served the next", fourth)
	}
}

// TestSandboxCannotReachTheThreadThatForkedIt (found attacking the
// sandbox): the thread a command is forked from shares its Landlock
// domain, its capabilities and its user, and lives on for a moment after
// the exec; in that moment the command passes the ptrace access check on
// it, so it opens /proc/<host>/task/<thread>/mem (or PTRACE_SEIZEs it)
// and, through the memory the thread shares with the whole host, reads
// and writes the host at will, long after the thread is gone. A shell
// loop wins the race within a few commands.
//
// The host here has not called ProtectHost (a library's user need not:
// the fence is not to rest on it), so it is made dumpable again: a start
// with Credential (TestSandboxAsAnotherUser) clears the flag of the
// whole test binary, as the vforked child's setuid runs on its memory.
func TestSandboxCannotReachTheThreadThatForkedIt(t *testing.T) {
	needSandbox(t)
	if was, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err == nil {
		unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
		defer unix.Prctl(unix.PR_SET_DUMPABLE, uintptr(was), 0, 0, 0)
	}
	bothWays(t, func(t *testing.T) {
		ws := t.TempDir()
		const grab = `for i in 1 2 3; do for t in /proc/$PPID/task/*; do if true <"$t/mem"; then echo "opened $t/mem"; fi; done; done 2>/dev/null; echo done`
		for range 300 { // it was a race, won within a few tries alone, within hundreds among the other tests
			out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, ws, grab)
			if out != "done\n" {
				t.Fatalf("a sandboxed command reached the host's memory: %q", out)
			}
		}
	})
}

// TestSandboxCannotSignalTheThreadThatForkedIt (found attacking the
// sandbox): the thread a command is forked from is in the command's own
// Landlock domain, so the signal scope lets the command signal it while
// it lives; as root (or as the host's own user) kill -KILL of its thread
// id kills the whole host. kill -0 asks the same permission, harmlessly.
// Below Landlock ABI 6 nothing scopes signals: a command may signal every
// process of its user, the host's threads among them, and the sandbox
// must say so.
func TestSandboxCannotSignalTheThreadThatForkedIt(t *testing.T) {
	if !signalsScoped(t, needSandbox(t)) {
		return
	}
	bothWays(t, func(t *testing.T) {
		ws := t.TempDir()
		const probe = `for t in /proc/$PPID/task/*; do if kill -0 "${t##*/}"; then echo "may signal ${t##*/}"; fi; done 2>/dev/null; echo done`
		for range 200 { // it was a race, won within a few tries
			out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, ws, probe)
			if out != "done\n" {
				t.Fatalf("a sandboxed command may signal a thread of the host: %q", out)
			}
		}
	})
}

// TestSandboxKeepsFilesOutsideAsTheyWere (found attacking the sandbox):
// Landlock fences writes, not a file's mode, owner or times, and a
// command owns its user's files (root's: every system file). A command
// run by root made a copy of bash outside the workspace set-uid root, for
// any user of the machine to become root with.
func TestSandboxKeepsFilesOutsideAsTheyWere(t *testing.T) {
	needSandbox(t)
	bothWays(t, func(t *testing.T) {
		ws, outside := t.TempDir(), t.TempDir()
		f := filepath.Join(outside, "tool")
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		before, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, ws,
			`chmod 4777 `+shellQuote(f)+`; chown 65534 `+shellQuote(f)+`; touch -d 2000-01-01 `+shellQuote(f))
		after, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if after.Mode() != before.Mode() {
			t.Errorf("mode of a file outside the workspace: %v, was %v", after.Mode(), before.Mode())
		}
		if a, b := after.Sys().(*syscall.Stat_t), before.Sys().(*syscall.Stat_t); a.Uid != b.Uid {
			t.Errorf("owner of a file outside the workspace: %d, was %d", a.Uid, b.Uid)
		}
		if !after.ModTime().Equal(before.ModTime()) {
			t.Errorf("modification time of a file outside the workspace: %v, was %v", after.ModTime(), before.ModTime())
		}
	})
}

// TestSandboxCannotOpenAnotherTerminal (found attacking the sandbox):
// the fence lets a command read and write all of /dev/pts, and root's
// CAP_DAC_OVERRIDE opens any user's terminal there, to type text into
// its screen or read the keystrokes meant for its shell.
func TestSandboxCannotOpenAnotherTerminal(t *testing.T) {
	needSandbox(t)
	master, slave, err := pty.Open() // a user's terminal, not the command's
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	bothWays(t, func(t *testing.T) {
		out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, t.TempDir(),
			`{ echo typed-in >`+shellQuote(slave.Name())+` && echo wrote; } 2>/dev/null; { true <`+shellQuote(slave.Name())+` && echo opened; } 2>/dev/null; echo done`)
		if out != "done\n" {
			t.Errorf("a sandboxed command reached the terminal %s: %q", slave.Name(), out)
		}
		// Terminals of its own it makes and uses (script, expect, a test
		// of a terminal program): they are in a devpts of its own.
		if out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, t.TempDir(), os.Args[0]+" openpty"); out != "pty ok\n" {
			t.Errorf("a sandboxed command making a terminal of its own: %q", out)
		}
	})
}

// TestSandboxKeepsOutOfSharedMemory (found attacking the sandbox): System
// V shared memory is not a file, and Landlock does not cover it; a
// command of the same user attached a segment of a process outside (a
// database's, X11's) and wrote into it. It has an IPC namespace of its
// own.
func TestSandboxKeepsOutOfSharedMemory(t *testing.T) {
	st := needSandbox(t)
	if strings.Contains(strings.Join(st.Gaps, "|"), "no read-only mounts") {
		requireFeature(t, requireSandbox, "no mount and IPC namespaces here")
	}
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	if err != nil {
		t.Skipf("no System V shared memory: %v", err)
	}
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	shm := os.Args[0] + " shm " + strconv.Itoa(id)
	if out, _ := runIn(t, sandbox.Policy{}, t.TempDir(), shm); out != "attached\n" {
		t.Fatalf("unsandboxed, the segment: %q", out) // the test can fail
	}
	bothWays(t, func(t *testing.T) {
		if out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, t.TempDir(), shm); out == "attached\n" {
			t.Errorf("a sandboxed command attached the host's shared memory segment %d", id)
		}
	})
}

// TestSandboxInAProtectedHostNotRoot (found attacking the sandbox): the
// offstage CLI calls ProtectHost first; run by a user that is not root,
// with the network off, it then could not sandbox at all ("no network
// namespace: fork/exec /proc/self/exe: permission denied"), where the
// same host unprotected could (TestSandboxAsAnotherUser).
func TestSandboxInAProtectedHostNotRoot(t *testing.T) {
	needSandbox(t)
	bin, cred := proctest.Unprivileged(t)
	cmd := exec.Command(bin, "sandboxed-protected", "echo fenced")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = []string{helperEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir, "OFFSTAGE_CONTAINMENT=marks"}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fenced\n") {
		t.Errorf("%v: %s", err, out)
	}
}

// TestSandboxWritablePlacesStayPut (found attacking the sandbox): a
// writable place nested in another (--sandbox-write ./build in the
// workspace; a workspace under a --sandbox-write directory) was bound by
// its path at each start, so a command moved it away and left a link to
// a directory outside at its path, and the next command could write
// there. The places are pinned when first seen, and a start whose
// writable place is no longer that directory is refused, saying so.
func TestSandboxWritablePlacesStayPut(t *testing.T) {
	needSandbox(t)
	bothWays(t, func(t *testing.T) {
		ws, outside := t.TempDir(), t.TempDir()
		cache := filepath.Join(ws, "a", "cache")
		if err := os.MkdirAll(cache, 0o755); err != nil {
			t.Fatal(err)
		}
		s := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: ws, Write: []string{cache}}
		if out, e := runIn(t, s, ws, "mv a b && mkdir a && ln -s "+shellQuote(outside)+" a/cache && echo moved"); out != "moved\n" {
			t.Fatalf("moving the nested place: %q, exit %+v", out, e)
		}
		// From a thread, Start fails; through the step, the step does,
		// before the command runs (exit 126), saying why either way.
		p, err := proc.Start(t.Context(), proc.Config{Command: "echo x > a/cache/pwned; chmod 700 a/cache", Dir: ws, Sandbox: s})
		if err == nil {
			e := mustWait(t, p)
			out := string(p.Read(proc.Combined, 0, 0).Data)
			if e.Code != 126 || !strings.Contains(out, "no longer the directory it was") {
				t.Errorf("the next command ran (exit %d, %q), fenced by what the path names now", e.Code, out)
			}
		} else if !strings.Contains(err.Error(), "no longer the directory it was") {
			t.Errorf("Start = %v, want it to say the writable place moved", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "pwned")); err == nil {
			t.Error("the next command wrote outside through the writable place's new path")
		}
		if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() == 0o700 {
			t.Errorf("the next command changed the mode of %s: %v %v", outside, fi.Mode(), err)
		}
	})
}

// TestSandboxRootCannotReadOtherUsersKeyrings (found attacking 488a9b1):
// the documented gap is that root's command shares root's keyrings; but
// it keeps CAP_SETUID, becomes any user and reads (or plants) keys in
// that user's keyring: Kerberos tickets, cached passphrases.
func TestSandboxRootCannotReadOtherUsersKeyrings(t *testing.T) {
	needSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("a user that is not root has keyrings of its own in the step's user namespace")
	}
	desc := "offstage-test-" + strconv.Itoa(os.Getpid())
	add := exec.Command(os.Args[0], "userkey", "add", "65534", desc)
	add.Env = append(os.Environ(), helperEnv+"=1")
	if out, err := add.CombinedOutput(); err != nil || string(out) != "added\n" {
		t.Skipf("no key for nobody: %v %s", err, out)
	}
	bothWays(t, func(t *testing.T) {
		out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, t.TempDir(), os.Args[0]+" userkey read 65534 "+desc)
		if strings.HasPrefix(out, "read ") {
			t.Errorf("a sandboxed command run by root read another user's key: %q", out)
		}
	})
}

// TestSandboxKeepsReadOnlyMountsInTheWorkspace (found attacking
// 488a9b1): the writable places are bound recursively and made writable
// recursively, so a mount inside the workspace that the host keeps
// read-only (a container's :ro volume, a read-only bind) became writable
// for the command: the fence loosened the host's own protection.
func TestSandboxKeepsReadOnlyMountsInTheWorkspace(t *testing.T) {
	st := needSandbox(t)
	if os.Geteuid() != 0 || strings.Contains(strings.Join(st.Gaps, "|"), "no read-only mounts") {
		t.Skip("making a read-only mount needs root, and read-only mounts of the sandbox")
	}
	bothWays(t, func(t *testing.T) {
		ws, kept := t.TempDir(), t.TempDir()
		ro := filepath.Join(ws, "ro")
		if err := os.Mkdir(ro, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(kept, ro, "", unix.MS_BIND, ""); err != nil {
			t.Skipf("bind mount: %v", err)
		}
		defer unix.Unmount(ro, unix.MNT_DETACH)
		if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			t.Fatalf("read-only: %v", err)
		}
		if err := os.WriteFile(filepath.Join(ro, "probe"), nil, 0o644); err == nil {
			t.Fatal("the read-only mount took a write from outside")
		}
		runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, ws, `echo x > ro/planted; chmod 777 ro`)
		if _, err := os.Stat(filepath.Join(kept, "planted")); err == nil {
			t.Errorf("a sandboxed command wrote through a mount that is read-only outside")
		}
		if fi, err := os.Stat(kept); err == nil && fi.Mode().Perm() == 0o777 {
			t.Errorf("a sandboxed command changed the mode of a directory on a mount that is read-only outside")
		}
	})
}

// TestSandboxNotRootHasKeyringsOfItsOwn (found attacking 488a9b1): the
// docs say a command of a user that is not root has keyrings of its own
// (the step's user namespace); but it keeps the session keyring of the
// host that started it, and read a key the user kept there (pam_keyinit
// makes one per login: AFS and Kerberos tokens, cached passphrases).
func TestSandboxNotRootHasKeyringsOfItsOwn(t *testing.T) {
	needSandbox(t)
	bin, cred := proctest.Unprivileged(t)
	uid := strconv.Itoa(os.Getuid())
	if cred != nil {
		uid = strconv.Itoa(int(cred.Uid))
	}
	desc := "offstage-test-" + strconv.Itoa(os.Getpid())
	cmd := exec.Command(bin, "userkey", "session", uid, desc, bin+" userkey sread "+uid+" "+desc)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = []string{helperEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir, "OFFSTAGE_CONTAINMENT=marks"}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sandbox:") {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(string(out), "read session-secret") {
		t.Errorf("a sandboxed command of a user that is not root read a key of its host's session keyring: %s", out)
	}
}

// TestSandboxSetsNoOtherProcesssLimits: a sandboxed command may read the
// limits of another process of its user, and set its own, but not set
// another's: it lowered its forker's descriptors to 3, which broke every
// sandboxed start after, and a supervisor's CPU time to 0, which killed
// it with every session's work (an outsider's finding).
func TestSandboxSetsNoOtherProcesssLimits(t *testing.T) {
	st := needSandbox(t)
	if strings.Contains(strings.Join(st.Gaps, "|"), "set-uid") {
		t.Skip("the seccomp filter is not built for this architecture")
	}
	bothWays(t, func(t *testing.T) {
		out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, t.TempDir(), os.Args[0]+" prlimit "+strconv.Itoa(os.Getpid()))
		if want := "read: ok\nset: operation not permitted\nset own: ok\n"; out != want {
			t.Errorf("prlimit of this host from a sandboxed command:\n%s\nwant:\n%s", out, want)
		}
	})
}

// TestSandboxLeavesNoSetIDProgram (found attacking 488a9b1): a command
// owns what it makes and needs no capability to make it set-uid; run by
// root, it left a set-uid root copy of bash in the workspace, which any
// user of the machine ran as root. The set-id bits are refused however
// they are asked for (chmod, a mode at creation, mknod); other modes are
// not.
func TestSandboxLeavesNoSetIDProgram(t *testing.T) {
	st := needSandbox(t)
	if strings.Contains(strings.Join(st.Gaps, "|"), "set-uid") {
		t.Skip("set-id bits are not filtered on this architecture")
	}
	bothWays(t, func(t *testing.T) {
		ws := t.TempDir()
		out, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, ws, `cp /bin/sh s && chmod 4755 s 2>/dev/null; chmod g+s s 2>/dev/null; cp /bin/sh t && chmod 700 t && echo "chmod 700: ok"
`+os.Args[0]+` setid c; mknod -m 4755 n p 2>/dev/null; mkdir d && chmod 2775 d 2>/dev/null; echo done`)
		if !strings.Contains(out, "chmod 700: ok\n") || !strings.Contains(out, "done\n") {
			t.Errorf("output = %q", out)
		}
		for _, name := range []string{"s", "c", "n", "d"} {
			if fi, err := os.Stat(filepath.Join(ws, name)); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("%s was given set-id bits: %v", name, fi.Mode())
			}
		}
	})
}

// TestSandboxRefusesClone3 (an outsider's finding): clone3 with
// CLONE_INTO_CGROUP and a descriptor of a cgroup directory, opened
// read-only, starts a process in that cgroup, whatever the mount says;
// a sandboxed command left its task's cgroup so. The sandbox refuses
// clone3 (ENOSYS, on which libc and Go fall back to clone).
func TestSandboxRefusesClone3(t *testing.T) {
	st := needSandbox(t)
	if strings.Contains(strings.Join(st.Gaps, "|"), "set-uid") {
		t.Skip("the seccomp filter is not built for this architecture")
	}
	bothWays(t, func(t *testing.T) {
		out, e := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, t.TempDir(), os.Args[0]+" clone3 "+v2Root(t)+"; echo forked; sh -c 'echo and sh forks'")
		if !strings.Contains(out, "clone3: fork/exec /bin/true: function not implemented\n") || !strings.Contains(out, "and sh forks\n") || e.Code != 0 {
			t.Errorf("clone3 from a sandboxed command: exit %+v:\n%s", e, out)
		}
	})
}
