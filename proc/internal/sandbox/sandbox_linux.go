package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/offstage/offstage/proc/internal/contain"
	"github.com/offstage/offstage/proc/internal/sandbox/step"
	"golang.org/x/sys/unix"
)

// sandboxEnv makes the binary re-executed the sandbox step (package
// step, whose init function takes over).
const sandboxEnv = step.Env

type stepSpec = step.Spec

// sandboxHost is what this host offers a sandbox, found once.
type sandboxHost struct {
	abi      int   // Landlock ABI; 0 without Landlock
	abiErr   error // why there is none
	netnsErr error // why no network namespace can be made; nil if one can
	mountErr error // why no read-only mounts can be made; nil if they can
}

var sandboxDetect struct {
	once sync.Once
	host sandboxHost
}

// detectSandbox asks the kernel for its Landlock ABI, and makes a network
// namespace with loopback up, and read-only mounts, once each, to see
// that they can be made: as root, on a thread of this process that then
// dies; otherwise by starting the step in a user namespace of its own
// (unprivileged user namespaces may be refused by sysctl, AppArmor or a
// container's seccomp profile).
func detectSandbox() sandboxHost {
	sandboxDetect.once.Do(func() {
		h := &sandboxDetect.host
		h.abi, h.abiErr = step.ABI()
		if os.Geteuid() == 0 {
			h.netnsErr = contain.OnFencedThread(func() error { return step.NewNetwork() })
			h.mountErr = contain.OnFencedThread(func() error { return step.ReadOnlyMounts(nil, nil, true) })
			return
		}
		h.netnsErr = probeStep(step.Probe, true)
		h.mountErr = probeStep(step.ProbeMounts, false)
	})
	return sandboxDetect.host
}

// Test knobs: pretendABI, when above 0 and below the kernel's, is the
// Landlock ABI sandboxes plan and fence for; noSandboxMounts plans them
// as if no read-only mounts could be made, so that Landlock alone
// refuses writes.
var (
	pretendABI      atomic.Int32
	noSandboxMounts atomic.Bool
)

// PretendABI makes sandboxes plan and fence for Landlock ABI n where the
// kernel's is higher (0: the kernel's), as on an older kernel. A test
// knob.
func PretendABI(n int) { pretendABI.Store(int32(n)) }

// Mounts turns the sandbox's read-only mounts on (where the host can make
// them) or off, so that Landlock alone refuses writes. A test knob.
func Mounts(on bool) { noSandboxMounts.Store(!on) }

// ThroughStep says whether the command started through the step rather
// than forked from a fenced thread.
func (sb *Setup) ThroughStep() bool { return sb != nil && !sb.thread && !sb.forked }

// sandboxHostNow is detectSandbox, with the test knobs applied.
func sandboxHostNow() sandboxHost {
	h := detectSandbox()
	if n := int(pretendABI.Load()); n > 0 && n < h.abi {
		h.abi = n
	}
	if noSandboxMounts.Load() && h.mountErr == nil {
		h.mountErr = errors.New("turned off (test)")
	}
	return h
}

// probeStep starts the step as a probe, in a user namespace of its own
// (and a network namespace, with newNet), and returns why it failed.
func probeStep(probe string, newNet bool) error {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"offstage-sandbox-probe"}
	cmd.Env = []string{sandboxEnv + "=" + probe}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	namespaceAttr(cmd, newNet, !newNet)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(string(out))
	if msg == "" {
		msg = err.Error()
	}
	return errors.New(msg)
}

// namespaceAttr makes cmd clone the step into the namespaces it needs:
// a network namespace of its own with newNet; as a user that is not
// root, also a user namespace of its own, where the step maps the user's
// uid and gid to themselves (IDsEnv) and has, until it drops them, the
// capabilities to do so, to bring lo up (newNet) and to make its
// read-only mounts. Root's step has them all already.
func namespaceAttr(cmd *exec.Cmd, newNet, mounts bool) {
	sys := cmd.SysProcAttr
	if newNet {
		sys.Cloneflags |= syscall.CLONE_NEWNET
	}
	if os.Geteuid() == 0 || !newNet && !mounts {
		return
	}
	const capSetgid, capSetuid, capNetAdmin, capSysAdmin = 6, 7, 12, 21
	sys.Cloneflags |= syscall.CLONE_NEWUSER
	// CAP_SYS_ADMIN also for /proc/self/setgroups, which must say deny.
	sys.AmbientCaps = append(sys.AmbientCaps, capSetgid, capSetuid, capSysAdmin)
	if newNet {
		sys.AmbientCaps = append(sys.AmbientCaps, capNetAdmin)
	}
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d %d", step.IDsEnv, os.Geteuid(), os.Getegid()))
}

