package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/proc/sandbox"
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
	NotifyOn          string  `json:"notify_on,omitempty" jsonschema:"background only: a regular expression; each new output line matching it becomes a notice while the command runs"`
	Until             string  `json:"until,omitempty" jsonschema:"background only: a regular expression; wait until a line of output matches it, the command ends, or wait_seconds pass"`
	UntilPort         string  `json:"until_port,omitempty" jsonschema:"background only: a TCP port number such as \"8080\", \"any\", or \"leased\" (the port leased with port); wait until the command listens on it, ends, or wait_seconds pass"`
	WaitSeconds       float64 `json:"wait_seconds,omitempty" jsonschema:"with until or until_port: how long to wait; default 30, at most 300"`
	Sandbox           *bool   `json:"sandbox,omitempty" jsonschema:"false: ask the user to let this one command run outside the sandbox; default true"`
	Port              int     `json:"port,omitempty" jsonschema:"lease this many free TCP ports (1 to 8) while it runs: the first in $PORT, all in $OFFSTAGE_PORTS"`
	Lifetime          string  `json:"lifetime,omitempty" jsonschema:"session (the default: it may run until the session closes) or turn (cancelled when this turn ends)"`
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
	Ending                   // once finished: who ended it
	// Matched is the line until waited for, if it appeared.
	Matched *Match `json:"matched,omitempty"`
	// Listening is the port until_port waited for, if the command
	// listens on it.
	Listening *Listening `json:"listening,omitempty"`
	// Ports are the ports leased for it (bash with port), in $PORT and
	// $OFFSTAGE_PORTS, until it ends.
	Ports []int  `json:"ports,omitempty"`
	Note  string `json:"note,omitempty"`
}

func (s *Set) bash(ctx context.Context, v *task.View, in bashInput) (BashOutput, error) {
	out, err := s.runBash(ctx, v, in)
	if err == nil && in.Sandbox != nil && !*in.Sandbox && s.fence != "" && out.TaskID != "" {
		// Said first: the sandbox's description, which the first result
		// carries, is about the other commands.
		out.Note = joinNotes("This command ran outside the sandbox, as the user allowed; the others run in it.", out.Note)
	}
	if err == nil {
		out.Note = joinNotes(out.Note, s.envNote(v))
	}
	return out, err
}

