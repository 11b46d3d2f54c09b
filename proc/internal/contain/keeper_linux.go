package contain

import (
	"fmt"
	"os"
	ossignal "os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// keeperEnv, in a process's environment, makes it a keeper instead of the
// program it was built as. Only startKeeper sets it, in the environment
// of the keeper alone.
const keeperEnv = "OFFSTAGE_PROC_KEEPER"

// The keeper is this same binary, re-executed: the hook below runs before
// main (and before TestMain), so a program that imports proc needs no call
// of its own to have one.
func init() {
	if v, ok := os.LookupEnv(keeperEnv); ok {
		if v == probeArg {
			os.Exit(0) // started into a cgroup, to see that it can be
		}
		os.Exit(keeperMain(v))
	}
}

// keeper is the one keeper of this host process (see "Containment" in the
// package doc). Package state, like hostID: it belongs to the OS process.
var keeper struct {
	mu  sync.Mutex
	pid int   // 0 until started, and after it was found gone
	w   int   // write end of its pipe; our exit closes it and wakes it
	err error // why the last start failed, or why the last keeper went
	// failed is when a start last failed; the next try waits keeperRetry.
	failed time.Time
	marked bool // the host has its host mark (markHost)
}

// keeperRetry is how long after a failed start the next Start tries again.
const keeperRetry = 10 * time.Second

// ensureKeeper starts the keeper if there is none, or if the one there was
// has gone (someone killed it). It costs one wait4 when the keeper runs.
// A keeper that cannot be started is not fatal: the lifeline and the
// process groups still hold, and KeeperStatus says why.
func ensureKeeper() {
	keeper.mu.Lock()
	defer keeper.mu.Unlock()
	info, host := containment()
	if !keeper.marked {
		if info.Mode == ModeMarks {
			markHost()
		}
		keeper.marked = true
	}
	if keeper.pid != 0 {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(keeper.pid, &ws, syscall.WNOHANG, nil)
		if pid == 0 && err == nil {
			return // still there
		}
		syscall.Close(keeper.w)
		keeper.pid, keeper.err = 0, fmt.Errorf("keeper exited (%v); starting another", describeWait(ws, err))
	}
	if !keeper.failed.IsZero() && time.Since(keeper.failed) < keeperRetry {
		return
	}
	dir := ""
	if host != nil {
		dir = host.dir
	}
	pid, w, err := startKeeper(dir)
	if err != nil {
		keeper.err, keeper.failed = fmt.Errorf("proc: start keeper: %w", err), time.Now()
		return
	}
	keeper.failed = time.Time{}
	keeper.pid, keeper.w, keeper.err = pid, w, nil
}

func describeWait(ws syscall.WaitStatus, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case ws.Signaled():
		return "killed by " + SignalName(ws.Signal())
	default:
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	}
}

// startKeeper re-executes this binary as the keeper of hostID (and of the
// cgroups under dir, in ModeCgroup), reading a pipe whose only write end
// this process keeps (close-on-exec, so no child inherits it). The keeper
// is put in a session of its own, so a terminal's ^C or hang-up does not
// reach it.
func startKeeper(dir string) (pid, w int, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return 0, 0, err
	}
	defer syscall.Close(p[0])
	null, err := syscall.Open(os.DevNull, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Close(p[1])
		return 0, 0, err
	}
	defer syscall.Close(null)
	pid, err = syscall.ForkExec("/proc/self/exe", []string{"offstage-keeper"}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{keeperEnv + "=" + strconv.FormatUint(hostID, 16) + ":" + dir},
		Files: []uintptr{uintptr(p[0]), uintptr(null), 2},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		syscall.Close(p[1])
		return 0, 0, err
	}
	return pid, p[1], nil
}

// KeeperInfo describes this host's keeper: a diagnostic for tests, not
// API (the keeper is an implementation of containment).
type KeeperInfo struct {
	PID int // 0 when none runs
	// RSS is its resident memory in bytes, as the kernel counts it;
	// Private is the part of it that is its own (RssAnon). The rest are
	// pages of the executable, shared with the host.
	RSS, Private int64
	Err          error // why none runs, or why the last one went
}

// KeeperStatus reports on this host's keeper, starting it if it is not running
// yet (it is otherwise started by the first Start). Safe for concurrent
// use.
func KeeperStatus() KeeperInfo {
	ensureKeeper()
	keeper.mu.Lock()
	info := KeeperInfo{PID: keeper.pid, Err: keeper.err}
	keeper.mu.Unlock()
	if info.PID != 0 {
		info.RSS, info.Private = memory(info.PID)
	}
	return info
}

// memory reads VmRSS and RssAnon from /proc/PID/status, in bytes.
func memory(pid int) (rss, anon int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	kb := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n << 10
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = kb(v)
		} else if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			anon = kb(v)
		}
	}
	return rss, anon
}

// keeperMain is the keeper's whole life: wait until the host is gone,
// then end every process in its cgroups (ModeCgroup: arg is "HOSTID:DIR")
// or carrying one of its marks ("HOSTID:"), and remove the cgroups. It
// returns the exit status.
func keeperMain(arg string) int {
	hostArg, dir, _ := strings.Cut(arg, ":")
	host, err := strconv.ParseUint(hostArg, 16, 64)
	if err != nil || host >= 1<<markHostBits || dir != "" && !strings.HasPrefix(dir, "/") {
		fmt.Fprintf(os.Stderr, "offstage keeper: bad %s=%q; this variable is set by proc for its keeper only\n", keeperEnv, arg)
		return 2
	}
	// Only the host's end decides: the terminal's signals and a kill of
	// the host's name must not take the keeper before its work is done.
	ossignal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGPIPE)
	clearOwnMark()
	var buf [64]byte
	for {
		n, err := syscall.Read(0, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 {
			break // the host is gone: every write end is closed
		}
	}
	if dir != "" {
		err = endCgroups(dir, keeperGrace, keeperDeadline)
		// The v1 cgroups of its limits, named as its v2 directory, under
		// the keeper's own (the host's) v1 cgroups.
		for _, base := range V1Bases() {
			if verr := endCgroups(base+"/"+filepath.Base(dir), 0, keeperDeadline); err == nil {
				err = verr
			}
		}
	} else {
		err = sweep(uint64(markMagic)<<markHostBits|host, keeperGrace, keeperDeadline)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "offstage keeper: %v\n", err)
		return 1
	}
	return 0
}

// What the keeper gives the processes it ends: SIGTERM, up to keeperGrace
// to go, then SIGKILL until none is left or keeperDeadline has passed.
const (
	keeperGrace    = 300 * time.Millisecond
	keeperDeadline = 10 * time.Second
)

// sweep ends every live process whose mark has host part host.
func sweep(host uint64, grace, deadline time.Duration) error {
	s := newScanner()
	want := ofHost(host)
	start := time.Now()
	n, _ := s.killRound(want, true, syscall.SIGTERM)
	for n > 0 && time.Since(start) < grace {
		time.Sleep(10 * time.Millisecond)
		n = 0
		s.scan(want, true, func(int) { n++ })
	}
	if n == 0 {
		return nil
	}
	_, err := s.killAll(want, true, start.Add(deadline))
	return err
}
