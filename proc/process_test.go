package proc_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/resource"
)

func TestStopKillsTheWholeGroup(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "sleep 1000 & sleep 1000 & wait"})
	waitGroupSize(t, p.PID(), 3, false, 5*time.Second)
	p.Stop(3 * time.Second)
	e := mustWait(t, p)
	if !e.Stopped || e.Signal != syscall.SIGTERM {
		t.Errorf("Exit = %+v, want stopped by SIGTERM", e)
	}
	if !errors.Is(e.Err(), proc.ErrStopped) {
		t.Errorf("Exit.Err() = %v, want it to wrap ErrStopped", e.Err())
	}
	if m := groupMembers(t, p.PID()); len(m) != 0 {
		t.Errorf("after Stop and Wait, group %d still has %v", p.PID(), m)
	}
}

// The reference systems killed only the sh and left its children running.
func TestLeaderExitingKillsWhatIsLeft(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "sleep 1000 & (sleep 1000; echo never) & echo started; exit 0"})
	e := mustWait(t, p) // must not hang on the pipes the sleeps hold
	if e.Code != 0 || e.Stopped || e.Signal != 0 {
		t.Errorf("Exit = %+v, want a clean exit 0", e)
	}
	if m := groupMembers(t, p.PID()); len(m) != 0 {
		t.Errorf("after the leader exited, group %d still has %v", p.PID(), m)
	}
	if got := string(p.Read(proc.Combined, 0, 100).Data); got != "started\n" {
		t.Errorf("output = %q, want %q", got, "started\n")
	}
}

func TestWaitDoesNotHangOnUnmarkedPipeHolders(t *testing.T) {
	// A process that left the group and shed both marks (its RTTIME limit
	// and its environment), or, in ModeCgroup, moved itself out of its
	// cgroup (as root can), is out of our reach, holding our stdout. Wait
	// gives it WaitDelay and returns.
	for _, tool := range []string{"setsid", "prlimit"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s(1) not installed", tool)
		}
	}
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	escape := ""
	if info := proc.Containment(); info.Mode == "cgroup" {
		escape = "echo $$ > " + filepath.Dir(info.Dir) + "/cgroup.procs; "
		// Behind the root fence it cannot (TestRootCommandStaysContained);
		// a host that is not root has none, nor one without Landlock.
		proc.RootFence(false)
		defer proc.RootFence(true)
	}
	cmd := "setsid env -u OFFSTAGE_MARK prlimit --rttime=unlimited sh -c '" + escape + "echo $$ > " + pidFile + "; exec sleep 30' & " +
		"while [ ! -s " + pidFile + " ]; do sleep 0.01; done; echo spawned"
	p := mustStart(t, proc.Config{Command: cmd, WaitDelay: 300 * time.Millisecond})
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	start := time.Now()
	e := mustWait(t, p)
	d := time.Since(start)
	if d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("Wait took %v with an unmarked pipe holder, want about the 300ms WaitDelay", d)
	}
	if e.Code != 0 || string(p.Read(proc.Combined, 0, 100).Data) != "spawned\n" {
		t.Errorf("Exit = %+v, output %q", e, p.Read(proc.Combined, 0, 100).Data)
	}
}

func TestIgnoringSIGTERMGetsSIGKILLAfterGrace(t *testing.T) {
	p := mustStart(t, helperConfig("ignore-term"))
	readUntil(t, p, "ignoring SIGTERM")
	start := time.Now()
	p.Stop(300 * time.Millisecond)
	e := mustWait(t, p)
	if e.Signal != syscall.SIGKILL || !e.Stopped {
		t.Errorf("Exit = %+v, want stopped by SIGKILL", e)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("killed after %v, before the grace period", d)
	}
}

func TestStopIsIdempotentAndHarmlessAfterExit(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "exit 0"})
	mustWait(t, p)
	p.Stop(0)
	p.Stop(time.Second)
	if e, _ := p.Exit(); e.Stopped {
		t.Errorf("Stop after exit marked the process stopped: %+v", e)
	}
}