// Setup is a sandbox planned for one start (Prepare).
type Setup struct {
	status Status
	spec   stepSpec
	tmp    string     // the command's own temporary directory, removed after it
	thread bool       // started from a fenced thread, not through the step
	forked bool       // started by the forker, not through the step
	pid    int        // the forker's command, once started
	tmpDir *os.File   // tmp, open (O_PATH)
	dirs   []*os.File // spec.Write's directories, open (pinned; tmpDir first)
	// gateR and gateW hold a thread's command back until the thread is
	// gone (see gateCommand).
	gateR, gateW *os.File
	// netns is the network namespace the thread made or took for the
	// command (nil through the step, or with the network on): after the
	// command it may serve the next one (see netSpares).
	netns *os.File
}

// The step keeps descriptors 0 to the lifeline's, and no more.
var _ [contain.LifelineFD + 1 - step.KeepFDs]struct{}
var _ [step.KeepFDs - contain.LifelineFD - 1]struct{}

// Prepare plans s on this host, for a command run in dir (the workspace
// by default), and makes the command's temporary directory; a strict
// sandbox that cannot hold fails here. Nil when s is off.
func Prepare(s Policy, dir string) (*Setup, error) {
	if !s.On() {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	ws := s.Workspace
	if ws == "" && s.Mode == WorkspaceWrite {
		if ws = dir; ws == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, fmt.Errorf("proc: sandbox workspace: %w", err)
			}
			ws = wd
		}
	}
	status, spec, err := planSandbox(s, ws, sandboxHostNow())
	if err != nil {
		return nil, err
	}
	var dirs []*os.File
	for _, d := range spec.Write {
		f, err := pinDir(d)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, f)
	}
	tmp, err := os.MkdirTemp("", "offstage-sandbox-")
	if err != nil {
		return nil, fmt.Errorf("proc: sandbox temporary directory: %w", err)
	}
	tmpDir, err := os.OpenFile(tmp, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("proc: sandbox temporary directory: %w", err)
	}
	status.Writable = append([]string{tmp}, status.Writable...)
	spec.Write = append([]string{tmp}, spec.Write...)
	return &Setup{status: status, spec: spec, tmp: tmp, tmpDir: tmpDir, dirs: append([]*os.File{tmpDir}, dirs...)}, nil
}

// Pinned writable places. A writable place is bound, and given its
// Landlock rule, from a descriptor of the directory opened when this
// process first used its path, not from its path at each start: a
// command that may write the parent of a writable place (one nested in
// another, or a workspace under a --sandbox-write directory) could move
// it away and leave a link to elsewhere at its path, which the next
// command's fence would follow.
var pins struct {
	mu  sync.Mutex
	dir map[string]*os.File
}

// maxPins bounds the directories pinned: a program that names more
// distinct writable places than this in its life is refused.
const maxPins = 4096

// pinDir returns path's directory as first opened by this process.
func pinDir(path string) (*os.File, error) {
	pins.mu.Lock()
	defer pins.mu.Unlock()
	if f, ok := pins.dir[path]; ok {
		return f, nil
	}
	if len(pins.dir) >= maxPins {
		return nil, fmt.Errorf("proc: sandbox: more than %d distinct writable places in this process's life; %s is one too many", maxPins, path)
	}
	f, err := os.OpenFile(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("proc: sandbox: writable place %s: %w", path, err)
	}
	if pins.dir == nil {
		pins.dir = make(map[string]*os.File)
	}
	pins.dir[path] = f
	return f, nil
}

