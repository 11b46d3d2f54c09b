package proc_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/creack/pty"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/proc/sandbox"
)

// helperEnv marks the test binary re-executed as a child.
const helperEnv = "OFFSTAGE_PROC_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		coverWhereWritable()
		os.Exit(helper(os.Args[1:]))
	}
	// As cmd/offstage does: what the test binary inherited (a runner's
	// pipe) reaches no command, and sandboxed ones start from a fenced
	// thread (TestSandboxClosesInheritedDescriptors makes one anew).
	sandbox.KeepInheritedToSelf()
	goleak.VerifyTestMain(m, goleak.Cleanup(checkCgroups))
}

// coverWhereWritable: under go test -cover, a helper writes its coverage
// data at exit to GOCOVERDIR, which a sandboxed helper may not write
// (and says so on stderr, into the output its test reads). There it
// writes them to its own temporary directory instead, which the sandbox
// removes after it: a fenced helper's coverage is not kept.
func coverWhereWritable() {
	dir := os.Getenv("GOCOVERDIR")
	if dir == "" {
		return
	}
	f, err := os.CreateTemp(dir, ".writable-")
	if err == nil {
		f.Close()
		os.Remove(f.Name())
		return
	}
	os.Setenv("GOCOVERDIR", os.TempDir())
}

// checkCgroups fails the run if a test left a cgroup of this host behind
// (the host's own directory goes with its keeper, when the binary exits).
func checkCgroups(code int) {
	info := proc.Containment()
	fmt.Fprintln(os.Stderr, info)
	if info.Mode == "cgroup" {
		proc.DrainSpareCgroups() // kept on purpose; the rest is a leak
		entries, err := os.ReadDir(info.Dir)
		for _, e := range entries {
			if e.IsDir() {
				fmt.Fprintf(os.Stderr, "FAIL: cgroup %s/%s left behind\n", info.Dir, e.Name())
				code = max(code, 1)
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			code = max(code, 1)
		}
		// The v1 cgroups of limits (hybrid hosts): the host's directory
		// may stay until its keeper goes, its tasks' may not.
		for _, dir := range proc.V1Dirs() {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.IsDir() {
					fmt.Fprintf(os.Stderr, "FAIL: cgroup v1 %s/%s left behind\n", dir, e.Name())
					code = max(code, 1)
				}
			}
		}
	}
	if os.Getenv(requireCgroup) != "" && info.Mode != "cgroup" {
		fmt.Fprintf(os.Stderr, "FAIL: %s is set, but the containment is %s\n", requireCgroup, info)
		code = max(code, 1)
	}
	if want := os.Getenv("OFFSTAGE_CONTAINMENT"); want != "" && info.Mode != want {
		fmt.Fprintf(os.Stderr, "FAIL: OFFSTAGE_CONTAINMENT=%s, but the containment is %s\n", want, info.Mode)
		code = max(code, 1)
	}
	os.Exit(code)
}

