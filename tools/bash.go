package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

//go:embed bash.md
var bashMD string

type bashInput struct {
	Command           string  `json:"command" jsonschema:"the shell command line"`
	RunInBackground   bool    `json:"run_in_background,omitempty" jsonschema:"start it and return its task id at once"`
	TimeoutSeconds    float64 `json:"timeout_seconds,omitempty" jsonschema:"stop it after this many seconds; default none"`
	YieldAfterSeconds float64 `json:"yield_after_seconds,omitempty" jsonschema:"foreground only: move it to the background after this many seconds; default 30"`
	Cwd               string  `json:"cwd,omitempty" jsonschema:"working directory"`
	Interactive       *bool   `json:"interactive,omitempty" jsonschema:"keep stdin open for task_input"`
	TTY               bool    `json:"tty,omitempty" jsonschema:"run it on a terminal, for programs that need one (REPLs, ssh, top, git add -p); input stays open"`
}

// BashOutput is the bash tool's result.
type BashOutput struct {
	TaskID          string   `json:"task_id"`
	Status          string   `json:"status"`
	ExitCode        *int     `json:"exit_code,omitempty"`
	DurationSeconds *float64 `json:"duration_seconds,omitempty"` // once finished
	Output          string   `json:"output,omitempty"`
	OutputBytes     int64    `json:"output_bytes"`
	Error           string   `json:"error,omitempty"`
	Note            string   `json:"note,omitempty"`
}

func (s *Set) bash(ctx context.Context, v *task.View, in bashInput) (any, error) {
	switch {
	case in.Command == "":
		return nil, fail("command is empty; pass the shell command line to run.")
	case in.TimeoutSeconds < 0:
		return nil, fail("timeout_seconds must not be negative (leave it out for no timeout).")
	case in.YieldAfterSeconds < 0:
		return nil, fail("yield_after_seconds must not be negative (leave it out for the default %d).", defaultYieldSeconds)
	}
	interactive := in.Interactive != nil && *in.Interactive
	if in.TTY && in.Interactive != nil && !*in.Interactive {
		return nil, fail("tty: true keeps its input open (a terminal is read from); leave interactive out, or drop tty.")
	}
	cfg := s.cfg.Process
	cfg.Command, cfg.Stdin, cfg.TTY = in.Command, interactive, in.TTY
	if in.Cwd != "" {
		dir := in.Cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cfg.Dir, dir)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fail("cwd %q is not a directory that exists; pass an existing directory or leave cwd out.", shorten(in.Cwd, 200))
		}
		cfg.Dir = dir
	}
	id, err := proc.SpawnShell(v, cfg, proc.ShellOptions{Timeout: seconds2d(in.TimeoutSeconds)})
	switch {
	case errors.Is(err, task.ErrFull):
		return nil, fail("Too many tasks are running or waiting to be read; wait for or cancel some first (task_list).")
	case err != nil:
		return nil, err
	}
	if in.RunInBackground {
		return BashOutput{TaskID: id, Status: status(v, id),
			Note: fmt.Sprintf("Started in the background as %s. Keep working: its result will come back to you when it finishes. Read its output with task_output, or wait for it with task_wait.", id)}, nil
	}
	return s.foreground(ctx, v, id, seconds2d(in.YieldAfterSeconds))
}

// foreground waits for a command, up to yieldAfter; one still running then
// is adopted into the background, not killed.
func (s *Set) foreground(ctx context.Context, v *task.View, id string, yieldAfter time.Duration) (any, error) {
	if yieldAfter <= 0 {
		yieldAfter = defaultYieldSeconds * time.Second
	}
	done, err := v.Done(id)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(yieldAfter)
	defer timer.Stop()
	select {
	case <-done:
		return s.finished(v, id, ""), nil
	case <-timer.C:
		out := BashOutput{TaskID: id, Status: status(v, id),
			Note: fmt.Sprintf("It is still running after %s, so it keeps running in the background as %s. Do not run it again; read its output with task_output, or wait for it with task_wait.", yieldAfter, id)}
		if p, _ := processOf(v, id); p != nil {
			out.Output, out.OutputBytes = tail(p, outputBytes)
		}
		return out, nil
	case <-ctx.Done():
		// The turn was cancelled: a foreground command goes with it.
		v.Cancel(id)
		stopped, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		select {
		case <-done:
		case <-stopped.Done():
		}
		return s.finished(v, id, "The command was stopped because the turn was cancelled."), nil
	}
}

// finished reports a foreground command that ended, consuming its result
// so it is not reported again later.
func (s *Set) finished(v *task.View, id, note string) BashOutput {
	r, ok := consume(v, id)
	out := BashOutput{TaskID: id, Status: r.State.String(), Note: note}
	if !ok {
		info, _ := v.Info(id)
		out.Status = info.State.String()
	}
	if r.HasExitCode {
		code := r.ExitCode
		out.ExitCode = &code
	}
	if ok && !r.Started.IsZero() {
		d := seconds(r.Finished.Sub(r.Started))
		out.DurationSeconds = &d
	}
	if r.Err != nil {
		out.Error = shorten(r.Err.Error(), fieldBytes)
	}
	if p, _ := processOf(v, id); p != nil {
		out.Output, out.OutputBytes = tail(p, outputBytes)
		if out.OutputBytes > int64(len(out.Output)) && out.Note == "" {
			out.Note = fmt.Sprintf("Only the end of the output is shown; read the rest with task_output {\"task_id\": %q, \"since\": 0}.", id)
		}
		if e, _ := p.Exit(); e.Leftovers > 0 {
			out.Note = joinNotes(out.Note, leftoversNote(e.Leftovers))
		}
	}
	return out
}

// leftoversNote tells the model that what its command left running was
// killed, and how to keep a server instead.
func leftoversNote(n int) string {
	what := "1 process"
	if n != 1 {
		what = fmt.Sprintf("%d processes", n)
	}
	return "The command left " + what + " running (in the background, or daemonized); they were killed when it exited, as everything a command starts ends with it. To keep a server running, start it with run_in_background: true and without & or a daemonize option, and cancel it when done."
}

// tail returns the cleaned end of a process's output, at most max bytes,
// and how many bytes it wrote in all.
func tail(p *proc.Process, max int) (string, int64) {
	ch := p.TailLines(proc.Combined, 1<<30, max)
	return proc.Clean(ch.Data), ch.Total
}

func status(v *task.View, id string) string {
	info, _ := v.Info(id)
	return info.State.String()
}

func seconds2d(s float64) time.Duration {
	return time.Duration(s * float64(time.Second))
}