// Check says what s enforces on this host, and fails as Start
// would where s is strict and a rule its mode needs cannot hold: a
// program checks its flags with it at start-up. Writable does not list
// the per-command temporary directory, which Start makes.
func Check(s Policy) (Status, error) {
	if !s.On() {
		return Status{Mode: Off}, nil
	}
	if err := s.Validate(); err != nil {
		return Status{}, err
	}
	if s.Workspace == "" && s.Mode == WorkspaceWrite {
		wd, err := os.Getwd()
		if err != nil {
			return Status{}, fmt.Errorf("proc: sandbox workspace: %w", err)
		}
		s.Workspace = wd
	}
	st, sp, err := planSandbox(s, s.Workspace, sandboxHostNow())
	if err != nil {
		return st, err
	}
	for _, d := range sp.Write { // before any command runs (see pinDir)
		if _, err := pinDir(d); err != nil {
			return st, err
		}
	}
	st.Writable = append([]string{"$TMPDIR (its own)"}, st.Writable...)
	return st, nil
}

// planSandbox decides what holds of s on host h: the status told to the
// model and the step's rules. A strict sandbox missing a rule fails,
// saying what is missing.
func planSandbox(s Policy, workspace string, h sandboxHost) (Status, stepSpec, error) {
	st := Status{Mode: s.Mode, Network: s.Network}
	var sp stepSpec
	var missing []string
	abi := strconv.Itoa(h.abi)
	if s.Mode == WorkspaceWrite {
		for _, d := range append([]string{workspace}, s.Write...) {
			if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
				return st, sp, fmt.Errorf("proc: sandbox: %s is not a directory that exists; create it or leave it out of the writable places", d)
			}
			sp.Write = append(sp.Write, d)
		}
		st.Writable = append(st.Writable, sp.Write...)
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			for _, d := range sp.Write {
				if within(home, d) {
					st.Gaps = append(st.Gaps, "the home directory "+home+" is writable (under "+d+"): a command can change ~/.bashrc, ~/.ssh or a git hook there, which run or grant access outside the sandbox later; make the workspace a project directory")
					break
				}
			}
		}
	}
	sp.ABI = h.abi
	switch {
	case h.abi == 0:
		missing = append(missing, fmt.Sprintf("the file system fence: no Landlock (%v)", h.abiErr))
	case h.abi < 3 && h.mountErr != nil:
		st.Enforced = append(st.Enforced, "file system: Landlock ABI "+abi)
		missing = append(missing, "truncating files outside the fence (Landlock ABI 3 needed, have "+abi+"; read-only mounts would do it, but there are none: "+h.mountErr.Error()+")")
	case h.abi < 3:
		st.Enforced = append(st.Enforced, "file system: Landlock ABI "+abi+"; truncating files outside the writable places: read-only mounts (Landlock truncates from ABI 3)")
	default:
		st.Enforced = append(st.Enforced, "file system: Landlock ABI "+abi)
	}
	if h.abi == 1 {
		st.Gaps = append(st.Gaps, "renaming or linking a file into another directory fails (EXDEV) even within the writable places (Landlock ABI 1; ABI 2 allows it): mv copies instead, ln and tools that rename across directories fail")
	}
	if !s.Network {
		switch {
		case h.netnsErr == nil:
			sp.Loopback = true
			st.Enforced = append(st.Enforced, "network: own network namespace (loopback only)")
		case h.abi >= 10:
			sp.NetTCP = true
			st.Enforced = append(st.Enforced, "network: Landlock TCP and UDP rules (no network namespace: "+h.netnsErr.Error()+")")
		case h.abi >= 4:
			sp.NetTCP = true
			st.Enforced = append(st.Enforced, "network: Landlock TCP rules")
			missing = append(missing, "cutting UDP and DNS (no network namespace: "+h.netnsErr.Error()+"; Landlock cuts UDP from ABI 10, have "+abi+")")
		default:
			missing = append(missing, "the network fence (no network namespace: "+h.netnsErr.Error()+"; Landlock cuts TCP from ABI 4, have "+abi+")")
		}
	}
	if !step.SetIDFenced() {
		st.Gaps = append(st.Gaps, "set-uid and set-gid bits are not refused on "+runtime.GOARCH+": a command run by root can leave a set-uid root program in its writable places")
	}
	if h.mountErr == nil {
		sp.Mounts = true
		st.Enforced = append(st.Enforced, "mode, owner and times of files: read-only mounts but the writable places")
	} else {
		st.Gaps = append(st.Gaps, "changes of mode, owner and times (chmod, chown, touch) of files outside the writable places, and System V shared memory, semaphores and message queues of processes outside, are not fenced (no mount and IPC namespaces: "+h.mountErr.Error()+")")
	}
	switch {
	case h.abi >= 6:
		sp.Abstract = !s.Network
		st.Enforced = append(st.Enforced, "signals and ptrace: Landlock scope")
	case h.abi >= 1:
		st.Gaps = append(st.Gaps, "signals: the command can signal processes of the same user outside it (Landlock ABI 6 scopes signals, have "+abi+"); ptrace is fenced")
	}
	if len(missing) > 0 && !s.BestEffort {
		return st, sp, fmt.Errorf("proc: the %s sandbox cannot hold on this host: it lacks %s; run with best effort (offstage: --sandbox-best-effort) to start anyway and be told what is not enforced, or turn the sandbox off", s.Mode, strings.Join(missing, "; and "))
	}
	st.NotEnforced = missing
	return st, sp, nil
}