// helper runs one of the child behaviours the tests need.
func helper(args []string) int {
	switch args[0] {
	case "hide": // HideWithheld, then show the block and a command's view of it
		return hideHelper(args[1:])
	case "print": // print N bytes to stdout, fast, in lines of 64 KiB or the length given
		n, _ := strconv.ParseInt(args[1], 10, 64)
		buf := []byte(strings.Repeat("0123456789abcdef", 4096)) // 64 KiB
		buf[len(buf)-1] = '\n'
		if len(args) > 2 {
			line, _ := strconv.Atoi(args[2])
			for i := range buf {
				if buf[i] = "0123456789abcdef"[i%16]; (i+1)%line == 0 {
					buf[i] = '\n'
				}
			}
		}
		w := os.Stdout
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return 1
			}
			n -= k
		}
		return 0
	case "dial": // ADDR: connect over TCP, say "connected" or why not
		c, err := net.DialTimeout("tcp", args[1], 2*time.Second)
		if err != nil {
			fmt.Println("dial:", err)
			return 1
		}
		c.Close()
		fmt.Println("connected")
		return 0
	case "tty-host": // as a host with a controlling terminal, run a command that opens /dev/tty; say what each could
		if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
			fmt.Println("host: no tty:", err)
		} else {
			f.Close()
			fmt.Println("host: tty")
		}
		fmt.Print(runTail("(: </dev/tty) 2>/dev/null && echo command: tty || echo command: no tty"))
		return 0
	case "notty-host": // as a host with no controlling terminal, run commands; say whether one has a terminal and its own session, and whether one that stops itself goes on
		out := runTail(`(: </dev/tty) 2>/dev/null && echo tty || echo no tty; set -- $(cut -d')' -f2 /proc/$$/stat); [ "$4" = $$ ] && echo own session || echo "session $4, not $$"`)
		fmt.Print(out)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, err := proc.Start(ctx, proc.Config{Command: `kill -TSTP $$; echo went on`})
		if err != nil {
			fmt.Println("start:", err)
			return 1
		}
		e, _ := p.Wait(context.Background())
		fmt.Printf("%sstopped by us: %v\n", p.Tail(2), e.Stopped)
		return 0
	case "openpty": // make a pseudo-terminal, write through it, say "pty ok" or why not
		m, s, err := pty.Open()
		if err != nil {
			fmt.Println("openpty:", err)
			return 1
		}
		defer m.Close()
		defer s.Close()
		if _, err := s.Write([]byte("x\n")); err != nil {
			fmt.Println("write:", err)
			return 1
		}
		fmt.Println("pty ok")
		return 0
	case "shm": // ID: attach a System V shared memory segment, say "attached" or why not
		id, _ := strconv.Atoi(args[1])
		b, err := unix.SysvShmAttach(id, 0, 0)
		if err != nil {
			fmt.Println("shmat:", err)
			return 1
		}
		unix.SysvShmDetach(b)
		fmt.Println("attached")
		return 0
	case "userkey": // add|read|sread UID DESC, or session UID DESC COMMAND: keyrings (keyring_linux_test.go)
		return userKey(args)
	case "clone3": // DIR: start /bin/true by clone3 into the cgroup DIR; say "clone3: ok" or why not (Linux)
		fmt.Println("clone3:", okOr(cloneInto(args[1])))
		return 0
	case "prlimit": // PID: read PID's descriptor limit, then set it to what it is; say each outcome
		return prlimitOthers(args)
	case "setid": // PATH: create PATH with mode 04755 (open, then openat2-less fallbacks), say its mode or why not
		fd, err := unix.Open(args[1], unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o4755)
		if err != nil {
			fmt.Println("create:", err)
			return 1
		}
		unix.Close(fd)
		var st unix.Stat_t
		unix.Stat(args[1], &st)
		fmt.Printf("created %o\n", st.Mode&0o7777)
		return 0
	case "timewait": // leave a TCP connection in TIME_WAIT on loopback
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println("listen:", err)
			return 1
		}
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			fmt.Println("dial:", err)
			return 1
		}
		s, _ := l.Accept()
		s.Close() // the side that closes first keeps TIME_WAIT
		c.Read(make([]byte, 1))
		c.Close()
		l.Close()
		fmt.Println("closed")
		return 0
	case "udp": // ADDR: send a datagram, say "sent" or why not
		c, err := net.Dial("udp", args[1])
		if err == nil {
			_, err = c.Write([]byte("hello"))
			c.Close()
		}
		if err != nil {
			fmt.Println("udp:", err)
			return 1
		}
		fmt.Println("sent")
		return 0
	case "sandboxed-protected": // COMMAND: as sandboxed, in a host that called ProtectHost first, as the CLI does
		if err := environ.ProtectHost(); err != nil {
			fmt.Println("protect:", err)
			return 1
		}
		return helper(append([]string{"sandboxed"}, args[1:]...))
	case "sandboxed-abi": // N COMMAND: as sandboxed, fenced as if the kernel's Landlock ABI were N
		return sandboxedABI(args[1:])
	case "truncate": // PATH: truncate(2) it by its path, say "truncate: done" or why not
		if err := syscall.Truncate(args[1], 0); err != nil {
			fmt.Println("truncate:", err)
		} else {
			fmt.Println("truncate: done")
		}
		return 0
	case "forker": // start sandboxed commands as a host that is not root does, print what tells the forker (forker_test.go)
		return forkerHost()
	case "forker-net": // the network namespaces of the forker's commands, in turn (forker_test.go)
		return forkerNet()
	case "forker-exec-fails": // a start whose exec fails in the forker, then the zombies left (forker_test.go)
		return forkerExecFails()
	case "sandboxed": // COMMAND: run it in workspace-write here, print its output and sandbox
		p, err := proc.Start(context.Background(), proc.Config{Command: args[1], Sandbox: sandbox.Policy{Mode: sandbox.WorkspaceWrite}})
		if err != nil {
			fmt.Println("start:", err)
			return 1
		}
		p.Wait(context.Background())
		fmt.Print(string(p.Read(proc.Combined, 0, 0).Data))
		fmt.Println("sandbox:", p.Sandbox())
		return 0
	case "ptrace": // PID: attach to it with ptrace, say "attached" or why not
		pid, _ := strconv.Atoi(args[1])
		runtime.LockOSThread()
		if err := syscall.PtraceAttach(pid); err != nil {
			fmt.Println("ptrace:", err)
			return 1
		}
		syscall.PtraceDetach(pid)
		fmt.Println("attached")
		return 0
	case "stdin-flags": // print stdin's O_NONBLOCK and O_APPEND, then set them
		flags, _ := unix.FcntlInt(0, unix.F_GETFL, 0)
		fmt.Printf("flags %#o\n", flags&(unix.O_NONBLOCK|unix.O_APPEND))
		unix.FcntlInt(0, unix.F_SETFL, flags|unix.O_NONBLOCK|unix.O_APPEND)
		return 0
	case "ignore-term": // ignore SIGTERM, say so, wait to be killed
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		time.Sleep(time.Hour)
		return 0
	case "protected-host": // [protect] run probe-parent as a command, print what it found
		return protectedHost(len(args) > 1 && args[1] == "protect")
	case "probe-parent": // try to read the parent's environment and memory
		return probeParent()
	case "log-full": // LIMIT PATH N: print N bytes logged to PATH under a file size limit
		return logFullHelper(args[1:])
	case "hold": // allocate and touch N bytes, say so, wait to be killed
		n, _ := strconv.Atoi(args[1])
		b := make([]byte, n)
		for i := 0; i < len(b); i += 4096 { // a byte a page makes it resident: a write to each byte took 5 s under -race, past readUntil's 10 s on a loaded machine
			b[i] = 1
		}
		fmt.Println("holding", len(b))
		time.Sleep(time.Hour)
		fmt.Println(b[n/2])
		return 0
	case "contain-host": // start each command given ("limited:" first: with limits), say ready, exit 0 when stdin closes
		return containHost(args[1:])
	case "later-mounts": // DIR private|shared: mount under DIR after the fence is made, have a root command look (Linux)
		return laterMountsHelper(args[1], args[2])
	case "caps-host": // [thread]: print a root command's capability sets (Linux)
		return capsHostHelper(args[1:])
	case "proc-host": // DIR: mount a proc at DIR, have a root command try its sys and sysrq-trigger (Linux)
		return procHostHelper(args[1])
	case "escape": // SLEEP: try to leave the cgroup and its limits (Linux)
		return escapeHelper(args[1:])
	case "host": // start shells with grandchildren, print their groups, wait to be killed
		n, _ := strconv.Atoi(args[1])
		for range n {
			p, err := proc.Start(context.Background(), proc.Config{Command: "sleep 1000 & sleep 1000 & wait"})
			if err != nil {
				fmt.Println("error", err)
				return 1
			}
			fmt.Println(p.PID())
		}
		fmt.Println("ready")
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper", args)
	return 2
}