func (s *Set) runBash(ctx context.Context, v *task.View, in bashInput) (BashOutput, error) {
	switch {
	case strings.TrimSpace(in.Command) == "":
		return BashOutput{}, fail("command is empty; pass the shell command line to run.")
	case strings.IndexByte(in.Command, 0) >= 0:
		return BashOutput{}, fail("command contains a NUL byte, which no command line can hold; write such bytes with printf's escapes ('\\0').")
	case len(in.Command) >= maxArgBytes():
		return BashOutput{}, fail("command is %d bytes, and the system passes the shell at most %d in one argument; write a long script to a file in parts (cat >> script.sh <<'EOF' … EOF, each part shorter), then run it.", len(in.Command), maxArgBytes()-1)
	case in.TimeoutSeconds < 0:
		return BashOutput{}, fail("timeout_seconds must not be negative (leave it out for no timeout).")
	case in.YieldAfterSeconds < 0:
		return BashOutput{}, fail("yield_after_seconds must not be negative (leave it out for the default %d).", defaultYieldSeconds)
	}
	if err := checkLifetime(ctx, v, in.Lifetime); err != nil {
		return BashOutput{}, err
	}
	var watch *regexp.Regexp
	if in.NotifyOn != "" {
		if !in.RunInBackground {
			return BashOutput{}, fail("notify_on watches a command running in the background; add run_in_background: true, or drop notify_on.")
		}
		var err error
		if watch, err = watchPattern(in.NotifyOn); err != nil {
			return BashOutput{}, err
		}
	}
	switch {
	case in.Until != "" && !in.RunInBackground:
		return BashOutput{}, fail("until waits for a line of a command running in the background; add run_in_background: true, or drop until.")
	case in.UntilPort != "" && !in.RunInBackground:
		return BashOutput{}, fail("until_port waits for a command running in the background to listen; add run_in_background: true, or drop until_port.")
	case in.WaitSeconds != 0 && in.Until == "" && in.UntilPort == "":
		return BashOutput{}, fail("wait_seconds is how long until or until_port waits; pass until (or until_port) too, or drop wait_seconds.")
	case in.WaitSeconds < 0:
		return BashOutput{}, fail("wait_seconds must not be negative (default %d, at most %d).", defaultWaitSeconds, maxWaitSeconds)
	}
	if in.Until != "" {
		if _, err := untilPattern(in.Until); err != nil {
			return BashOutput{}, err
		}
	}
	switch {
	case isLeased(in.UntilPort) && in.Port == 0:
		return BashOutput{}, fail("until_port \"leased\" waits for the port leased with port; add port: 1, or name the port to wait for.")
	case in.UntilPort != "" && !isLeased(in.UntilPort):
		if _, err := parsePort(in.UntilPort, true); err != nil {
			return BashOutput{}, err
		}
	}
	interactive := in.Interactive != nil && *in.Interactive
	if in.TTY && in.Interactive != nil && !*in.Interactive {
		return BashOutput{}, fail("tty: true keeps its input open (a terminal is read from); leave interactive out, or drop tty.")
	}
	cfg := s.cfg.Process
	cfg.Command, cfg.Stdin, cfg.TTY = in.Command, interactive, in.TTY
	if in.Sandbox != nil && !*in.Sandbox && cfg.Sandbox.On() {
		if s.cfg.Escalate == nil {
			how := "the user did not allow escalation"
			if a := s.cfg.Advice.Escalation; a != "" {
				how += ": " + a
			}
			return BashOutput{}, fail("Running a command outside the sandbox is not allowed here (%s). Work within the sandbox (%s), or tell the user what the command needs.", how, cfg.Sandbox.Mode)
		}
		if err := s.cfg.Escalate(ctx, v.Owner(), in.Command); err != nil {
			return BashOutput{}, fail("The user did not let this command run outside the sandbox: %v. Do not ask again for the same command; work within the sandbox, or ask the user what to do.", err)
		}
		cfg.Sandbox = sandbox.Policy{}
	}
	if in.Cwd != "" {
		dir := in.Cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cfg.Dir, dir)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return BashOutput{}, fail("cwd %q is not a directory that exists; pass an existing directory or leave cwd out.", shorten(in.Cwd, 200))
		}
		cfg.Dir = dir
	}
	if ctx.Err() != nil {
		// A call whose turn already ended starts nothing: begun, a
		// command could run to its end before the cancel stopped it, and
		// be said stopped (an outsider's finding).
		return BashOutput{}, fail("The call was cancelled (%v) before the command started: it did not run.", context.Cause(ctx))
	}
	var ports []int
	if in.Port != 0 {
		if in.Port < 0 || in.Port > maxPortsPerTask {
			return BashOutput{}, fail("port is how many ports to lease for the command, 1 to %d; leave it out for none.", maxPortsPerTask)
		}
		var err error
		if ports, err = s.cfg.Ports.Lease(in.Port); err != nil {
			return BashOutput{}, fail("No port could be leased: %v. Run the command without port, choosing a port yourself.", err)
		}
		cfg.Env = withPorts(cfg.Env, ports)
	}
	started := TurnToStart(ctx)
	id, _, err := spawnShell(v, cfg, ShellOptions{Timeout: seconds2d(in.TimeoutSeconds), PromptNotice: promptNotice, NotifyOn: watch, CanEscalate: s.cfg.Escalate != nil, Advice: s.cfg.Advice,
		LogDir: s.cfg.LogDir, OnStart: s.cfg.OnShell, OnExit: s.cfg.OnShellExit, call: ctx})
	started()
	if err != nil {
		s.cfg.Ports.Release(ports)
	}
	switch {
	case errors.Is(err, task.ErrFull):
		return BashOutput{}, fail("Too many tasks are running or waiting to be read; wait for or cancel some first (task_list).")
	case err != nil:
		return BashOutput{}, err
	}
	BindLifetime(ctx, v, id, in.Lifetime)
	if ports != nil {
		s.holdPorts(v, id, ports)
		if isLeased(in.UntilPort) {
			in.UntilPort = strconv.Itoa(ports[0])
		}
	}
	out, err := s.started(ctx, v, id, in, watch)
	out.Ports = ports
	return out, err
}