func TestContextEndingStopsWithItsCause(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	p, err := proc.Start(ctx, proc.Config{Command: "sleep 1000", Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	why := errors.New("task cancelled")
	cancel(why)
	e := mustWait(t, p)
	if !e.Stopped || !errors.Is(e.Err(), why) {
		t.Errorf("Exit = %+v (err %v), want stopped with the cause", e, e.Err())
	}
}

func TestExitCodesAndSignals(t *testing.T) {
	for _, tc := range []struct {
		cmd    string
		code   int
		signal syscall.Signal
		err    string
	}{
		{"exit 0", 0, 0, ""},
		{"exit 7", 7, 0, "exit status 7"},
		{"kill -SEGV $$", -1, syscall.SIGSEGV, "killed by SIGSEGV"},
		{"kill -KILL $$", -1, syscall.SIGKILL, "killed by SIGKILL"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			e := mustWait(t, mustStart(t, proc.Config{Command: tc.cmd}))
			if e.Code != tc.code || e.Signal != tc.signal || e.Stopped {
				t.Errorf("Exit = %+v, want code %d signal %v not stopped", e, tc.code, tc.signal)
			}
			err := e.Err()
			if tc.err == "" {
				if err != nil {
					t.Errorf("Err() = %v, want nil", err)
				}
				return
			}
			var ee *proc.ExitError
			if !errors.As(err, &ee) || err.Error() != tc.err {
				t.Errorf("Err() = %v, want *ExitError %q", err, tc.err)
			}
		})
	}
}

func TestStdinEchoAndWritesAfterExit(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "cat", Stdin: true})
	if _, err := p.Input(t.Context(), []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, p, "hello\n")
	if err := p.CloseInput(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseInput(t.Context()); err != nil {
		t.Errorf("second CloseInput() = %v, want nil", err)
	}
	if e := mustWait(t, p); e.Code != 0 {
		t.Errorf("cat after EOF: %+v", e)
	}
	if _, err := p.Input(t.Context(), []byte("late")); !errors.Is(err, proc.ErrExited) {
		t.Errorf("Input after exit = %v, want ErrExited", err)
	}
	q := mustStart(t, proc.Config{Command: "true"})
	if _, err := q.Input(t.Context(), []byte("x")); !errors.Is(err, proc.ErrNoStdin) {
		t.Errorf("Input without Stdin = %v, want ErrNoStdin", err)
	}
}

func TestInputGivesUpWhenItsContextEnds(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "sleep 1000", Stdin: true}) // never reads
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	n, err := p.Input(ctx, make([]byte, 1<<20)) // more than a pipe holds
	if !errors.Is(err, context.DeadlineExceeded) || n >= 1<<20 {
		t.Errorf("Input() = %d, %v; want a partial write and DeadlineExceeded", n, err)
	}
}

// Issue 37 item 13: `echo a; echo b >&2; echo c; echo d >&2` came back
// as b d a c in 2 of 3 runs, stdout and stderr being two pipes read by
// two goroutines. By default they are one pipe, as on a terminal: the
// output is in the order it was written, every time.
func TestOutputComesBackInTheOrderWritten(t *testing.T) {
	for i := range 20 {
		p := mustStart(t, proc.Config{Command: "echo a; echo b >&2; echo c; echo d >&2; echo e; echo f >&2"})
		mustWait(t, p)
		if got := string(p.Read(proc.Combined, 0, 100).Data); got != "a\nb\nc\nd\ne\nf\n" {
			t.Fatalf("run %d: Read(Combined) = %q, want a to f in order", i, got)
		}
		if got := string(p.Read(proc.Stderr, 0, 100).Data); got != "" {
			t.Fatalf("run %d: Read(Stderr) = %q, want nothing apart", i, got)
		}
	}
}

func TestStreamsAreSeparateAndInterleaved(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "echo out1; echo err1 >&2; sleep 0.05; echo out2", SeparateStreams: true})
	mustWait(t, p)
	for _, tc := range []struct {
		s    proc.Stream
		want string
	}{
		{proc.Stdout, "out1\nout2\n"},
		{proc.Stderr, "err1\n"},
	} {
		if got := string(p.Read(tc.s, 0, 100).Data); got != tc.want {
			t.Errorf("Read(stream %d) = %q, want %q", tc.s, got, tc.want)
		}
	}
	if got := string(p.Read(proc.Combined, 0, 100).Data); !strings.HasSuffix(got, "out2\n") || len(got) != 15 {
		t.Errorf("Read(Combined) = %q", got)
	}
	if e, _ := p.Exit(); e.Stdout != 10 || e.Stderr != 5 || e.Bytes != 15 {
		t.Errorf("Exit byte counts = %+v", e)
	}
}

