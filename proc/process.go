package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/proc/internal/contain"
	fence "github.com/offstage/offstage/proc/internal/sandbox"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/proc/sandbox"
)

// Config describes a command to run. The zero value of every field but
// Command (or Args) gives the documented default.
type Config struct {
	// Command is the shell command line, run as Shell + [Command].
	Command string
	// Shell runs Command. Default: /bin/sh -c.
	Shell []string
	// Args, if set, is a program and its arguments, run as they are (the
	// program looked up in PATH as exec.Command does) in place of Shell
	// and Command: for a program named by its argv rather than a command
	// line (an editor's MCP server). Containment is the same.
	Args []string
	// Dir is the working directory. Default: the host's.
	Dir string
	// Env is the child's environment. Default: the host's (os.Environ()).
	// EnvPolicy filters it either way; a child that nothing can answer
	// also gets environ.NonInteractive (see Stdin).
	Env []string
	// EnvPolicy withholds variables from the child's environment. The zero
	// value withholds whatever looks like a secret (see environ.Policy).
	EnvPolicy environ.Policy
	// Stdin opens a pipe to the child's standard input (see Input). Without
	// it the child reads from /dev/null, and, without TTY either, its
	// environment gets environ.NonInteractive's settings it does not set.
	Stdin bool
	// TTY runs the command on a pseudo-terminal of its own: in a new
	// session with the terminal as its controlling tty, so programs that
	// want one (REPLs, ssh, top, git add -p, progress bars) work. Its
	// input and output are the terminal's: stdout and stderr are one
	// stream (Stdout), Input writes what a keyboard would (control
	// characters included: "\x03" interrupts the foreground job), and
	// CloseInput sends end of file ("\x04"). TERM is xterm-256color (the
	// host's own TERM describes another terminal) unless Env is given and
	// sets it. Containment is the same as without a terminal.
	TTY bool
	// TTYCols and TTYRows size the terminal. Default 120 by 40.
	TTYCols, TTYRows uint16
	// SeparateStreams gives stderr a pipe of its own. By default stdout
	// and stderr are one pipe, as on a terminal, so the output comes back
	// in the order it was written (`echo a; echo b >&2` as a then b), and
	// all of it is the Stdout stream (Stderr stays empty). Apart, the
	// Stdout and Stderr streams tell them apart, but between the two
	// Combined has only the order the reads saw, which may put an error
	// before the line that caused it. Ignored with TTY.
	SeparateStreams bool
	// Stdout, if set, also receives what the process writes to its
	// stdout (with TTY or without SeparateStreams, stderr too), as it arrives:
	// written from the goroutine that captures it, once captured, as
	// exec.Cmd's Stdout is. A Write that blocks holds the child back, as
	// a full pipe would, and holds up Done and Wait too (WaitDelay does
	// not bound it): the writer must keep taking output or fail. A Write
	// that fails stops the copying to Stdout, not the capture.
	Stdout io.Writer

	// PromptAfter is how long output must stop on an unfinished line that
	// looks like a question (see WaitingForInput) before the process counts
	// as waiting for input (WaitingForInput). Default 4s;
	// negative turns the watch off.
	PromptAfter time.Duration
	// OnPrompt, if set, is called once each time the process starts
	// waiting for input, with the prompt line, from a goroutine of the
	// process's own. It must not block for long.
	OnPrompt func(prompt string)

	// HeadBytes is how much of the start of the output is kept in memory.
	// Default 64 KiB.
	HeadBytes int
	// TailBytes is how much of the end of the output is kept in memory, in
	// a ring. Default 1 MiB.
	TailBytes int
	// StreamBytes is how much of the end of stdout and of stderr is also
	// kept separately, for per-stream reads. Default 256 KiB each.
	StreamBytes int
	// LogPath, if set, is a file that receives all the output, interleaved
	// as captured, up to LogMaxBytes. It is created or truncated. Reads of
	// the combined output fall back to it for what the ring no longer
	// holds.
	LogPath string
	// LogMaxBytes caps the log file; past it the file stops growing and
	// ends with a line saying how much was not logged. Default 64 MiB.
	LogMaxBytes int64
	// LogReserveBytes is the free space a log leaves on its file system
	// for others (offstage's journal lives beside its logs): a write that
	// would leave less is not made, and logging stops there as on a full
	// disk (OnLogError, Exit.LogErr and the file's last line say so, with
	// ErrLogReserve). Default: 1% of the file system, at least 1 MiB and
	// at most 256 MiB. Negative: none, the log may fill the disk.
	LogReserveBytes int64
	// OnLogError, if set, is told once, with a *LogError, when writing the
	// log fails (a full disk): logging stops there, and the file ends with
	// a line saying where and why (Process.Log and Exit.LogErr say it
	// too). A log that cannot be opened fails Start instead (a shell task
	// then runs without one, and tells OnLogError). It is called from the
	// log's goroutine and must not block for long.
	OnLogError func(error)

	// Grace is how long a process stopped because its context ended gets
	// between SIGTERM and SIGKILL. Default 3s.
	Grace time.Duration
	// WaitDelay bounds how long, after the process exited and its group was
	// killed, Wait still waits for output from processes that left the
	// group but hold its pipes. Default 2s.
	WaitDelay time.Duration

	// Limits caps the memory, processes and CPU of the command and all it
	// starts, enforced by the kernel in its cgroup (see "Resource limits" in the
	// package doc). Default: none. Where they cannot be enforced (no
	// cgroup, or no controller for one of them) Start fails, as
	// resource.Check says beforehand.
	Limits resource.Limits

	// Sandbox fences the command and all it starts: where it may write,
	// whether it may use the network (see "Sandbox" in the package doc).
	// Default: off. A sandbox that cannot hold on this host fails Start,
	// unless Sandbox.BestEffort; Process.Sandbox says what holds.
	Sandbox sandbox.Policy
}

