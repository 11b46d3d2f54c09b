package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/offstage/offstage/internal/text"
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
// (the CLI's /help, ACP's available commands). /help itself is understood
// but not listed: it is what lists the others.
func Commands() []CommandInfo {
	var out []CommandInfo
	for _, c := range commands() {
		if c.name != "help" {
			out = append(out, CommandInfo{Name: c.name, Description: c.desc, Arg: c.arg})
		}
	}
	return out
}

// command is one row of the table that drives Commands, /help and
// Command's dispatch.
type command struct {
	name string // without the slash
	arg  string // a hint for its argument; "" if it takes none, else it is required
	desc string
	run  func(s *Session, ctx context.Context, arg string, out func(string))
}

// commands returns the table, /help first. A function rather than a
// package variable: the rows refer to help, which reads the table.
func commands() []command {
	return []command{
		{"help", "", "list the commands", (*Session).cmdHelp},
		{"tasks", "", "list this session's background tasks, 50 at a time (/tasks unfinished, /tasks shell; /tasks ID: the page after ID)", (*Session).cmdTasks},
		{"inspect", "task id", "show a task's state, recent steps or output", (*Session).cmdInspect},
		{"output", "task id", "show the last lines of a shell's output", (*Session).cmdOutput},
		{"cancel", "task id", "cancel a task (a shell gets SIGTERM, then SIGKILL, with everything it started)", (*Session).cmdCancel},
		{"wait", "task id", "wait until a task finishes", (*Session).cmdWait},
	}
}

// lookup finds the command a typed line names ("/cancel shell:3"), and
// the line's argument.
func lookup(line string) (c command, arg string, ok bool) {
	name, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	name, slash := strings.CutPrefix(name, "/")
	if !slash {
		return command{}, "", false
	}
	for _, c := range commands() {
		if c.name == name {
			return c, strings.TrimSpace(arg), true
		}
	}
	return command{}, "", false
}

// IsCommand reports whether line is one that Session.Command runs (/help
// included), so a surface can tell commands from prompts.
func IsCommand(line string) bool {
	_, _, ok := lookup(line)
	return ok
}

// Command runs a command a person typed ("/tasks", "/cancel shell:3"),
// calling out with each line to show. Commands act on the whole table,
// every task whoever started it, as a person may; the model's tools act
// only on its own. /wait blocks until the task finishes or ctx ends. It
// returns false if line is not one of Commands or /help (a surface's own,
// such as /quit, is the caller's to handle first); out is then told so.
// Safe to call concurrently with a turn.
func (s *Session) Command(ctx context.Context, line string, out func(string)) bool {
	c, arg, ok := lookup(line)
	switch {
	case !ok:
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		var names []string
		for _, c := range commands() {
			names = append(names, c.name)
		}
		if near := text.Nearest(strings.ToLower(strings.TrimPrefix(name, "/")), names); near != "" {
			out("unknown command " + name + " (did you mean /" + near + "?); /help lists them")
		} else {
			out("unknown command " + name + "; /help lists them")
		}
		return false
	case c.arg != "" && arg == "":
		out(fmt.Sprintf("usage: /%s ID (see /tasks)", c.name))
	default:
		c.run(s, ctx, arg, out)
	}
	return true
}

func (s *Session) cmdHelp(_ context.Context, _ string, out func(string)) {
	for _, c := range Commands() {
		n := "/" + c.Name
		if c.Arg != "" {
			n += " ID"
		}
		out(fmt.Sprintf(HelpFormat, n, c.Description))
	}
}

// tasksPage is how many tasks /tasks shows at once.
const tasksPage = 50

// cmdTasks lists the table's tasks, a page at a time: arg may name a
// status (unfinished, finished, or one state), a kind, and the id after
// which the page starts.
func (s *Session) cmdTasks(_ context.Context, arg string, out func(string)) {
	q, filters, err := tasksQuery(s.table, arg)
	if err != nil {
		out(err.Error())
		return
	}
	briefs, more := s.table.AppendBriefs(nil, q)
	if len(briefs) == 0 {
		out(noTasks(s.table, q))
	}
	for _, i := range briefs {
		owner := ""
		if i.Owner != "" {
			owner = " (of " + i.Owner + ")"
		}
		out(fmt.Sprintf("%-10s %-9s %6s  %s%s", i.ID, i.State, time.Since(i.Created).Round(time.Second), i.Label, owner))
	}
	if more > 0 {
		next := strings.Join(append(filters, briefs[len(briefs)-1].ID), " ")
		out(fmt.Sprintf("… %d more: /tasks %s (narrow with unfinished, finished, a status or a kind)", more, next))
	}
}

