package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/internal/tracing"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/task"
)

// ShellOptions shape a shell task (SpawnShell); the zero value gives the
// defaults.
type ShellOptions struct {
	// Label names the task in lists. Default: the command, shortened to
	// one line of at most 60 characters.
	Label string
	// Timeout, when positive, stops the process group after that long
	// running, and the task ends timed_out.
	Timeout time.Duration
	// ResultLines and ResultBytes bound the output tail in the task's
	// result. Defaults 40 lines, 4 KiB.
	ResultLines int
	ResultBytes int
	// Heartbeat is how often a running shell reports new output as
	// progress (task.EventOutput), at most. Default 1s.
	Heartbeat time.Duration

	// PromptNotice writes the notice (task.Handle.Notify, kind
	// NoticeWaitingForInput) the shell posts to its owner each time it
	// starts waiting for input (see proc.Config.PromptAfter); inputOpen
	// says whether anything can answer it. Default: DefaultPromptNotice.
	PromptNotice func(id, prompt string, inputOpen bool) string

	// NotifyOn, if set, watches the output: lines that match it (cleaned,
	// as proc's WaitLine matches) are posted to the owner as notices of
	// kind NoticeWatch, batched: the first match waits WatchBatch for
	// more, notices come at most one per WatchEvery, each carries at most
	// WatchLines lines (and says how many more matched), and after
	// WatchNotices notices the watch ends, saying so.
	//
	// Like WaitLine, a watch looks at output through the ring and then the
	// log: without a log, output faster than the watch can read
	// (gigabytes a second) passes partly unseen, and a notice says how
	// many bytes, whether or not a line matched: once on its own, then
	// with the next notice, and the rest when the output ends. How fast a
	// watch reads depends on the pattern more than on the lines: a pattern
	// such as `ERROR|panic:` runs the regexp package's NFA over every
	// byte, about 15 MB/s on a loaded 2-core machine
	// (BenchmarkCaptureNotifyOnLog), so a command printing faster than
	// that, beyond the 1 MiB ring, starts to pass a watch without a log by.
	// CanEscalate says that the model may ask to run a command outside
	// the sandbox (bash with sandbox: false): the note on a sandbox's
	// refusal says so, or that it may not; Advice words what the user
	// can do (Config.Advice).
	CanEscalate bool
	Advice      Advice

	NotifyOn     *regexp.Regexp
	WatchBatch   time.Duration // default 1s
	WatchEvery   time.Duration // default 10s
	WatchLines   int           // default 20
	WatchNotices int           // default 20

	// LogDir, if set, gives each shell a log of its whole output in that
	// directory, named after its task id ("shell-3.log"), capped by
	// proc.Config.LogMaxBytes; reads that fall behind the ring are then
	// served from it (see proc.Process.Read). It takes the place of
	// proc.Config.LogPath, which is ignored. A log that cannot be opened
	// does not stop the shell: it runs without one, and
	// proc.Config.OnLogError is told.
	LogDir string
	// OnStart, if set, is called with the task's id and its process once
	// the process has started (a journal records its pid and log), before
	// SpawnShell returns it.
	OnStart func(id string, p *proc.Process)
	// OnExit, if set, is called with the task's id and its process once
	// the process has ended (its Exit is ready), before the task
	// finishes (a journal records what it used).
	OnExit func(id string, p *proc.Process)

	// call is the context of the tool call that starts the shell: its
	// span, if traced, is the parent of the shell's (see package tracing).
	call context.Context
}

// Kinds of the notices a shell posts.
const (
	NoticeWaitingForInput = "waiting_for_input"
	NoticeWatch           = "watch"
)

// Defaults of ShellOptions' watch, documented there; the bash tool's
// description promises them.
const (
	defaultWatchBatch   = time.Second
	defaultWatchEvery   = 10 * time.Second
	defaultWatchLines   = 20
	defaultWatchNotices = 20
)