// Defaults of Config, each documented at its field. They are not
// exported, as exec.Cmd's WaitDelay default is not: a caller who wants a
// value sets it.
const (
	defaultHeadBytes   = 64 << 10
	defaultTailBytes   = 1 << 20
	defaultStreamBytes = 256 << 10
	defaultLogMaxBytes = 64 << 20
	defaultGrace       = 3 * time.Second
	defaultWaitDelay   = 2 * time.Second
	defaultTTYCols     = 120
	defaultTTYRows     = 40
)

// readBufferBytes is the largest read from a pipe.
const readBufferBytes = 64 << 10

func (c Config) withDefaults() Config {
	if len(c.Shell) == 0 {
		c.Shell = []string{"/bin/sh", "-c"}
	}
	if c.HeadBytes <= 0 {
		c.HeadBytes = defaultHeadBytes
	}
	if c.TailBytes <= 0 {
		c.TailBytes = defaultTailBytes
	}
	if c.StreamBytes <= 0 {
		c.StreamBytes = defaultStreamBytes
	}
	if c.PromptAfter == 0 {
		c.PromptAfter = defaultPromptAfter
	}
	if c.LogMaxBytes <= 0 {
		c.LogMaxBytes = defaultLogMaxBytes
	}
	if c.Grace <= 0 {
		c.Grace = defaultGrace
	}
	if c.WaitDelay <= 0 {
		c.WaitDelay = defaultWaitDelay
	}
	if c.TTYCols == 0 {
		c.TTYCols = defaultTTYCols
	}
	if c.TTYRows == 0 {
		c.TTYRows = defaultTTYRows
	}
	return c
}

// Stream selects which output a read looks at.
type Stream uint8

const (
	Combined Stream = iota // stdout and stderr interleaved as captured
	Stdout                 // stdout; stderr too, unless Config.SeparateStreams
	Stderr                 // stderr, with Config.SeparateStreams; else empty
)