func TestWorkingDirectoryAndStartErrors(t *testing.T) {
	dir := t.TempDir()
	p := mustStart(t, proc.Config{Command: "pwd", Dir: dir})
	mustWait(t, p)
	if got := strings.TrimSpace(string(p.Read(proc.Combined, 0, 1000).Data)); got != dir {
		t.Errorf("pwd = %q, want %q", got, dir)
	}
	for _, cfg := range []proc.Config{
		{Command: ""},
		{Command: "true", Dir: filepath.Join(dir, "missing")},
		{Command: "true", Shell: []string{filepath.Join(dir, "no-shell"), "-c"}},
		{Command: "true", LogPath: filepath.Join(dir, "missing", "log")},
	} {
		if _, err := proc.Start(t.Context(), cfg); err == nil {
			t.Errorf("Start(%+v) = nil error", cfg)
		}
	}
}

// The lifeline must reach the child at its documented descriptor, leaving
// 3–9 free for scripts. (Descriptors the host itself inherited without
// close-on-exec pass through os/exec, so only these are checked.)
func TestChildGetsTheLifelineAtTen(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "ls /proc/$$/fd"})
	mustWait(t, p)
	fds := map[string]bool{}
	for _, fd := range strings.Fields(string(p.Read(proc.Combined, 0, 1000).Data)) {
		fds[fd] = true
	}
	for _, fd := range []string{"0", "1", "2", "10"} {
		if !fds[fd] {
			t.Errorf("child lacks descriptor %s: %v", fd, fds)
		}
	}
	for fd := 3; fd <= 9; fd++ {
		if fds[strconv.Itoa(fd)] {
			t.Errorf("child has descriptor %d open: %v", fd, fds)
		}
	}
}

func TestHostDeathKillsEveryGroup(t *testing.T) {
	host := exec.Command(os.Args[0], "host", "3")
	host.Env = append(os.Environ(), helperEnv+"=1")
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	var groups []int
	for line := range lines(out) {
		if line == "ready" {
			break
		}
		g, err := strconv.Atoi(line)
		if err != nil {
			t.Fatalf("host said %q", line)
		}
		groups = append(groups, g)
	}
	t.Cleanup(func() {
		for _, g := range groups {
			syscall.Kill(-g, syscall.SIGKILL)
		}
	})
	if len(groups) != 3 {
		host.Process.Kill()
		host.Wait()
		t.Fatalf("host started %d shells, want 3", len(groups))
	}
	for _, g := range groups {
		waitGroupSize(t, g, 3, false, 5*time.Second) // sh and two sleeps
	}
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	for _, g := range groups {
		d := waitGroupSize(t, g, 0, true, 2*time.Second)
		t.Logf("group %d gone %v after the host was killed", g, d)
	}
}

// A child printing 1 GiB must not grow the host's memory beyond the
// configured caps, and the log file stops at its cap and says so.
func TestPrintingAGigabyteStaysBounded(t *testing.T) {
	const total = 1 << 30
	logPath := filepath.Join(t.TempDir(), "out.log")
	cfg := helperConfig("print", strconv.Itoa(total))
	cfg.LogPath, cfg.LogMaxBytes = logPath, 4<<20
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := mustStart(t, cfg)
	e := mustWait(t, p)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if e.Code != 0 || e.Bytes != total {
		t.Fatalf("Exit = %+v, want code 0 and %d bytes", e, total)
	}
	// Buffers: 64 KiB head, 1 MiB ring, 2 × 256 KiB stream rings, 2 × 64
	// KiB read buffers, which grow by doubling (at most twice their caps
	// allocated in all), and the log's two fixed buffers of 320 KiB.
	// Allocation must not grow with the output.
	caps := 2*uint64(64<<10+1<<20+2*256<<10+2*64<<10) + 2*320<<10
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > caps+1<<20 {
		t.Errorf("allocated %d bytes while capturing 1 GiB, want at most %d (the caps) plus 1 MiB", alloc, caps)
	}
	info, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() < 4<<20 || info.Size() > 4<<20+200 {
		t.Errorf("log file is %d bytes, want its 4 MiB cap plus a note", info.Size())
	}
	if e.LogCut != total-4<<20 {
		t.Errorf("LogCut = %d, want %d", e.LogCut, total-4<<20)
	}
	tail := make([]byte, 200)
	f, _ := os.Open(logPath)
	defer f.Close()
	n, _ := f.ReadAt(tail, info.Size()-200)
	if !strings.Contains(string(tail[:n]), "log cut") {
		t.Errorf("log file does not end with the cut note: %q", tail[:n])
	}
	if got := p.Read(proc.Combined, 0, 10); string(got.Data) != "0123456789" {
		t.Errorf("head lost: %q", got.Data)
	}
}