// DefaultPromptNotice is the notice of a shell that seems to wait for
// input, unless ShellOptions.PromptNotice says otherwise.
func DefaultPromptNotice(id, prompt string, inputOpen bool) string {
	s := fmt.Sprintf("%s seems to wait for input: %q.", id, prompt)
	if !inputOpen {
		s += " Its input is closed, so nothing can answer it: stop it, and run it again with its input open or with a flag that answers for it."
	}
	return s
}

const (
	defaultResultLines = 40
	defaultResultBytes = 4 << 10
	defaultHeartbeat   = time.Second
	labelChars         = 60
)

// SpawnShell runs cfg as a task of v's owner with kind "shell" and returns
// its id (shell:N) and its process, which the caller may use at once
// (read, wait, write input). The process starts when the task starts:
// SpawnShell returns once it has started, or failed to (then the task
// fails with the error). That is a few milliseconds, but the first Start
// of a host also starts its keeper (see proc), which takes longer. A task that has to wait queued (the table runs
// task.Options.MaxRunning at once) has no process yet: SpawnShell returns
// it nil, and Shell gives it once the task runs. The process's context is
// the task's, so cancelling the task, its owner ending, its timeout and
// closing the table all stop the process group (SIGTERM, SIGKILL after
// cfg.Grace), and the task function returns only once the process is
// reaped.
//
// The task is the process's owner: it ends with it, and whoever holds
// the task's view stops it with View.Cancel. A stop sent through the
// process (Process.Stop) ends the task canceled too, like any stop we
// sent; a non-zero exit, or death by a signal we did not send, ends it
// failed with a *proc.ExitError. While it runs, Peek shows the output's
// last lines and the view's Output returns the process (see Shell). Its
// result is a line of exit status followed by the cleaned tail of the
// output, bounded by ShellOptions.
func SpawnShell(v *task.View, cfg proc.Config, opts ShellOptions) (string, *proc.Process, error) {
	id, started, err := spawnShell(v, cfg, opts)
	if err != nil {
		return "", nil, err
	}
	// A task that started has its function called, which says; one still
	// queued (or cancelled while queued) has not.
	if info, err := v.Info(id); err != nil || info.Started.IsZero() {
		return id, nil, nil
	}
	return id, <-started, nil
}

// spawnShell is SpawnShell without the wait for the process: the bash
// tool answers at once, and finds the process later (processOf), as the
// first Start of a host also starts its keeper, which takes a while.
// started says the process, or nil, once.
func spawnShell(v *task.View, cfg proc.Config, opts ShellOptions) (string, <-chan *proc.Process, error) {
	if strings.TrimSpace(cfg.Command) == "" {
		return "", nil, fmt.Errorf("tools: empty command")
	}
	opts = opts.withDefaults(cfg.Command)
	started := make(chan *proc.Process, 1) // runShell's process, or nil if it did not start
	id, err := v.Spawn(task.Spec{Kind: "shell", Label: opts.Label, Timeout: opts.Timeout}, func(ctx context.Context, h *task.Handle) (string, error) {
		return runShell(ctx, v, h, cfg, opts, started)
	})
	return id, started, err
}

// withDefaults fills in what opts leaves zero.
func (opts ShellOptions) withDefaults(command string) ShellOptions {
	if opts.Label == "" {
		opts.Label = Label(command)
	}
	if opts.ResultLines <= 0 {
		opts.ResultLines = defaultResultLines
	}
	if opts.ResultBytes <= 0 {
		opts.ResultBytes = defaultResultBytes
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = defaultHeartbeat
	}
	if opts.PromptNotice == nil {
		opts.PromptNotice = DefaultPromptNotice
	}
	if opts.WatchBatch <= 0 {
		opts.WatchBatch = defaultWatchBatch
	}
	if opts.WatchEvery <= 0 {
		opts.WatchEvery = defaultWatchEvery
	}
	if opts.WatchLines <= 0 {
		opts.WatchLines = defaultWatchLines
	}
	if opts.WatchNotices <= 0 {
		opts.WatchNotices = defaultWatchNotices
	}
	return opts
}