// Exit is how a process ended.
type Exit struct {
	Code     int            // exit code; -1 when killed by a signal
	Signal   syscall.Signal // the signal that killed it, 0 if none
	Stopped  bool           // we stopped it (Stop, or its context ended)
	Cause    error          // why we stopped it, when Stopped
	Duration time.Duration  // from start until it was reaped
	Bytes    int64          // bytes of output, stdout and stderr together
	Stdout   int64          // bytes written to stdout
	Stderr   int64          // bytes written to stderr
	LogCut   int64          // bytes not written to the log file, because of its cap or LogErr
	LogErr   error          // a *LogError if writing the log failed (a full disk); nil otherwise
	// CPU is the user and system time the task used, and MemoryPeak its
	// highest memory in bytes, as far as the containment can tell (see
	// Process.Usage): the cgroup's cpu.stat and memory.peak in the cgroup
	// mode, else the leader's resource usage (its own and that of the
	// descendants reaped within it: MemoryPeak is then the largest single
	// resident set) or the highest Usage saw while it ran, whichever is
	// more. The leader's resident peak counts only where it is above this
	// process's own: Linux carries the peak of the process a command was
	// forked from into it at exec, so a lower figure may not be the
	// command's (a `sleep 3` showed 56 MB), and is left out.
	// 0 where nothing was measured (unknown).
	CPU        time.Duration
	MemoryPeak int64
	// Contained is what the containment saw as it ended: the processes
	// the leader left behind (all killed), those that outlived every
	// SIGKILL (zero unless something is badly wrong), and those the
	// kernel killed at the memory limit (Err then says so).
	Contained Contained
}

// Err returns nil for a process that exited with status 0 by itself, and
// an *ExitError otherwise, which unwraps to Cause: errors.Is sees the
// context.Cause of a context that stopped it (or ErrStopped after Stop).
func (e Exit) Err() error {
	if e.Code == 0 && e.Signal == 0 && !e.Stopped {
		return nil
	}
	return &ExitError{Exit: e}
}

// Process is one running command and its process group. Its methods are
// safe for concurrent use. See the package documentation for its
// lifecycle.
type Process struct {
	cfg      Config
	cmd      *exec.Cmd
	pid      int           // also the process group id
	task     *contain.Task // its containment: mark, cgroup
	sandbox  *fence.Setup  // nil when off
	started  time.Time
	lifeline *os.File // write end: closing it signals the group

	// The inline reaper (serve_linux.go): its state, and whether its
	// first run is still to be taken (by a Wait, a look at the process
	// or the sweeper).
	srv      *server
	unserved atomic.Bool

	done    chan struct{}
	stopCtx func() bool  // stops the AfterFunc that stops the process when its context ends
	written atomic.Int64 // bytes captured so far, for cheap polling

	logMu sync.Mutex // serialises capture and log writes when logging, so the log keeps the capture's order
	log   *logFile   // nil without Config.LogPath; its write and close are guarded by logMu

	// in is a one-slot semaphore held by whoever writes to or closes
	// stdin (Input, CloseInput), so writes are not interleaved. It is a
	// channel, not a mutex, so a caller waiting behind a write that
	// blocks (a child that stopped reading) gives up when its own context
	// ends (review finding M1).
	in    chan struct{}
	stdin *os.File // write end of the child's stdin (the terminal, with Config.TTY); nil without Config.Stdin

	mu          sync.Mutex // guards the fields below
	out         *capture   // combined
	streams     [2]*capture
	leaderGone  bool // the leader exited: the group may not be signalled any more
	stopped     bool
	stopCause   error
	stopBy      time.Time // when a stop's grace ends
	killTimer   *time.Timer
	stdinClosed bool
	grew        chan struct{} // closed (and cleared) when output arrives; nil until someone waits for it
	// promptStalled: the prompt watch found the output stopped on no
	// question, in a process without an input, and has no goroutine: the
	// next output lists the process again (watchPromptsAt).
	promptStalled bool
	lastOutput    time.Time // when output last arrived, or the start
	prompt        string    // the prompt the process seems to wait on; "" when not
	exit          Exit      // set before done is closed
}

// Start runs cfg.Command in a new process group and returns at once. When
// ctx ends, the process is stopped (see Stop) with Config.Grace, and the
// stop records context.Cause(ctx). Start fails if the command cannot be
// started (no shell, a working directory that is not one) or its output
// pipes cannot be made.
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if cfg.Command == "" && len(cfg.Args) == 0 {
		return nil, errors.New("proc: empty command")
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	u := make(undo, 0, 8) // room for every push: none grows it
	inline := serveInline(cfg)
	if inline {
		u.push(contain.ReleaseWaitSlot)
	}
	p, st, err := open(cfg, &u, inline)
	if err == nil {
		err = p.launch(st, &u)
	}
	if err != nil {
		u.run()
		return nil, err
	}
	st.closeChild() // the child has its copies
	p.watch(ctx, st)
	return p, nil
}