// TestUsage: a running command's CPU time and memory, from its cgroup or,
// in ModeMarks, summed from /proc over its processes; and the CPU time
// and peak memory its Exit keeps.
func TestUsage(t *testing.T) {
	cfg := helperConfig("hold", strconv.Itoa(32<<20))
	// Burn some CPU in the shell first, then hold 32 MiB.
	cfg.Command = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; " + cfg.Command
	p := mustStart(t, cfg)
	readUntil(t, p, "holding")
	u := p.Usage()
	t.Logf("%s: %+v", proc.Containment().Mode, u)
	if u.Processes != 1 {
		t.Errorf("Usage().Processes = %d, want 1", u.Processes)
	}
	if runtime.GOOS != "linux" {
		if u.Measured || u.CPU != 0 || u.Memory != 0 {
			t.Errorf("Usage() = %+v without /proc, want the count alone", u)
		}
		return
	}
	if !u.Measured {
		t.Errorf("Usage().Measured = false on Linux")
	}
	if u.CPU < 10*time.Millisecond {
		t.Errorf("Usage().CPU = %v after a busy loop, want at least 10ms", u.CPU)
	}
	if u.Memory < 32<<20 || u.Memory > 1<<30 {
		t.Errorf("Usage().Memory = %d, want at least the 32 MiB held", u.Memory)
	}
	if u.MemoryPeak < u.Memory {
		t.Errorf("Usage().MemoryPeak = %d, below Memory %d", u.MemoryPeak, u.Memory)
	}
	p.Stop(0)
	e := mustWait(t, p)
	if u := p.Usage(); u != (resource.Usage{}) {
		t.Errorf("Usage() once done = %+v, want zero", u)
	}
	if e.CPU < u.CPU || e.MemoryPeak < 32<<20 {
		t.Errorf("Exit CPU %v, MemoryPeak %d; want at least %v and the 32 MiB held", e.CPU, e.MemoryPeak, u.CPU)
	}
}

