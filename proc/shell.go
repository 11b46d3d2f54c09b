package proc

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/offstage/offstage/task"
)

// ShellOptions shape a shell task; the zero value gives the defaults.
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
}

const (
	defaultResultLines = 40
	defaultResultBytes = 4 << 10
	defaultHeartbeat   = time.Second
	labelChars         = 60
)

// SpawnShell runs cfg as a task of v's owner with kind "shell" and returns
// its id (shell:N) at once. The process starts when the task starts (it
// may wait queued); its context is the task's, so cancelling the task, its
// owner ending, its timeout and closing the table all stop the process
// group (SIGTERM, SIGKILL after cfg.Grace), and the task function returns
// only once the process is reaped.
//
// While it runs, Peek shows the output's last lines and the view's Output
// returns the *Process (for cursor reads and input). Its result is a line
// of exit status followed by the cleaned tail of the output, bounded by
// ShellOptions; a non-zero exit, or death by a signal we did not send,
// makes the task failed with an *ExitError.
func SpawnShell(v *task.View, cfg Config, opts ShellOptions) (string, error) {
	if strings.TrimSpace(cfg.Command) == "" {
		return "", fmt.Errorf("proc: empty command")
	}
	if opts.Label == "" {
		opts.Label = Label(cfg.Command)
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
	return v.Spawn(task.Spec{Kind: "shell", Label: opts.Label, Timeout: opts.Timeout}, func(ctx context.Context, h *task.Handle) (string, error) {
		return runShell(ctx, h, cfg, opts)
	})
}

func runShell(ctx context.Context, h *task.Handle, cfg Config, opts ShellOptions) (string, error) {
	p, err := Start(ctx, cfg)
	if err != nil {
		return "", err
	}
	// Activity first: whoever sees the output attached sees it running.
	h.Activity(fmt.Sprintf("running (pid %d)", p.PID()))
	h.AttachOutput(p)
	ticker := time.NewTicker(opts.Heartbeat)
	defer ticker.Stop()
	var reported int64
	for done := false; !done; {
		select {
		case <-ticker.C:
			if n := p.Written(); n != reported {
				reported = n
				h.OutputArrived(n)
			}
		case <-p.Done():
			done = true
		}
	}
	e, _ := p.Exit()
	if e.Code >= 0 && e.Signal == 0 {
		h.SetExitCode(e.Code)
	}
	h.Activity(exitSummary(e))
	return ShellResult(p, e, opts.ResultLines, opts.ResultBytes), e.Err()
}

// ShellResult is the text a shell task reports: how it ended and the last
// lines of its output, cleaned, at most maxLines lines and about maxBytes.
func ShellResult(p *Process, e Exit, maxLines, maxBytes int) string {
	var b strings.Builder
	b.WriteString(exitSummary(e))
	fmt.Fprintf(&b, " after %s, %d bytes of output", e.Duration.Round(time.Millisecond), e.Bytes)
	if e.Leftovers > 0 {
		fmt.Fprintf(&b, "; %d processes it left running were killed", e.Leftovers)
	}
	if e.Survivors > 0 {
		fmt.Fprintf(&b, "; %d of its processes could not be killed (%v)", e.Survivors, e.SurvivorsErr)
	}
	if e.Bytes == 0 {
		return b.String()
	}
	tail := p.TailLines(Combined, maxLines, maxBytes)
	text := Clean(tail.Data)
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
func exitSummary(e Exit) string {
	switch {
	case e.Stopped:
		return "stopped (" + (&ExitError{Code: e.Code, Signal: e.Signal}).Error() + ")"
	case e.Signal != 0:
		return "killed by " + signalName(e.Signal)
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Label shortens a command to one line of at most 60 characters for lists:
// white space is folded and a cut is marked with "…".
func Label(command string) string {
	s := strings.Join(strings.Fields(command), " ")
	if utf8.RuneCountInString(s) <= labelChars {
		return s
	}
	r := []rune(s)
	return string(r[:labelChars-1]) + "…"
}