// undo is what a Start that fails gives back: each resource it acquires
// pushes its release, and the one failure path runs them, the last
// acquired first.
type undo []func()

func (u *undo) push(f func()) { *u = append(*u, f) }

func (u undo) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// open acquires what a process needs before it starts: its sandbox's
// temporary directory, its log, its pipes (or terminal) and lifeline,
// and its containment (a cgroup).
func open(cfg Config, u *undo, inline bool) (*Process, *streams, error) {
	sb, err := fence.Prepare(cfg.Sandbox, cfg.Dir)
	if err != nil {
		return nil, nil, err
	}
	u.push(sb.Remove)
	cfg = cfg.withDefaults()
	p := &Process{
		cfg:     cfg,
		done:    make(chan struct{}),
		in:      make(chan struct{}, 1),
		out:     newCapture(cfg.HeadBytes, cfg.TailBytes),
		streams: [2]*capture{newCapture(0, cfg.StreamBytes), newCapture(0, cfg.StreamBytes)},
		sandbox: sb,
	}
	if cfg.LogPath != "" {
		lf, err := openLog(cfg.LogPath, cfg.LogMaxBytes, cfg.LogReserveBytes, cfg.OnLogError)
		if err != nil {
			return nil, nil, fmt.Errorf("proc: %w", err)
		}
		p.log = lf
		u.push(func() { lf.close() })
	}
	st, err := openStreams(cfg, inline)
	u.push(st.close)
	if err != nil {
		return nil, nil, err
	}
	if p.task, err = contain.New(cfg.Limits); err != nil {
		return nil, nil, err
	}
	u.push(p.task.Abort)
	return p, st, nil
}