// tasksQuery reads /tasks's words: at most one status (unfinished,
// finished or a state), one kind (any other word) and one task id, after
// which the page starts. A second of a sort is an error, not the last one
// silently kept (/tasks finished unfinished listed the unfinished), and
// so is a word with a colon that is no task id (it was taken for one and
// listed every task), and so is an id the table does not hold. It returns
// the query and the filtering words, for the next page's command.
func tasksQuery(tb *task.Table, arg string) (q task.Query, filters []string, err error) {
	q.Limit = tasksPage
	var status string
	for _, w := range strings.Fields(arg) {
		if strings.Contains(w, ":") {
			switch {
			case !task.ValidID(w):
				return q, nil, fmt.Errorf("%q is not a task id (such as shell:3); /tasks ID lists the page after that task", text.OneLine(w, 40))
			case w == q.After:
				continue // said twice
			case q.After != "":
				return q, nil, fmt.Errorf("/tasks takes one task id to page after; got %s and %s", q.After, w)
			}
			if _, err := tb.Info(w); err != nil {
				return q, nil, fmt.Errorf("no task %s here to page after; /tasks alone lists from the first", w)
			}
			q.After = w
			continue
		}
		var states []task.State
		switch {
		case w == "unfinished":
			states = []task.State{task.Queued, task.Running}
		case w == "finished":
			states = []task.State{task.Completed, task.Failed, task.Canceled, task.TimedOut}
		default:
			for _, st := range []task.State{task.Queued, task.Running, task.Completed, task.Failed, task.Canceled, task.TimedOut} {
				if st.String() == w {
					states = []task.State{st}
				}
			}
		}
		switch {
		case w == status || w == q.Kind:
			continue // said twice: the same filter
		case states != nil && status != "":
			return q, nil, fmt.Errorf("/tasks takes one status; got %s and %s (unfinished is queued or running, finished is any end)", status, w)
		case states != nil:
			status, q.States = w, states
		case q.Kind != "":
			return q, nil, fmt.Errorf("/tasks takes one kind; got %s and %s", text.OneLine(q.Kind, 40), text.OneLine(w, 40))
		default:
			q.Kind = w
		}
		filters = append(filters, w)
	}
	return q, filters, nil
}

// noTasks is what /tasks says when nothing is listed. A word it did not
// know was taken for a kind (kinds are open: an embedder adds its own);
// one that no task has is said so, with the words it takes and the one
// it was likely meant for (/tasks runing read as "no tasks" while a
// shell ran: an outsider's finding). Past a page id, it says that none
// comes after it, not "no tasks" as if the session held none.
func noTasks(tb *task.Table, q task.Query) string {
	none, kind := "no tasks", q.Kind
	if q.After != "" {
		none = "no tasks after " + q.After + "; /tasks alone lists from the first"
	}
	if kind == "" {
		return none
	}
	var kinds []string
	for _, i := range tb.List() {
		if !slices.Contains(kinds, i.Kind) {
			kinds = append(kinds, i.Kind)
		}
	}
	if slices.Contains(kinds, kind) {
		return none
	}
	slices.Sort(kinds)
	words := append([]string{"unfinished", "finished", "queued", "running", "completed", "failed", "canceled", "timed_out"}, kinds...)
	msg := fmt.Sprintf("no tasks of kind %q", text.OneLine(kind, 40))
	if near := text.Nearest(strings.ToLower(kind), words); near != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", near)
	}
	if len(kinds) > 0 {
		msg += "; the kinds here: " + strings.Join(kinds, ", ")
	}
	return msg + "; /tasks also takes unfinished, finished or a status (queued, running, completed, failed, canceled, timed_out)"
}

func (s *Session) cmdInspect(_ context.Context, id string, out func(string)) {
	pk, err := s.table.PeekText(id, 10, 100) // a person reads it: the text too
	if err != nil {
		out(err.Error())
		return
	}
	out(inspectLine(pk.Info))
	for _, b := range pk.Blocks {
		out(fmt.Sprintf("  %s %s %s", b.Kind, b.Tool, text.OneLine(b.Text, 100)))
	}
	if pk.Output != "" {
		out(strings.TrimRight(pk.Output, "\n"))
	}
}

func (s *Session) cmdOutput(_ context.Context, id string, out func(string)) {
	if _, err := s.table.Output(id); err != nil {
		out(err.Error())
		return
	}
	p, ok := tools.Shell(s.table, id)
	if !ok {
		out(id + " has no output (it is not a shell, or has not started)")
		return
	}
	out(strings.TrimRight(p.Tail(20), "\n"))
}

func (s *Session) cmdCancel(_ context.Context, id string, out func(string)) {
	already, err := s.table.CancelCause(id, task.Ended(task.ByUser, "/cancel"))
	switch {
	case err != nil:
		out(err.Error())
	case already:
		out(id + " had already finished")
	default:
		out("cancelling " + id)
	}
}

func (s *Session) cmdWait(ctx context.Context, id string, out func(string)) {
	done, err := s.table.Done(id)
	if err != nil {
		out(err.Error())
		return
	}
	out("waiting for " + id)
	select {
	case <-done:
		info, _ := s.table.Info(id)
		out(fmt.Sprintf("%s %s", id, info.State))
	case <-ctx.Done():
		out("(stopped waiting)")
	}
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
	if i.ExitCode != nil {
		about = append(about, fmt.Sprintf("exit code %d", *i.ExitCode))
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