// TestPorts: the port a server the command started in a session of its
// own listens on.
func TestPorts(t *testing.T) {
	for _, tool := range []string{"python3", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	p := mustStart(t, proc.Config{Command: "(setsid python3 -u -m http.server 0 --bind 127.0.0.1 &); exec sleep 1000"})
	readUntil(t, p, "(http://")
	out := string(p.Read(proc.Combined, 0, 4096).Data)
	m := regexp.MustCompile(`port (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no port in %q", out)
	}
	want, _ := strconv.Atoi(m[1])
	if got := p.Ports(); !slices.Contains(got, want) {
		t.Errorf("Ports() = %v, want %d among them (the server said %q)", got, want, out)
	}
	p.Stop(0)
	mustWait(t, p)
	if got := p.Ports(); got != nil {
		t.Errorf("Ports() once done = %v, want none", got)
	}
}

// TestReadWithoutACap pins a panic an embedder met: Read with max -1
// panicked while holding the process's lock (so a deferred Table.Close
// hung and hid it). max <= 0 means no cap of the caller's.
func TestReadWithoutACap(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "echo out; echo err >&2", SeparateStreams: true})
	mustWait(t, p)
	for _, tc := range []struct {
		s    proc.Stream
		max  int
		want string
	}{
		{proc.Combined, -1, "out\nerr\n"},
		{proc.Combined, 0, "out\nerr\n"},
		{proc.Stdout, -1, "out\n"},
		{proc.Stderr, 0, "err\n"},
	} {
		if got := p.Read(tc.s, 0, tc.max); string(got.Data) != tc.want && string(got.Data) != "err\nout\n" {
			t.Errorf("Read(%d, 0, %d) = %q, want %q", tc.s, tc.max, got.Data, tc.want)
		}
	}
	if got := p.Read(proc.Combined, 4, -1); got.Next != got.Total || got.Start != 4 {
		t.Errorf("Read(Combined, 4, -1) = %+v, want everything from 4 on", got)
	}
}

// TestWaitOutputFollowsTheOutput reads a process's output as it arrives,
// with WaitOutput as the only wait: no polling, nothing missed.
func TestWaitOutputFollowsTheOutput(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "for i in 1 2 3; do echo $i; sleep 0.05; done", Stdin: true})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var got []byte
	wakes := 0
	for next := int64(0); ; {
		total, err := p.WaitOutput(ctx, next)
		if err != nil {
			t.Fatalf("WaitOutput(%d) = %d, %v", next, total, err)
		}
		if _, done := p.Exit(); !done && total <= next {
			t.Fatalf("WaitOutput(%d) = %d while running, want more than the cursor", next, total)
		}
		wakes++
		ch := p.Read(proc.Combined, next, 0)
		got, next = append(got, ch.Data...), ch.Next
		if _, done := p.Exit(); done && next >= total {
			break
		}
	}
	if string(got) != "1\n2\n3\n" || wakes < 2 {
		t.Errorf("followed output = %q in %d wakes, want 1 2 3 in several", got, wakes)
	}
	short, cancel2 := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel2()
	if total, err := p.WaitOutput(short, 1<<40); err != nil || total != 6 {
		t.Errorf("WaitOutput past the end of a finished process = %d, %v; want 6, nil", total, err)
	}
	q := mustStart(t, proc.Config{Command: "sleep 1000"})
	if _, err := q.WaitOutput(short, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitOutput on a silent process = %v, want DeadlineExceeded", err)
	}
}

// TestABadDirIsReportedAsSuch: the kernel reports a missing working
// directory as a missing shell ("fork/exec /bin/sh: no such file or
// directory"), which sent an embedder looking for /bin/sh.
func TestABadDirIsReportedAsSuch(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir  string
		want string
		is   error
	}{
		{"/nonexistent/dir", "proc: working directory /nonexistent/dir: no such file or directory", os.ErrNotExist},
		{file, "proc: working directory " + file + ": not a directory", syscall.ENOTDIR},
	} {
		p, err := proc.Start(t.Context(), proc.Config{Command: "true", Dir: tc.dir})
		if err == nil {
			mustWait(t, p)
			t.Errorf("Start(Dir %q) = nil error", tc.dir)
			continue
		}
		if err.Error() != tc.want || !errors.Is(err, tc.is) {
			t.Errorf("Start(Dir %q) = %q, want %q (and errors.Is %v)", tc.dir, err, tc.want, tc.is)
		}
	}
}

// TestAStartErrorQuotesTheCommandBounded: a command the kernel cannot
// start (one argument past its bound, E2BIG) is quoted in the error cut
// short, saying how much was left out; the error held it whole, 200 KiB
// handed back to a model (an outsider's finding).
func TestAStartErrorQuotesTheCommandBounded(t *testing.T) {
	p, err := proc.Start(t.Context(), proc.Config{Command: "true #" + strings.Repeat("x", 200<<10)})
	if err == nil {
		mustWait(t, p)
		t.Fatal("Start of a 200 KiB command line = nil error")
	}
	if msg := err.Error(); len(msg) > 1000 || !strings.Contains(msg, "more bytes)") || !errors.Is(err, syscall.E2BIG) {
		t.Errorf("Start of a 200 KiB command line: %d bytes of error, %.300q; want it cut short, and errors.Is E2BIG", len(msg), msg)
	}
}

// TestDocumentedDefaults: the defaults are documented at Config's fields,
// not exported; this holds the documentation to the code (and the tools'
// descriptions, which repeat some of them, to the same numbers).
func TestDocumentedDefaults(t *testing.T) {
	got := proc.Defaults()
	want := proc.Config{
		Shell:       []string{"/bin/sh", "-c"},
		HeadBytes:   64 << 10,
		TailBytes:   1 << 20,
		StreamBytes: 256 << 10,
		LogMaxBytes: 64 << 20,
		PromptAfter: 4 * time.Second,
		Grace:       3 * time.Second,
		WaitDelay:   2 * time.Second,
		TTYCols:     120,
		TTYRows:     40,
	}
	if !slices.Equal(got.Shell, want.Shell) {
		t.Errorf("Shell = %q, want %q", got.Shell, want.Shell)
	}
	got.Shell, want.Shell = nil, nil
	if got.HeadBytes != want.HeadBytes || got.TailBytes != want.TailBytes || got.StreamBytes != want.StreamBytes ||
		got.LogMaxBytes != want.LogMaxBytes || got.PromptAfter != want.PromptAfter || got.Grace != want.Grace ||
		got.WaitDelay != want.WaitDelay || got.TTYCols != want.TTYCols || got.TTYRows != want.TTYRows {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
}

// TestStdoutIsCopiedToAWriter: Config.Stdout gets stdout, not stderr
// (with SeparateStreams), as it arrives (a line is there before the
// process writes the next), while
// the capture keeps it too; a program given by Args runs without a shell;
// a writer that fails stops the copying but not the capture.
func TestStdoutIsCopiedToAWriter(t *testing.T) {
	r, w := io.Pipe()
	p := mustStart(t, proc.Config{
		Args:            []string{"/bin/sh", "-c", "echo one; echo err >&2; read x; echo two $x"},
		Stdin:           true,
		Stdout:          w,
		SeparateStreams: true,
	})
	go func() { p.Wait(context.Background()); w.Close() }()
	got := lines(r)
	if l := <-got; l != "one" {
		t.Fatalf("first line = %q, want one", l)
	}
	// "two" is written only after this input: the copy is live.
	if _, err := p.Input(t.Context(), []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l != "two x" {
		t.Errorf("second line = %q, want %q", l, "two x")
	}
	if l, ok := <-got; ok {
		t.Errorf("more after stdout: %q (stderr must not be copied)", l)
	}
	if e := mustWait(t, p); e.Code != 0 {
		t.Errorf("Exit = %+v, want 0", e)
	}
	if s := string(p.Read(proc.Stdout, 0, 0).Data); s != "one\ntwo x\n" {
		t.Errorf("captured stdout = %q", s)
	}

	// A reader that goes away: the write fails, the process is not held
	// back, and the capture has everything.
	r, w = io.Pipe()
	r.Close()
	p = mustStart(t, proc.Config{Args: []string{"/bin/sh", "-c", "for i in $(seq 1000); do echo line $i; done"}, Stdout: w})
	want := 0
	for i := 1; i <= 1000; i++ {
		want += len("line \n") + len(strconv.Itoa(i))
	}
	if e := mustWait(t, p); e.Code != 0 || e.Stdout != int64(want) {
		t.Errorf("Exit = %+v after the writer failed, want 0 and all of stdout", e)
	}
}

// TestCommandHasNoControllingTerminal (an outsider's finding): a command
// without a sandbox kept its host's controlling terminal, through which
// (TIOCSTI) it typed into the user's shell, and answered the host's own
// question, "run outside the sandbox?". Each command has a session of
// its own.
func TestCommandHasNoControllingTerminal(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	cmd := exec.Command(os.Args[0], "tty-host")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stdin = slave
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if want := "host: tty\ncommand: no tty\n"; out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A command leads a session of its own even where the host's has no
// terminal to keep from it (an outsider's finding, when a process group
// alone stood for the session there, for 16 µs a start): its group is
// then orphaned, so a stop signal the kernel sends for job control,
// which no one would ever continue, is discarded (kill -TSTP $$ stopped
// such a command, which then hung, reported running), and setsid's
// scheduler autogroup is its own, which it may renice (through
// /proc/self/autogroup) without lowering offstage's and its client's.
func TestCommandLeadsItsSessionWithoutATerminal(t *testing.T) {
	for _, c := range []struct{ name, command string }{
		{"host that does not lead its session", `"$0" notty-host; :`},
		{"host that leads its session", `exec "$0" notty-host`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", c.command, os.Args[0])
			cmd.Env = append(os.Environ(), helperEnv+"=1")
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // a session without a terminal
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v:\n%s", err, out.String())
			}
			if want := "no tty\nown session\nwent on\nstopped by us: false\n"; out.String() != want {
				t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
			}
		})
	}
}

// A command without input reads the end of its input at once, from a
// /dev/null of its own: flags one sets on it (O_NONBLOCK, O_APPEND)
// reach no other (an outsider's finding, when one was shared).
func TestCommandWithoutInputHasDevNull(t *testing.T) {
	for i := range 2 {
		p := mustStart(t, helperConfig("stdin-flags"))
		mustWait(t, p)
		if got := string(p.Read(proc.Combined, 0, 0).Data); got != "flags 0\n" {
			t.Fatalf("run %d: stdin's flags %q, want none (the run before set O_NONBLOCK and O_APPEND on its own)", i, got)
		}
	}
	for i := range 3 {
		p := mustStart(t, proc.Config{Command: `readlink /proc/self/fd/0; exec 0<&-; cat /proc/self/fd/0 2>/dev/null || echo closed`})
		if e := mustWait(t, p); e.Code != 0 {
			t.Fatalf("run %d: %+v", i, e)
		}
		if got, want := string(p.Read(proc.Combined, 0, 0).Data), "/dev/null\nclosed\n"; got != want {
			t.Fatalf("run %d: got %q, want %q", i, got, want)
		}
	}
	p := mustStart(t, proc.Config{Command: `cat; echo end`})
	if e := mustWait(t, p); e.Code != 0 || string(p.Read(proc.Combined, 0, 0).Data) != "end\n" {
		t.Fatalf("cat of no input: %+v, %q", e, p.Read(proc.Combined, 0, 0).Data)
	}
}

// A stop gives what outlived the leader its grace, and what it prints
// then, past what a pipe holds, is read meanwhile: a test runner's report
// on SIGTERM, behind a shell that SIGTERM ends at once (an outsider's
// finding: the inline reaper read nothing while it waited).
func TestLastWordsDuringAStopAreRead(t *testing.T) {
	p := mustStart(t, proc.Config{Command: `sh -c 'trap "seq 1 100000; echo cleanup-done; exit 0" TERM; echo started; while :; do sleep 0.01; done' & wait`})
	readUntil(t, p, "started")
	p.Stop(20 * time.Second)
	e := mustWait(t, p)
	if got := p.Tail(1); got != "cleanup-done\n" || e.Bytes < 588895 {
		t.Errorf("after the stop: %d bytes, ending %q; want the leftover's 588895 bytes and cleanup-done", e.Bytes, got)
	}
	if e.Duration > 15*time.Second {
		t.Errorf("the stop took %v: the leftover blocked on its pipe until the grace ran out", e.Duration)
	}
}

// TestExitMemoryPeakIsNotTheStarters pins a leftover of the marks-mode
// review: a `sleep 3` reported a memory peak of 56 MB, the starting
// process's own: at exec Linux carries the resident peak of the memory
// the command was forked sharing (this process's) into its ru_maxrss.
// With this process holding 200 MiB, a sleep's peak is its own (the
// cgroup's, or the highest seen) or unknown (0), never the 200 MiB.
func TestExitMemoryPeakIsNotTheStarters(t *testing.T) {
	ballast := make([]byte, 200<<20)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1 // resident
	}
	p := mustStart(t, proc.Config{Command: "sleep 0.2"})
	e := mustWait(t, p)
	if e.MemoryPeak >= 64<<20 {
		t.Errorf("%s: Exit.MemoryPeak of a sleep = %d MiB, want its own (or 0, unknown), not the starter's", proc.Containment().Mode, e.MemoryPeak>>20)
	}
	// A command that held more than this process ever did keeps its peak,
	// though nothing looked while it ran.
	p = mustStart(t, helperConfig("hold", strconv.Itoa(512<<20)))
	readUntil(t, p, "holding")
	p.Stop(0)
	if e := mustWait(t, p); e.MemoryPeak < 512<<20 && runtime.GOOS == "linux" {
		t.Errorf("%s: Exit.MemoryPeak of a command that held 512 MiB = %d MiB", proc.Containment().Mode, e.MemoryPeak>>20)
	}
	runtime.KeepAlive(ballast)
}