// command is the exec.Cmd that runs cfg, with the streams st, in a
// process group (a session, on a terminal or in a sandbox) of its own.
func (p *Process) command(st *streams) *exec.Cmd {
	cfg := p.cfg
	var cmd *exec.Cmd
	if len(cfg.Args) > 0 {
		cmd = exec.Command(cfg.Args[0], cfg.Args[1:]...)
	} else {
		cmd = exec.Command(cfg.Shell[0], append(cfg.Shell[1:len(cfg.Shell):len(cfg.Shell)], cfg.Command)...)
	}
	cmd.Dir = cfg.Dir
	cmd.Env = markedEnv(childEnv(cfg.Env, cfg.EnvPolicy), p.task.Env(), len(nonInteractive))
	cmd.ExtraFiles = contain.LifelineFiles(st.lifeR)
	st.attach(cmd)
	switch {
	case cfg.TTY:
		cmd.Env = withTERM(cmd.Env, cfg.Env != nil)
		// A new session (whose id, like its group's, is the shell's pid:
		// signalling the group is unchanged) with the terminal as its
		// controlling tty, descriptor 0 in the child.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	case !cfg.Stdin:
		cmd.Env = withDefaults(cmd.Env, nonInteractive)
		fallthrough
	default:
		// A session of its own, so no controlling terminal: through
		// offstage's (/dev/tty) a command could push keystrokes (TIOCSTI)
		// into the user's shell, a sandboxed one so run them outside its
		// sandbox, and any one answer offstage's own questions ("run
		// outside the sandbox?", an outsider's finding); a program that
		// asks on /dev/tty (ssh, sudo, git's credentials) fails at once
		// instead of waiting on a terminal the user is typing into. The
		// session's id is the group's: signalling the group is unchanged.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	return cmd
}

// launch starts the command contained (and fenced, with a sandbox), and
// arms its lifeline.
func (p *Process) launch(st *streams, u *undo) error {
	cfg, sb := p.cfg, p.sandbox
	cmd := p.command(st)
	traced := p.task.Prepare(cmd.SysProcAttr)
	u.push(p.task.Untrace)
	var start func(*exec.Cmd) error
	if sb != nil {
		if cfg.TTY {
			sb.Terminal(st.childOut.Name())
		}
		defaultShell := len(cfg.Args) == 0 && slices.Equal(cfg.Shell, []string{"/bin/sh", "-c"})
		markOnly := !p.task.InCgroup() // traced only to mark it before it runs
		if err := sb.Apply(cmd, traced, markOnly, defaultShell); err != nil {
			return err
		}
		if sb.Forked() && traced {
			// The forker starts it behind the gate, untraced: the mark is
			// set before Open lets it run.
			p.task.Untrace()
			cmd.SysProcAttr.Ptrace = false
		}
		start = sb.Start
	}
	if err := p.task.Start(cmd, start); err != nil {
		return startError(cfg, err)
	}
	u.push(func() {
		contain.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	p.cmd, p.pid, p.started, p.lifeline = cmd, cmd.Process.Pid, time.Now(), st.lifeW
	p.lastOutput = p.started
	p.stdin = st.stdin
	if err := p.task.Started(cmd); err != nil {
		return err
	}
	if err := contain.ArmLifeline(st.lifeR, p.pid); err != nil {
		return fmt.Errorf("proc: arm lifeline: %w", err)
	}
	sb.Open()
	return nil
}

// watch starts the goroutines of a started process: a reader per pipe,
// the reaper, the prompt watcher, and the stop when ctx ends.
func (p *Process) watch(ctx context.Context, st *streams) {
	if ctx != nil && ctx.Done() != nil {
		p.stopCtx = context.AfterFunc(ctx, func() { p.stop(p.cfg.Grace, context.Cause(ctx)) })
	}
	if p.cfg.PromptAfter > 0 {
		// Not a goroutine waiting on a timer: starting a goroutine costs a
		// start more than being listed, and most commands end before their
		// first look (prompt.go).
		watchPromptsLater(p)
	}
	if st.inline {
		p.startServing(st) // the readers and the reaper in one (serve_linux.go)
		return
	}
	readers := make(chan struct{}, 2)
	go p.capture(st.out, Stdout, readers)
	if st.err != nil {
		go p.capture(st.err, Stderr, readers)
	} else {
		readers <- struct{}{} // a terminal has one stream
	}
	go p.reap(st.out, st.err, readers)
}

// Sandbox says what fences the process: its mode, where it may write,
// whether it has the network, and, for a best-effort sandbox, what did
// not hold. Mode is off for a process without a sandbox.
func (p *Process) Sandbox() sandbox.Status { return p.sandbox.Status() }

// PID returns the process id of the group leader, which is also the group
// id. Use it for display only: it is reused once the process is reaped.
func (p *Process) PID() int { return p.pid }

// Done returns a channel closed once the process has been reaped and its
// output fully captured.
func (p *Process) Done() <-chan struct{} {
	p.serveSoon()
	return p.done
}

// Wait blocks until the process has been reaped and its output captured,
// or ctx ends (then it returns context.Cause(ctx) and the process goes on).
// It never hangs on pipes held by processes that left the group: those get
// Config.WaitDelay after the leader's exit. Safe to call many times.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	p.serveHere(ctx) // it would only sleep here
	select {
	case <-p.done:
		return p.exit, nil
	case <-ctx.Done():
		return Exit{}, context.Cause(ctx)
	}
}

// Exit returns how the process ended, and false while it runs.
func (p *Process) Exit() (Exit, bool) {
	p.serveSoon()
	select {
	case <-p.done:
		return p.exit, true
	default:
		return Exit{}, false
	}
}

// Written returns how many bytes of output have been captured so far.
func (p *Process) Written() int64 {
	p.serveSoon()
	return p.written.Load()
}

// Stop asks the whole process group to end: SIGTERM to the group now,
// SIGKILL to the group grace later if the leader is still running (grace
// <= 0 sends SIGKILL at once). Whatever is left of the group when the
// leader exits is killed then. Stop returns at once; Wait waits. It is
// idempotent: only the first call counts, and a call after the process
// exited does nothing.
func (p *Process) Stop(grace time.Duration) { p.stop(grace, ErrStopped) }

func (p *Process) stop(grace time.Duration, cause error) {
	p.serveSoon()
	sig := syscall.SIGTERM
	if grace <= 0 {
		sig = syscall.SIGKILL
	}
	p.mu.Lock()
	// Signalling the group under the lock orders it before reap marks the
	// leader gone: a signal can never reach a group id reused after
	// reaping.
	if p.leaderGone || p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped, p.stopCause, p.stopBy = true, cause, time.Now().Add(grace)
	contain.KillGroup(p.pid, sig)
	if grace > 0 {
		p.killTimer = time.AfterFunc(grace, p.forceStop)
	}
	p.mu.Unlock()
	// The processes that left the group are found in the cgroup or by
	// their mark, each checked through a pidfd, so the lock is not needed
	// (nor held during the scan of /proc).
	p.task.Signal(sig)
}

// forceStop ends a stop's grace: SIGKILL to the group and to every marked
// process. Reap finishes the work once the leader is gone.
func (p *Process) forceStop() {
	p.mu.Lock()
	gone := p.leaderGone
	if !gone {
		contain.KillGroup(p.pid, syscall.SIGKILL)
	}
	p.mu.Unlock()
	if !gone {
		p.task.Kill()
	}
}

// capture copies one pipe into the buffers (and the log) until EOF, and
// stdout to Config.Stdout until a write to it fails.
func (p *Process) capture(r *os.File, s Stream, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	var copyTo io.Writer
	if s == Stdout {
		copyTo = p.cfg.Stdout
	}
	// Start small and double while reads fill the buffer: a chatty child
	// gets large reads, a quiet one costs little.
	buf := make([]byte, minGrow)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.record(buf[:n], s)
			if copyTo != nil {
				if _, werr := copyTo.Write(buf[:n]); werr != nil {
					copyTo = nil
				}
			}
			if n == len(buf) && len(buf) < readBufferBytes {
				buf = make([]byte, 2*len(buf))
			}
		}
		if err != nil {
			return // io.EOF, or the pipe was closed by reap after WaitDelay
		}
	}
}