// Apply prepares cmd to start fenced. Where it can (see "Sandbox" in the
// package doc), start fences a thread of this process and forks the
// command from it; otherwise the command starts as the step, which
// fences itself and execs it: when a user namespace must be made for the
// network namespace (not root), when the start is traced (the thread
// that forks must go on tracing, unfenced), when the command is not a
// line for the default shell (see gateCommand), and when this process
// holds a descriptor without close-on-exec that the command would
// inherit (the step closes those).
//
// A host that is not root starts a default shell's line through its
// forker (see forker_linux.go) instead of the step, unless its start is
// traced for more than setting its mark (markOnly: the gate holds the
// command until Open, after the mark is set) or the step is forced.
func (sb *Setup) Apply(cmd *exec.Cmd, traced, markOnly, defaultShell bool) error {
	cmd.Env = setEnv(cmd.Env, "TMPDIR", sb.tmp)
	userns := (sb.spec.Loopback || sb.spec.Mounts) && os.Geteuid() != 0
	thread := !userns && !traced && defaultShell && !forceStep.Load() && !inheritableFDs()
	forked := userns && (!traced || markOnly) && defaultShell && !forceStep.Load() && !noForker.Load()
	if thread || forked {
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("proc: sandbox: %w", err)
		}
		sb.thread, sb.forked, sb.gateR, sb.gateW = thread, forked, r, w
		sb.spec.WriteFDs = nil
		for _, f := range sb.dirs {
			sb.spec.WriteFDs = append(sb.spec.WriteFDs, int(f.Fd()))
		}
		cmd.ExtraFiles[gateFD-3] = r
		cmd.Args[len(cmd.Args)-1] = gateCommand(cmd.Args[len(cmd.Args)-1])
		return nil
	}
	// The writable places, from descriptor KeepFDs up: the step binds
	// them, and closes them at its exec.
	sb.spec.WriteFDs = nil
	for i, f := range sb.dirs {
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		sb.spec.WriteFDs = append(sb.spec.WriteFDs, step.KeepFDs+i)
	}
	spec, err := json.Marshal(sb.spec)
	if err != nil {
		return fmt.Errorf("proc: sandbox: %w", err)
	}
	if cmd.Err == nil { // else Start reports the lookup's failure
		cmd.Args = append([]string{"offstage-sandbox", cmd.Path}, cmd.Args...)
		cmd.Path = "/proc/self/exe"
	}
	cmd.Env = append(cmd.Env, sandboxEnv+"="+string(spec))
	namespaceAttr(cmd, sb.spec.Loopback, sb.spec.Mounts)
	return nil
}

// Terminal makes name (/dev/pts/N) the command's own terminal, the only
// one of /dev/pts it may open.
func (sb *Setup) Terminal(name string) { sb.spec.Terminal = name }

// The gate. The thread that forks a fenced command is in the command's
// own Landlock domain, with its uid, until it ends: long enough, after
// the exec, for the command to signal it (SIGKILL to one thread ends the
// whole host) or, in a host that is dumpable, to open its
// /proc/PID/task/TID/mem (the host's memory) or ptrace it. So the shell
// runs a line of its own first, which waits on descriptor gateFD, and
// Start writes to it only once the thread is gone. Nothing the command
// says runs before: a syntax error anywhere in its line stops the shell
// before the gate's read, as it would have stopped it anyway.
const gateFD = 3

