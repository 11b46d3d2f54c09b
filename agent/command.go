package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// CommandInfo describes a command a person can type (see Session.Command).
type CommandInfo struct {
	Name        string // without the slash
	Description string
	Arg         string // a hint for its argument, "" if it takes none
}

// Commands lists what Session.Command understands, for a surface to offer
// (the CLI's /help, ACP's available commands).
func Commands() []CommandInfo {
	return []CommandInfo{
		{"tasks", "list every background task of this session", ""},
		{"inspect", "show a task's state, recent steps or output", "task id"},
		{"output", "show the last lines of a shell's output", "task id"},
		{"cancel", "cancel a task (a shell gets SIGTERM, then SIGKILL, with everything it started)", "task id"},
		{"wait", "wait until a task finishes", "task id"},
	}
}

// Command runs a command a person typed ("/tasks", "/cancel shell:3"),
// calling out with each line to show. Commands act on the whole table,
// every task whoever started it, as a person may; the model's tools act
// only on its own. /wait blocks until the task finishes or ctx ends. It
// returns false if line is not one of Commands (a surface's own, such as
// /quit, is the caller's to handle first); out is then told so. Safe to
// call concurrently with a turn.
func (s *Session) Command(ctx context.Context, line string, out func(string)) bool {
	name, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	arg = strings.TrimSpace(arg)
	tb := s.table
	needID := func() bool {
		if arg == "" {
			out(fmt.Sprintf("usage: %s ID (see /tasks)", name))
		}
		return arg != ""
	}
	switch name {
	case "/help":
		for _, c := range Commands() {
			n := "/" + c.Name
			if c.Arg != "" {
				n += " ID"
			}
			out(fmt.Sprintf(HelpFormat, n, c.Description))
		}
	case "/tasks":
		infos := tb.List()
		if len(infos) == 0 {
			out("no tasks")
		}
		for _, i := range infos {
			owner := ""
			if i.Owner != "" {
				owner = " (of " + i.Owner + ")"
			}
			out(fmt.Sprintf("%-10s %-9s %6s  %s%s", i.ID, i.State, time.Since(i.Created).Round(time.Second), i.Label, owner))
		}
	case "/inspect":
		if !needID() {
			break
		}
		pk, err := tb.Peek(arg, 10)
		if err != nil {
			out(err.Error())
			break
		}
		out(inspectLine(pk.Info))
		for _, b := range pk.Blocks {
			out(fmt.Sprintf("  %s %s %s", b.Kind, b.Tool, clip(b.Text, 100)))
		}
		if pk.Output != "" {
			out(strings.TrimRight(pk.Output, "\n"))
		}
	case "/output":
		if !needID() {
			break
		}
		if _, err := tb.Output(arg); err != nil {
			out(err.Error())
			break
		}
		p, ok := tools.Shell(tb, arg)
		if !ok {
			out(arg + " has no output (it is not a shell, or has not started)")
			break
		}
		out(strings.TrimRight(p.Tail(20), "\n"))
	case "/cancel":
		if !needID() {
			break
		}
		already, err := tb.Cancel(arg)
		switch {
		case err != nil:
			out(err.Error())
		case already:
			out(arg + " had already finished")
		default:
			out("cancelling " + arg)
		}
	case "/wait":
		if !needID() {
			break
		}
		done, err := tb.Done(arg)
		if err != nil {
			out(err.Error())
			break
		}
		out("waiting for " + arg)
		select {
		case <-done:
			info, _ := tb.Info(arg)
			out(fmt.Sprintf("%s %s", arg, info.State))
		case <-ctx.Done():
			out("(stopped waiting)")
		}
	default:
		out("unknown command " + name + "; /help lists them")
		return false
	}
	return true
}

// HelpFormat lays out a line of /help: the command, then what it does. A
// surface that adds commands of its own (/quit) uses it too.
const HelpFormat = "%-12s %s"

// inspectLine is the first line of /inspect: the task, its state, and
// what it has said of its progress (an iteration only for a task that
// counts them, a sub-agent; its exit code, and when it started or how
// long it ran).
func inspectLine(i task.Info) string {
	line := fmt.Sprintf("%s %s: %s", i.ID, i.State, i.Label)
	var about []string
	if i.Iteration > 0 {
		about = append(about, fmt.Sprintf("iteration %d", i.Iteration))
	}
	if i.Activity != "" {
		about = append(about, i.Activity)
	}
	if i.HasExitCode {
		about = append(about, fmt.Sprintf("exit code %d", i.ExitCode))
	}
	switch {
	case !i.Finished.IsZero() && !i.Started.IsZero():
		about = append(about, "ran "+i.Finished.Sub(i.Started).Round(time.Millisecond).String())
	case !i.Started.IsZero():
		about = append(about, "started "+time.Since(i.Started).Round(time.Second).String()+" ago")
	}
	if len(about) > 0 {
		line += " (" + strings.Join(about, ", ") + ")"
	}
	return line
}

// clip cuts s to n runes on one line, marking a cut with "…".
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