func (p *Process) record(b []byte, s Stream) {
	if p.log != nil {
		// The log lock orders chunks in the log as in the capture; queueing
		// a chunk for the log's goroutine is a copy, or a wait when the disk
		// is behind. Readers of the buffers take p.mu alone.
		p.logMu.Lock()
		defer p.logMu.Unlock()
		p.log.write(b)
	}
	p.mu.Lock()
	p.out.write(b)
	p.streams[s-Stdout].write(b)
	p.lastOutput, p.prompt = time.Now(), ""
	// Counted before the lock goes: whoever can read the output also
	// sees it counted (a read that saw new output and an old count was
	// taken for a poll that learned nothing).
	p.written.Add(int64(len(b)))
	if p.grew != nil {
		close(p.grew) // wake WaitLine
		p.grew = nil
	}
	stalled := p.promptStalled
	p.promptStalled = false
	now := p.lastOutput
	p.mu.Unlock()
	if stalled {
		watchPromptsAt(p, now.Add(p.cfg.PromptAfter)) // the stall is over
	}
}

// reap waits for the leader, kills what is left of its group, reaps the
// leader, waits (boundedly) for the output, and publishes the exit.
func (p *Process) reap(rOut, rErr *os.File, readers <-chan struct{}) {
	// While the leader's zombie stays, its pid (and so the group id)
	// cannot be reused, and the task can tell that it forked nothing at
	// all.
	r := p.leaderExited(contain.WaitExited(p.pid) == nil)
	p.waitReaders(rOut, rErr, readers)
	p.finish(r)
}

// reaped is what leaderExited learned, for finish.
type reaped struct {
	ended     Contained
	alone     bool // nothing of it outlived the leader: its cgroup may serve the next command
	cpu       time.Duration
	peak      int64
	waitError error // cmd.Wait's
}

// leaderExited handles the leader's exit: it ends what outlived the
// leader, kills what is left of the group, reaps the leader and releases
// the task. beforeReap says that the leader has exited and is not reaped
// yet (its zombie holds its pid); false where that cannot be known, and
// the leader is then reaped first. The leftovers go first, so that they
// are counted before the group's SIGKILL; the group's are all in the task
// unless they shed their mark.
func (p *Process) leaderExited(beforeReap bool) reaped {
	return p.leaderExitedWith(beforeReap, beforeReap && p.task.MayHaveLeftovers())
}