// gateCommand is line, run by the default shell (/bin/sh -c) behind the
// gate: on one line with it, so that the line numbers the shell reports
// are the command's own. A gate closed without a line (the host died,
// or gave the start up) ends the shell before the command: the forker's
// command may have been forked when its host stopped waiting for it.
func gateCommand(line string) string {
	return "read -r _ <&3 || exit 126; exec 3<&-; " + line
}

// Start starts cmd: from a fenced thread, or, planned so by Apply, as
// the step.
func (sb *Setup) Start(cmd *exec.Cmd) error {
	if sb != nil && sb.forked {
		return sb.startForked(cmd)
	}
	if sb == nil || !sb.thread {
		return cmd.Start()
	}
	// The fence's filter refuses the thread clone3, so not into its
	// cgroup: the command is moved there behind the gate, as the
	// forker's is.
	sys := cmd.SysProcAttr
	cgroup := -1
	if sys != nil && sys.UseCgroupFD {
		cgroup, sys.UseCgroupFD = sys.CgroupFD, false
	}
	tid := make(chan int, 1)
	err := contain.OnFencedThread(func() error {
		tid <- syscall.Gettid()
		if sb.spec.Loopback {
			ns, err := enterNetwork()
			if err != nil {
				return fmt.Errorf("proc: sandbox: %w", err)
			}
			sb.netns = ns
		}
		if sb.spec.Mounts {
			if cmd.Dir == "" { // by its path: onto the writable mount, if it is one
				wd, err := os.Getwd()
				if err != nil {
					return fmt.Errorf("proc: sandbox: %w", err)
				}
				cmd.Dir = wd
			}
			if err := step.ReadOnlyMounts(sb.spec.Write, sb.spec.WriteFDs, sb.spec.Terminal == ""); err != nil {
				return fmt.Errorf("proc: sandbox: %w", err)
			}
		}
		if err := step.Fence(sb.spec); err != nil {
			return fmt.Errorf("proc: sandbox: %w", err)
		}
		return cmd.Start()
	})
	sb.gateR.Close() // the command's copy is its own
	if err != nil {
		sb.gateW.Close()
		return err
	}
	err = threadGone(<-tid)
	if err == nil && cgroup >= 0 {
		err = joinCgroup(cgroup, cmd.Process.Pid)
	}
	if err != nil {
		// The gate stays shut: end the command before it runs.
		cmd.Process.Kill()
		cmd.Wait()
		sb.gateW.Close()
		return fmt.Errorf("proc: sandbox: %w", err)
	}
	sb.gateW.Write([]byte{'\n'}) // the shell may be gone (a syntax error): EPIPE, nothing to do
	sb.gateW.Close()
	return nil
}

// Open lets a command started by the forker run, once its host has set
// its mark; after it, Remove leaves the gate alone. Other starts have
// opened their gate already.
func (sb *Setup) Open() {
	if sb == nil || !sb.forked || sb.gateW == nil {
		return
	}
	sb.gateW.Write([]byte{'\n'}) // the shell may be gone: EPIPE, nothing to do
	sb.gateW.Close()
	sb.gateW = nil
}

// Forked says whether the command is started by the forker: its start is
// not traced (its mark is set behind the gate, before Open).
func (sb *Setup) Forked() bool { return sb != nil && sb.forked }

// threadGone waits until this process's thread tid has ended (its
// goroutine has returned, locked, so the runtime ends it).
func threadGone(tid int) error {
	pid := syscall.Getpid()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		if err := syscall.Tgkill(pid, tid, 0); err == syscall.ESRCH {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the thread %d that started the command did not end", tid)
		}
		if i < 50 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// inheritableFDs says whether this process has a descriptor from
// step.KeepFDs up without close-on-exec: a command forked here
// would inherit it, a file or socket outside the fence (Landlock checks
// opens, not writes through what is open). Go opens everything
// close-on-exec; such a descriptor comes from whoever started the
// process, or from C code.
func inheritableFDs() bool {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return true // cannot tell: the step closes them
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd < step.KeepFDs || fd == int(f.Fd()) {
			continue
		}
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if errno == 0 && flags&syscall.FD_CLOEXEC == 0 {
			return true
		}
	}
	return false
}