// started answers a bash call whose shell was spawned.
func (s *Set) started(ctx context.Context, v *task.View, id string, in bashInput, watch *regexp.Regexp) (BashOutput, error) {
	if in.Until != "" || in.UntilPort != "" {
		return s.startAndWait(ctx, v, id, in), nil
	}
	if in.RunInBackground {
		push := s.pushes(v.Owner())
		info, _ := v.Info(id)
		note := fmt.Sprintf("%s. Keep working: its result will come back to you when it finishes. Read its output with task_output, or wait for it with task_wait.", StartedAs(id, info.State))
		if !push {
			note = fmt.Sprintf("%s. Keep working: nothing comes back by itself, so read its output with task_output, and get its result with task_wait when you need it.", StartedAs(id, info.State))
		}
		if watch != nil {
			how := "come to you as notices meanwhile"
			if !push {
				how = "end a task_wait on it at once, as notices"
			}
			note += fmt.Sprintf(" Lines matching notify_on %s (at most %d lines per notice, one notice per %d seconds, %d notices in all).", how, defaultWatchLines, int(defaultWatchEvery/time.Second), defaultWatchNotices)
		}
		return BashOutput{TaskID: id, Status: status(v, id), Note: note}, nil
	}
	return s.foreground(ctx, v, id, seconds2d(in.YieldAfterSeconds))
}

// withPorts adds the leased ports to a shell's environment (env nil: the
// host's): the first as PORT, all as OFFSTAGE_PORTS.
func withPorts(env []string, ports []int) []string {
	if env == nil {
		env = os.Environ()
	}
	list := make([]string, len(ports))
	for i, p := range ports {
		list[i] = strconv.Itoa(p)
	}
	return append(slices.Clip(env), "PORT="+list[0], "OFFSTAGE_PORTS="+strings.Join(list, ","))
}

// holdPorts keeps a shell's leased ports until its task ends, then
// releases them.
func (s *Set) holdPorts(v *task.View, id string, ports []int) {
	done, err := v.Done(id)
	if err != nil { // it cannot be unknown: it was just spawned
		s.cfg.Ports.Release(ports)
		return
	}
	s.leased.Store(done, ports)
	if s.cfg.OnPorts != nil {
		s.cfg.OnPorts(id, ports)
	}
	go func() {
		<-done
		s.leased.Delete(done)
		s.cfg.Ports.Release(ports)
	}()
}

// portsOf returns the ports a running shell holds.
func (s *Set) portsOf(v *task.View, id string) []int {
	done, err := v.Done(id)
	if err != nil {
		return nil
	}
	ports, _ := s.leased.Load(done)
	p, _ := ports.([]int)
	return p
}

// foreground waits for a command, up to yieldAfter; one still running then
// is adopted into the background, not killed.
func (s *Set) foreground(ctx context.Context, v *task.View, id string, yieldAfter time.Duration) (BashOutput, error) {
	if yieldAfter <= 0 {
		yieldAfter = defaultYieldSeconds * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, yieldAfter)
	defer cancel()
	r, err := v.Wait(wctx, []string{id}, task.All)
	switch {
	case err == nil && len(r.Done) == 1:
		return s.finished(v, r.Done[0], true, ""), nil
	case err == nil && len(r.Notices) == 0:
		// It finished, and another call of the turn (a task_wait on it,
		// made at the same time) took its result first: that call's
		// result carries it. What it did is here all the same.
		info, _ := v.Info(id)
		return s.finished(v, task.Result{Info: info}, false, "Its result went to another call of this turn that waited on it too; its status and output are here as well."), nil
	case err == nil && len(r.Done) == 0:
		// A notice ended the wait: the command waits for input.
		var notes []string
		for _, n := range r.Notices {
			notes = append(notes, n.Text)
		}
		return s.adopted(v, id, strings.Join(notes, " ")+fmt.Sprintf(" It keeps running in the background as %s.", id)), nil
	case ctx.Err() != nil:
		// The turn was cancelled: a foreground command goes with it, by
		// the hand that cancelled the turn (a user, unless the session
		// closed).
		v.CancelCause(id, task.EndCause(context.Cause(ctx), task.ByUser, "the turn that ran it in the foreground was cancelled"))
		done, _ := v.Done(id)
		stopped, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		select {
		case <-done:
		case <-stopped.Done():
		}
		res, ok := consume(ctx, v, id)
		note := "The command was stopped because the turn was cancelled."
		if p, _ := processOf(v, id); p != nil {
			// It ended by itself before the cancel reached it (no signal;
			// a stop that began as it exited 0 counts too: an outsider's
			// echo > file ran to its end 39 times in 200 cancels): what
			// it did is done, whatever its status says.
			if e, done := p.Exit(); done && e.Signal == 0 && (!e.Stopped || e.Code == 0) {
				note = fmt.Sprintf("The turn was cancelled as the command ended: it exited with code %d before it could be stopped, so what it did is done.", e.Code)
			}
		}
		return s.finished(v, res, ok, note), nil
	case errors.Is(err, context.DeadlineExceeded):
		if info, err := v.Info(id); err == nil && info.State == task.Queued {
			// It never started: the running limit holds it (an
			// outsider's finding: it was said to be running).
			return s.adopted(v, id, fmt.Sprintf("It has not started after %s: it waits in the queue for running work to end (the session's limit of running tasks), and will run in the background as %s. Do not run it again; wait for it with task_wait, or cancel other work with task_cancel.", yieldAfter, id)), nil
		}
		return s.adopted(v, id, fmt.Sprintf("It is still running after %s, so it keeps running in the background as %s. Do not run it again; read its output with task_output, or wait for it with task_wait.", yieldAfter, id)), nil
	default:
		return BashOutput{}, err
	}
}