// leaderExitedWith is leaderExited where the caller has looked for
// leftovers (Task.MayHaveLeftovers) itself. With leftovers, it ends
// them, which during a stop waits for them up to the stop's grace.
func (p *Process) leaderExitedWith(beforeReap, leftovers bool) (r reaped) {
	r.alone = beforeReap
	if leftovers {
		r.alone = false
		p.mu.Lock()
		stopping, by := p.stopped, p.stopBy
		p.mu.Unlock()
		p.task.EndLeftovers(&r.ended, stopping, by)
	}
	if beforeReap {
		p.leaderIsGone()
	}
	r.waitError = p.cmd.Wait()
	if !beforeReap {
		p.leaderIsGone()
	}
	r.cpu, r.peak = p.task.Release(&r.ended, r.alone, p.cmd.ProcessState)
	return r
}

// finish gives back what the process held, once its output is read, and
// publishes its exit.
func (p *Process) finish(r reaped) {
	// Nothing of the task is left to use its network namespace: its
	// cgroup was empty, or, for the forker's command in ModeMarks, no
	// process was made after its leader but the forker's threads.
	p.sandbox.Release(r.alone && (p.task.InCgroup() || p.sandbox.Forked()))
	p.lifeline.Close()
	if p.stdin != nil {
		p.stdin.Close() // a blocked Input returns; Input after done fails
	}
	if p.stopCtx != nil {
		p.stopCtx()
	}
	if p.cfg.PromptAfter > 0 {
		forgetPromptWatch(p) // a watch already started ends once done is closed
	}
	p.publish(Exit{CPU: r.cpu, MemoryPeak: r.peak, Contained: r.ended}, r.waitError)
}

// waitReaders waits for the two readers to reach the end of their pipes,
// for Config.WaitDelay at most: processes that left the group may still
// hold the pipes, and closing our ends then unblocks the readers.
func (p *Process) waitReaders(rOut, rErr *os.File, readers <-chan struct{}) {
	timer := time.NewTimer(p.cfg.WaitDelay)
	defer timer.Stop()
	timeout := timer.C
	for n := 0; n < 2; {
		select {
		case <-readers:
			n++
		case <-timeout:
			closeAll(rOut, rErr)
			timeout = nil
		}
	}
	closeAll(rOut, rErr)
}

// publish closes the log, completes e (the containment's figures already
// in it) with how the reaped leader ended and what was captured, and
// closes done: the exit is written before anyone can read it. waitErr is
// cmd.Wait's.
func (p *Process) publish(e Exit, waitErr error) {
	var logCut int64
	var logErr error
	if p.log != nil {
		p.logMu.Lock()
		logCut = p.log.close()
		p.logMu.Unlock()
		logErr = p.log.failed()
	}
	p.mu.Lock()
	e.Code, e.Stopped, e.Cause, e.Duration = -1, p.stopped, p.stopCause, time.Since(p.started)
	e.Bytes, e.Stdout, e.Stderr = p.out.total, p.streams[0].total, p.streams[1].total
	e.LogCut, e.LogErr = logCut, logErr
	if ps := p.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal()
		} else {
			e.Code = ps.ExitCode()
		}
	} else if waitErr != nil {
		e.Cause = waitErr
	}
	p.exit = e
	p.mu.Unlock()
	close(p.done)
}

// Processes returns how many processes of the task are alive: the leader
// and every descendant, whatever group or session it moved to. In the
// cgroup mode that is the cgroup's own list, whose cost does not grow
// with the machine; in the marks mode a scan of /proc for the task's
// mark, about a millisecond per few hundred processes on the machine. 0 once the
// process is done; on systems without /proc, the leader alone while it
// runs.
func (p *Process) Processes() int {
	select {
	case <-p.done:
		return 0
	default:
	}
	return p.task.Processes()
}

// Usage reports what the command uses while it runs (see
// resource.Usage); the zero Usage once it is done. In the cgroup mode it
// reads the task's cgroup (a few small files, and each process's statm
// when the memory controller is off); in the marks mode it costs a scan
// of /proc for its processes (as Processes does), and a read of each
// one's stat.
func (p *Process) Usage() resource.Usage {
	select {
	case <-p.done:
		return resource.Usage{}
	default:
	}
	return p.task.Usage()
}