// setEnv returns env with name set to value, replacing any earlier value.
func setEnv(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

// Remove removes what Prepare made, for a start that failed.
func (sb *Setup) Remove() {
	if sb != nil {
		if sb.pid > 0 {
			forkers.end(sb.pid, false)
			sb.pid = 0
		}
		os.RemoveAll(sb.tmp)
		sb.tmpDir.Close()
		if sb.netns != nil {
			sb.netns.Close()
		}
		if sb.gateR != nil { // a start that failed before start
			sb.gateR.Close()
		}
		if sb.gateW != nil { // a forked start that failed before Open
			sb.gateW.Close()
		}
	}
}

// Release is Remove for a command that has ended: empty says that no
// process of it is left (its cgroup was empty when its leader exited),
// and then its network namespace may serve the next command.
func (sb *Setup) Release(empty bool) {
	if sb == nil {
		return
	}
	if empty && sb.netns != nil {
		netSpares.keep(sb.netns)
		sb.netns = nil
	}
	if sb.pid > 0 {
		forkers.end(sb.pid, empty && sb.spec.Loopback)
		sb.pid = 0
	}
	sb.Remove()
}

// Spare network namespaces. Making one is most of what the network off
// costs a command (the kernel registers every protocol's state and
// sysctls for it, then tears it all down after, about a millisecond of
// CPU in all), and one whose command has ended is as good as new: no
// process is left in it (its cgroup is empty, and a fenced command can
// neither leave its cgroup nor join another namespace), and a command
// fenced as root has no CAP_NET_ADMIN to change it (step.Fence).
// What could remain is sockets: one in TIME_WAIT, or one handed to a
// process outside; a namespace with any socket left is not used again.
// So the host keeps a few, for spareIdle, as it keeps empty cgroups.
var netSpares spareNets

type spareNets struct {
	mu    sync.Mutex
	list  []*os.File
	timer *time.Timer // drains the list after spareIdle without a keep
}

func (s *spareNets) keep(ns *os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.list) >= contain.MaxSpares {
		ns.Close()
		return
	}
	s.list = append(s.list, ns)
	if s.timer == nil {
		s.timer = time.AfterFunc(contain.SpareIdle, func() { s.drain() })
	} else {
		s.timer.Reset(contain.SpareIdle)
	}
}

func (s *spareNets) take() *os.File {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.list)
	if n == 0 {
		return nil
	}
	ns := s.list[n-1]
	s.list = s.list[:n-1]
	return ns
}

// drain closes the kept namespaces, and says how many there were.
func (s *spareNets) drain() int {
	s.mu.Lock()
	list := s.list
	s.list = nil
	s.mu.Unlock()
	for _, ns := range list {
		ns.Close()
	}
	return len(list)
}

// enterNetwork moves the calling (locked) thread into a network
// namespace with loopback alone: a spare with no socket left in it, or a
// new one. It returns the namespace, or nil where it cannot be kept.
func enterNetwork() (*os.File, error) {
	for ns := netSpares.take(); ns != nil; ns = netSpares.take() {
		if err := unix.Setns(int(ns.Fd()), syscall.CLONE_NEWNET); err == nil && step.NoSockets() {
			return ns, nil
		}
		ns.Close()
	}
	if err := step.NewNetwork(); err != nil {
		return nil, err
	}
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, nil // used once, then
	}
	return ns, nil
}

// KeepInheritedToSelf marks every descriptor this process holds past
// stdin, stdout and stderr close-on-exec. A program that starts
// commands calls it first thing in main: a launcher's open file or
// socket (exec 200>>file in the shell that started it, a CI runner's
// pipe) then reaches no command, which could write through it (a sandbox
// checks opens, not writes to what is open) or hold a pipe open that its
// reader waits on. Sandboxed commands of a process that holds such a
// descriptor start through the re-executed step, which closes it for
// them, at the cost of one more exec each.
func KeepInheritedToSelf() {
	const closeRangeCloexec = 1 << 2
	if _, _, errno := syscall.RawSyscall(unix.SYS_CLOSE_RANGE, 3, ^uintptr(0)>>1, closeRangeCloexec); errno == 0 {
		return
	}
	entries, _ := os.ReadDir("/proc/self/fd") // before Linux 5.11
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