// startAndWait waits for a command just started in the background as
// task_wait with until does (the same wait, not a copy): until a line
// matches in.Until, the command ends (its result is then given here, and
// not again), a notice comes (it waits for input), or in.WaitSeconds pass
// with the command still running.
func (s *Set) startAndWait(ctx context.Context, v *task.View, id string, in bashInput) BashOutput {
	out := BashOutput{TaskID: id}
	what := "until" // what the wait was for, in the notes
	switch {
	case in.Until != "" && in.UntilPort != "":
		what = "until or until_port"
	case in.UntilPort != "":
		what = "until_port"
	}
	w, err := s.taskWait(ctx, v, waitInput{TaskIDs: []string{id}, TimeoutSeconds: in.WaitSeconds, Until: in.Until, UntilPort: in.UntilPort})
	switch {
	case err != nil:
		out.Note = fmt.Sprintf("Started in the background as %s, but could not wait for %s: %s It keeps running; wait for it with task_wait.", id, what, err)
	case len(w.Done) == 1:
		d := w.Done[0]
		out.ExitCode, out.Error = d.ExitCode, d.Error
		out.Note = "It ended before printing a line matching until."
		switch {
		case w.Matched != nil:
			out.Note = "It printed the line, then ended."
		case w.Listening != nil:
			out.Note = fmt.Sprintf("It listened on port %d, then ended.", w.Listening.Port)
		case in.Until == "":
			out.Note = "It ended before it listened on until_port."
		}
	case w.Matched != nil:
		out.Note = fmt.Sprintf("The line appeared; it keeps running in the background as %s. Keep working: its result will come back to you when it finishes.", id)
		if !s.pushes(v.Owner()) {
			out.Note = fmt.Sprintf("The line appeared; it keeps running in the background as %s. Keep working: nothing comes back by itself, so get its result with task_wait when you need it.", id)
		}
	case w.Listening != nil:
		out.Note = fmt.Sprintf("It listens on port %d; it keeps running in the background as %s. Keep working: its result will come back to you when it finishes.", w.Listening.Port, id)
		if !s.pushes(v.Owner()) {
			out.Note = fmt.Sprintf("It listens on port %d; it keeps running in the background as %s. Keep working: nothing comes back by itself, so get its result with task_wait when you need it.", w.Listening.Port, id)
		}
	case w.TimedOut && in.Until == "":
		out.Note = fmt.Sprintf("It did not listen on until_port in time; it keeps running in the background as %s. Do not start it again: wait more with task_wait (with until_port), or read it with task_output.", id)
	case w.TimedOut:
		out.Note = fmt.Sprintf("No line matched %s in time; it keeps running in the background as %s. Do not start it again: wait more with task_wait (with %s), or read it with task_output.", what, id, what)
	default: // it waits for input, or sent a notice: task_wait's note says which
		var notes []string
		for _, n := range w.Notices {
			notes = append(notes, n.Text)
		}
		out.Note = joinNotes(strings.Join(notes, " "), w.Note) + fmt.Sprintf(" It keeps running in the background as %s.", id)
	}
	if w.Matched != nil {
		out.Note += fmt.Sprintf(" Read what follows the line with task_output {\"task_id\": %q, \"since\": %d}.", id, w.Matched.Cursor)
	}
	switch floor := s.cfg.WaitFloor; {
	case in.WaitSeconds > maxWaitSeconds:
		out.Note = joinNotes(out.Note, fmt.Sprintf("wait_seconds was capped at %d.", maxWaitSeconds))
	case in.WaitSeconds > 0 && seconds2d(in.WaitSeconds) < floor && !strings.Contains(out.Note, "was raised to"):
		// As task_wait says it (whose note some answers above carry).
		out.Note = joinNotes(out.Note, fmt.Sprintf("wait_seconds was raised to %s, the shortest wait.", floor))
	}
	out.Matched, out.Listening = w.Matched, w.Listening
	out.Status = status(v, id)
	if len(w.Done) == 1 {
		out.Status = w.Done[0].Status
	}
	if p, _ := processOf(v, id); p != nil {
		out.Output, out.OutputBytes = tail(p, outputBytes)
	}
	return out
}