// leaderIsGone marks the leader exited, stops the pending SIGKILL and kills
// whatever is left of the group.
func (p *Process) leaderIsGone() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killTimer != nil {
		p.killTimer.Stop()
	}
	if !p.leaderGone {
		contain.KillGroup(p.pid, syscall.SIGKILL)
		p.leaderGone = true
	}
}

// Read returns up to max bytes of stream s from cursor since on (see
// Chunk). Cursor 0 is the first byte. max <= 0 sets no cap of the
// caller's: the read returns as much as memory holds for the stream
// (Config.HeadBytes plus Config.TailBytes for Combined, Config.StreamBytes
// for Stdout and Stderr), so everything held from since on comes back in
// one read. Bytes no longer held are reported in Chunk.Skipped, never
// silently dropped; for the combined stream, bytes the ring has moved past
// are read back from the log file when there is one (Config.LogPath), so
// only output past the log's cap is skipped. It does not block; to wait
// for output, see WaitOutput.
func (p *Process) Read(s Stream, since int64, max int) Chunk {
	p.serveSoon()
	if max <= 0 {
		max = p.cfg.StreamBytes
		if s != Stdout && s != Stderr {
			max = p.cfg.HeadBytes + p.cfg.TailBytes
		}
	}
	if s == Combined {
		return p.readCombined(since, max)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.captureOf(s).read(since, max)
}

// readCombined reads the combined output like capture.read, but serves
// bytes the ring has moved past from the log file, when there is one and
// it holds them: then nothing is skipped short of the log's cap.
func (p *Process) readCombined(since int64, max int) Chunk {
	ch := p.readLocked(since, max)
	if ch.Skipped == 0 || p.log == nil {
		return ch
	}
	from := ch.Start - ch.Skipped
	data, err := p.log.readAt(from, min(int64(max), ch.Skipped))
	if err != nil || len(data) == 0 {
		return ch // past the log's cap, or an unreadable log: the skip stands
	}
	return Chunk{Data: data, Start: from, Next: from + int64(len(data)), Total: ch.Total}
}

// readLocked reads the combined capture under the lock.
func (p *Process) readLocked(since int64, max int) Chunk {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.read(since, max)
}

// WaitOutput blocks until output past cursor since has been captured, the
// process is done, or ctx ends (then it returns context.Cause(ctx)). It
// returns the number of bytes captured so far (see Written): more than
// since, or, once the process is done, the final count. It is woken by
// output as it arrives, never by polling, and consumes nothing; safe for
// concurrent use. A reader that follows the output as it comes:
//
//	for next := int64(0); ; {
//		total, err := p.WaitOutput(ctx, next)
//		if err != nil {
//			return err
//		}
//		ch := p.Read(proc.Combined, next, 0)
//		os.Stdout.Write(ch.Data)
//		next = ch.Next
//		if _, done := p.Exit(); done && next >= total {
//			return nil
//		}
//	}
func (p *Process) WaitOutput(ctx context.Context, since int64) (int64, error) {
	p.serveSoon()
	for {
		// Done is looked at before the count: output is all captured
		// before done is closed.
		finished := false
		select {
		case <-p.done:
			finished = true
		default:
		}
		p.mu.Lock()
		total := p.out.total
		if total <= since && !finished && p.grew == nil {
			p.grew = make(chan struct{})
		}
		grew := p.grew // taken with the count: output after it wakes us
		p.mu.Unlock()
		if total > since || finished {
			return total, nil
		}
		select {
		case <-grew:
		case <-p.done:
		case <-ctx.Done():
			return total, context.Cause(ctx)
		}
	}
}

// TailLines returns the last n lines of stream s that are held, at most
// max bytes.
func (p *Process) TailLines(s Stream, n, max int) Chunk {
	p.serveSoon()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.captureOf(s).tail(n, max)
}

// tailPeekBytes bounds Tail, which Peek uses.
const tailPeekBytes = 16 << 10

// Tail returns the last n lines of the combined output, cleaned for a
// model (see Clean), at most 16 KiB of it: what a task's Peek shows (it
// makes *Process a task.Output).
func (p *Process) Tail(n int) string {
	return Clean(p.TailLines(Combined, n, tailPeekBytes).Data)
}

func (p *Process) captureOf(s Stream) *capture {
	switch s {
	case Stdout, Stderr:
		return p.streams[s-Stdout]
	default:
		return p.out
	}
}