// runShell is a shell task's function. It sends its process on started
// once the process runs with its output attached, or nil if it did not
// start: exactly once, whatever happens.
func runShell(ctx context.Context, v *task.View, h *task.Handle, cfg proc.Config, opts ShellOptions, started chan<- *proc.Process) (result string, err error) {
	defer func() {
		select {
		case started <- nil: // it did not start, or panicked before it said
		default:
		}
	}()
	if opts.call != nil {
		var span trace.Span
		ctx, span = tracing.Task(ctx, opts.call, "shell", h.ID(), opts.Label)
		defer tracing.EndTask(span, v, h.ID())
		if tp := tracing.Traceparent(ctx); tp != "" {
			// A traced program joins the trace (W3C trace context in the
			// environment, as otel-cli and the SDKs' env propagators read it).
			if cfg.Env == nil {
				cfg.Env = os.Environ()
			}
			cfg.Env = append(slices.Clip(cfg.Env), "TRACEPARENT="+tp)
		}
	}
	var p *proc.Process
	running := make(chan struct{})
	onPrompt := cfg.OnPrompt
	cfg.OnPrompt = func(prompt string) {
		<-running
		h.Notify(NoticeWaitingForInput, opts.PromptNotice(h.ID(), prompt, p.InputOpen()))
		if onPrompt != nil {
			onPrompt(prompt)
		}
	}
	if opts.LogDir != "" {
		cfg.LogPath = filepath.Join(opts.LogDir, strings.ReplaceAll(h.ID(), ":", "-")+".log")
	}
	p, err = proc.Start(ctx, cfg)
	var le *proc.LogError
	if errors.As(err, &le) && cfg.LogPath != "" {
		// A log that cannot be opened (a full or read-only state
		// directory) costs the log, not the command: it runs without one,
		// its output kept in memory, and whoever watches logs is told.
		if cfg.OnLogError != nil {
			cfg.OnLogError(le)
		}
		cfg.LogPath = ""
		p, err = proc.Start(ctx, cfg)
	}
	if err != nil {
		return "", err
	}
	close(running)
	if opts.OnStart != nil {
		opts.OnStart(h.ID(), p)
	}
	// Activity first: whoever sees the output attached sees it running.
	h.Activity(fmt.Sprintf("running (pid %d)", p.PID()))
	h.AttachOutput(p)
	started <- p
	if opts.NotifyOn != nil {
		watched := make(chan struct{})
		defer func() { <-watched }()
		go func() {
			defer close(watched)
			watchOutput(h, p, opts)
		}()
	}
	reportOutput(h, p, opts.Heartbeat)
	e, _ := p.Exit()
	if opts.OnExit != nil {
		opts.OnExit(h.ID(), p)
	}
	if e.Code >= 0 && e.Signal == 0 {
		h.SetExitCode(e.Code)
	}
	h.Activity(exitSummary(e))
	if e.Stopped && ctx.Err() == nil {
		// Stopped through the process (Process.Stop), not through the
		// task: a stop we sent ends the task canceled, as a cancel does.
		// The table decides the state by the task's context when the
		// function returns, so the cancel goes first.
		v.CancelCause(h.ID(), task.EndCause(e.Cause, task.ByUser, "its process was stopped from outside the task"))
	}
	result = shellResult(p, e, opts.ResultLines, opts.ResultBytes)
	if failedByItself(e) {
		// While the caller's other shells still run: who holds a port it
		// could not take.
		tail := proc.Clean(p.TailLines(proc.Combined, opts.ResultLines, opts.ResultBytes).Data)
		if note := inUseNote(v, h.ID(), cfg.Command, tail); note != "" {
			result += "\n" + note
		}
		if note := sandboxNote(p.Sandbox(), tail, opts.CanEscalate, opts.Advice); note != "" {
			result += "\n" + note
		}
	}
	return result, e.Err()
}