// adopted reports a foreground command that goes on in the background.
func (s *Set) adopted(v *task.View, id, note string) BashOutput {
	out := BashOutput{TaskID: id, Status: status(v, id), Note: note}
	if p, _ := processOf(v, id); p != nil {
		out.Output, out.OutputBytes = tail(p, outputBytes)
	}
	return out
}

// finished reports a foreground command that ended, consuming its result
// so it is not reported again later.
// r is its result, if ok (delivered here, not before).
func (s *Set) finished(v *task.View, r task.Result, ok bool, note string) BashOutput {
	id := r.ID
	out := BashOutput{TaskID: id, Status: r.State.String(), Note: note}
	if !ok {
		info, _ := v.Info(id)
		out.Status = info.State.String()
	}
	out.ExitCode = r.ExitCode
	if ok {
		out.Ending = endingOf(r.Info)
	}
	if ok && !r.Started.IsZero() {
		d := seconds(r.Finished.Sub(r.Started))
		out.DurationSeconds = &d
	}
	if r.Err != nil {
		out.Error = shorten(r.Err.Error(), fieldBytes)
	}
	if p, _ := processOf(v, id); p != nil {
		var shown int
		out.Output, out.OutputBytes, shown = tailShown(p, outputBytes)
		if out.OutputBytes > int64(shown) && out.Note == "" {
			out.Note = fmt.Sprintf("Only the end of the output is shown; read the rest with task_output {\"task_id\": %q, \"since\": 0}.", id)
			if log := p.Log(); log.Err != nil {
				out.Note = logLostNote(id, log)
			}
		}
		e, _ := p.Exit()
		out.Note = joinNotes(out.Note, bestEffortNote(p.Sandbox()))
		if e.Contained.Leftovers > 0 && !e.Stopped {
			// Only of a command that exited by itself: one stopped (its
			// turn cancelled, its session closed) left nothing; what it
			// ran was ended with it.
			out.Note = joinNotes(out.Note, leftoversNote(e.Contained.Leftovers))
		}
		if failedByItself(e) {
			out.Note = joinNotes(out.Note, inUseNote(v, id, r.Label, out.Output))
			out.Note = joinNotes(out.Note, sandboxNote(p.Sandbox(), out.Output, s.cfg.Escalate != nil, s.cfg.Advice))
		}
		if e.Contained.MemoryKills > 0 && e.Err() == nil {
			out.Note = joinNotes(out.Note, memoryNote(e))
		}
		if e.Contained.ForksRefused > 0 {
			out.Note = joinNotes(out.Note, strings.ToUpper(forksNote(e)[:1])+forksNote(e)[1:]+".")
		}
	}
	return out
}

// logLostNote tells the model that what its command printed was not all
// kept, because its output log could not be written: reading from 0
// would find the gap, not the rest.
func logLostNote(id string, log proc.LogState) string {
	why := "writing it failed (" + log.Err.Error() + ")"
	var le *proc.LogError
	if errors.As(log.Err, &le) {
		why = logStopped(le)
	}
	return fmt.Sprintf("Only the end of the output is shown, and not all of the rest was kept: the output log stopped at byte %d because %s, and memory keeps only the first 64 KiB and the last 1 MiB. task_output {\"task_id\": %q, \"since\": 0} reads what was kept and says where the gap is.", log.Held, why, id)
}