// helperCommand returns a shell command line that runs the test binary as
// helper with args.
func helperCommand(args ...string) string {
	q := []string{"exec", shellQuote(os.Args[0])}
	for _, a := range args {
		q = append(q, shellQuote(a))
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func helperConfig(args ...string) proc.Config {
	return proc.Config{Command: helperCommand(args...), Env: append(os.Environ(), helperEnv+"=1")}
}

// groupMembers returns the live (non-zombie) processes of group pgid, from
// /proc, as "pid comm" strings.
func groupMembers(t *testing.T, pgid int) []string {
	t.Helper()
	return proctest.Group(pgid)
}

// waitGroupSize polls /proc until group pgid has at least (or, if atMost,
// at most) n live processes, and fails after timeout.
func waitGroupSize(t *testing.T, pgid, n int, atMost bool, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		m := groupMembers(t, pgid)
		if (!atMost && len(m) >= n) || (atMost && len(m) <= n) {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("group %d has %d live processes after %v: %v", pgid, len(m), timeout, m)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readUntil polls p's combined output until it contains want.
func readUntil(t *testing.T, p *proc.Process, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got := string(p.Read(proc.Combined, 0, 1<<20).Data); strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("output never contained %q; got %q", want, p.Read(proc.Combined, 0, 1<<20).Data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustStart(t *testing.T, cfg proc.Config) *proc.Process {
	t.Helper()
	p, err := proc.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start(%q) = %v", cfg.Command, err)
	}
	t.Cleanup(func() {
		p.Stop(0)
		p.Wait(context.Background())
	})
	return p
}

func mustWait(t *testing.T, p *proc.Process) proc.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	return e
}

// lines reads r line by line into a channel.
func lines(r io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// containHost is the helper behind TestHostDeath: it starts each command
// given, says ready, and exits 0 when its stdin closes.
func containHost(cmds []string) int {
	fmt.Println("dir", proc.Containment().Dir)
	fmt.Println("keeper", proc.Keeper().PID)
	for _, cmd := range cmds {
		// "limited:" runs the command with limits, which on a hybrid host
		// makes its cgroups under the v1 controllers too.
		var l resource.Limits
		if rest, ok := strings.CutPrefix(cmd, "limited:"); ok {
			cmd, l = rest, resource.Limits{Memory: 64 << 20, Pids: 64, CPUs: 1}
		}
		if _, err := proc.Start(context.Background(), proc.Config{Command: cmd, Limits: l}); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	fmt.Println("ready")
	os.Stdin.Read(make([]byte, 1))
	return 0
}

// runTail runs the shell line as a command of this process, as a host,
// and returns the end of its output, or why it could not start.
func runTail(line string) string {
	p, err := proc.Start(context.Background(), proc.Config{Command: line})
	if err != nil {
		return "start: " + err.Error() + "\n"
	}
	p.Wait(context.Background())
	return p.Tail(10)
}