// reportOutput tells the task's owner of p's output as it grows, at most
// once per every (the first growth at once), until p has finished. It is
// woken by output, never by a ticker: a thousand quiet shells cost no
// wake-ups (issue 35).
func reportOutput(h *task.Handle, p *proc.Process, every time.Duration) {
	var reported int64
	for {
		n, _ := p.WaitOutput(context.Background(), reported) // returns once p has finished, too
		select {
		case <-p.Done():
			return
		default:
		}
		reported = n
		h.OutputArrived(n)
		pause := time.NewTimer(every)
		select {
		case <-pause.C:
		case <-p.Done():
			pause.Stop()
			return
		}
	}
}

// failedByItself says whether a process ended with a failure of its own:
// a non-zero status or a signal we did not send.
func failedByItself(e proc.Exit) bool { return !e.Stopped && (e.Code != 0 || e.Signal != 0) }

// shellResult is the text a shell task reports: how it ended and the last
// lines of its output, cleaned, at most maxLines lines and about maxBytes.
func shellResult(p *proc.Process, e proc.Exit, maxLines, maxBytes int) string {
	var b strings.Builder
	b.WriteString(exitSummary(e))
	fmt.Fprintf(&b, " after %s, %d bytes of output", e.Duration.Round(time.Millisecond), e.Bytes)
	switch {
	case e.Contained.Leftovers > 0 && e.Stopped:
		fmt.Fprintf(&b, "; %d processes it had started were ended with it", e.Contained.Leftovers)
	case e.Contained.Leftovers > 0:
		fmt.Fprintf(&b, "; %d processes it left running were killed", e.Contained.Leftovers)
	}
	if e.Contained.Survivors > 0 {
		fmt.Fprintf(&b, "; %d of its processes could not be killed (%v)", e.Contained.Survivors, e.Contained.SurvivorsErr)
	}
	if note := bestEffortNote(sandboxOf(p)); note != "" {
		b.WriteString("; " + note)
	}
	if e.Contained.MemoryKills > 0 && e.Err() == nil {
		fmt.Fprintf(&b, "; the kernel killed %d of its processes: they reached the memory limit of %s", e.Contained.MemoryKills, resource.FormatSize(e.Contained.MemoryLimit))
	}
	if e.Contained.ForksRefused > 0 {
		fmt.Fprintf(&b, "; %s", forksNote(e))
	}
	var le *proc.LogError
	if errors.As(e.LogErr, &le) {
		fmt.Fprintf(&b, "; its output log stopped at byte %d (%s), so %d bytes of it were not logged", le.At, le.Reason(), e.LogCut)
	}
	if e.Bytes == 0 {
		return b.String()
	}
	tail := p.TailLines(proc.Combined, maxLines, maxBytes)
	text := proc.Clean(tail.Data)
	if tail.Start > 0 {
		fmt.Fprintf(&b, "; last %d bytes:\n…", tail.Total-tail.Start)
	} else {
		b.WriteString(":\n")
	}
	b.WriteString(text)
	return b.String()
}

// exitSummary says how a process ended: "exit status 2", "killed by
// SIGSEGV", "stopped (killed by SIGTERM)".
func exitSummary(e proc.Exit) string {
	if e.Code == 0 && e.Signal == 0 && !e.Stopped {
		return "exit status 0"
	}
	return e.Err().Error() // "exit status 2", "killed by SIGSEGV", "stopped (killed by SIGTERM)"
}

// Label shortens a command to one line of at most 60 characters for lists:
// white space is folded and a cut is marked with "…".
func Label(command string) string { return text.OneLine(command, labelChars) }

// forksNote says why a command's forks failed ("Resource temporarily
// unavailable", all it saw): it reached the most processes a shell may
// have. Before, the model saw the error alone (an outsider's finding).
func forksNote(e proc.Exit) string {
	return fmt.Sprintf("the kernel refused %s: it had the most processes a shell may have (%d, threads included), so a fork that failed (\"Cannot fork\", \"Resource temporarily unavailable\") failed for that; run fewer at once", text.Plural(e.Contained.ForksRefused, "fork"), e.Contained.PidsLimit)
}