// memoryNote tells the model that a command that exited 0 lost processes
// to its memory limit (a failed one's error says so already).
func memoryNote(e proc.Exit) string {
	return fmt.Sprintf("The kernel killed %d of its processes: they reached the memory limit of %s set for each shell. The command went on and exited 0, but its work may be incomplete.",
		e.Contained.MemoryKills, resource.FormatSize(e.Contained.MemoryLimit))
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
	text, total, _ := tailShown(p, max)
	return text, total
}

// tailShown is tail, and how many of the bytes written the text stands
// for: cleaning drops escape codes and carriage returns, so a short
// coloured output that is shown whole is shorter than its bytes.
func tailShown(p *proc.Process, max int) (string, int64, int) {
	ch := p.TailLines(proc.Combined, 1<<30, max)
	return proc.Clean(ch.Data), ch.Total, len(ch.Data)
}

// StartedAs begins the note of a task just started in the background:
// "Started in the background as shell:1", or, for one that waits for a
// place because the most tasks that may run at once are running, "Queued
// in the background as shell:9: it starts when a running task ends".
func StartedAs(id string, state task.State) string {
	if state == task.Queued {
		return fmt.Sprintf("Queued in the background as %s: it starts when a running task ends (the most that run at once are running)", id)
	}
	return "Started in the background as " + id
}

func status(v *task.View, id string) string {
	info, _ := v.Info(id)
	return info.State.String()
}

// seconds2d turns a model's number of seconds into a duration, held to
// about a century: a bigger one (1e300) would overflow into a negative
// duration, a wait that ends at once, or none at all.
func seconds2d(s float64) time.Duration {
	const most = 100 * 365 * 24 * time.Hour
	if s >= most.Seconds() || s != s { // NaN too
		return most
	}
	return time.Duration(s * float64(time.Second))
}

// maxNotifyOnChars bounds a notify_on pattern.
const maxNotifyOnChars = 1000

func watchPattern(pattern string) (*regexp.Regexp, error) {
	return compilePattern("notify_on", pattern, maxNotifyOnChars)
}

// promptNotice is what the model is told when a shell seems to wait for
// input.
func promptNotice(id, prompt string, inputOpen bool) string {
	if inputOpen {
		return fmt.Sprintf("%s seems to wait for input: %q. Answer it with task_input, or cancel it with task_cancel.", id, prompt)
	}
	return fmt.Sprintf("%s seems to wait for input: %q, but its input is closed, so nothing can answer it. Cancel it with task_cancel, and run it again with interactive: true (or tty: true) to answer it, or with a flag that answers for it (such as --yes).", id, prompt)
}

// maxWithheldNames bounds the names envNote lists.
const maxWithheldNames = 40

// envNote returns, the first time it is called for v's owner, a note saying
// what the sandbox lets commands do (when there is one) and naming
// the variables the environment policy keeps from commands, so that a
// model whose gh says "not logged in" knows why and does not go looking
// for the key; "" after that, and when nothing is withheld. Names only,
// never values.
func (s *Set) envNote(v *task.View) string {
	c := callerOf(v)
	s.mu.Lock()
	told := s.told[c]
	if !told {
		if len(s.told) >= maxCursors {
			clear(s.told) // bounded: an owner may be told twice
		}
		s.told[c] = true
	}
	s.mu.Unlock()
	if told {
		return ""
	}
	return joinNotes(s.fence, s.withheldNote())
}

// withheldNote names the variables the environment policy withholds; ""
// when none is.
func (s *Set) withheldNote() string {
	names := s.cfg.Process.EnvPolicy.Withheld(s.cfg.Process.Env)
	if len(names) == 0 {
		return ""
	}
	list := strings.Join(names[:min(len(names), maxWithheldNames)], ", ")
	if len(names) > maxWithheldNames {
		list += fmt.Sprintf(" and %d more", len(names)-maxWithheldNames)
	}
	what := fmt.Sprintf("%d environment variables that look like secrets", len(names))
	if len(names) == 1 {
		what = "1 environment variable that looks like a secret"
	}
	return fmt.Sprintf("Your commands run without %s, withheld on purpose: %s. A program that needs one (gh, npm, aws) acts as if logged out; do not look for the values: ask the user, who can pass one through%s.", what, list, parens(s.cfg.Advice.KeepEnv))
}

// maxArgBytes is the kernel's bound on one argument of a program,
// MAX_ARG_STRLEN, its terminating NUL included: 32 pages. The command
// goes to the shell as one (sh -c COMMAND); a longer one failed to start
// with "argument list too long".
func maxArgBytes() int { return 32 * os.Getpagesize() }
