package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

//go:embed task_wait.md
var taskWaitMD string

type waitInput struct {
	TaskIDs        []string `json:"task_ids" jsonschema:"the tasks to wait for, at most 20"`
	Mode           string   `json:"mode,omitempty" jsonschema:"any (default) or all"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"default 30, at most 300"`
	Until          string   `json:"until,omitempty" jsonschema:"a regular expression: return as soon as a new line of output of one of the shells matches it"`
	UntilPort      string   `json:"until_port,omitempty" jsonschema:"a TCP port number such as \"8080\", or \"any\": return as soon as one of the shells listens on it"`
}

// maxUntilChars bounds an until pattern.
const maxUntilChars = 1000

// Match is the line a task_wait with until found.
type Match struct {
	TaskID string `json:"task_id"`
	Line   string `json:"line"`
	Cursor int64  `json:"cursor"` // just after the line: task_output since it reads what came next
}

// Listening is the port a task_wait with until_port found a shell
// listening on.
type Listening struct {
	TaskID string `json:"task_id"`
	Port   int    `json:"port"`
}

// portPoll is how often a wait with until_port looks at the shells'
// ports: the kernel sends no notice of a listen, so it reads
// /proc/net/tcp{,6} and the processes' descriptors this often.
const portPoll = 150 * time.Millisecond

// NoticeInfo is a notice a task posted while running (a shell waiting for
// input, lines its watch looked for), delivered by task_wait.
type NoticeInfo struct {
	TaskID string `json:"task_id"`
	Kind   string `json:"kind"`
	Text   string `json:"text"`
}

// noticeBytes caps a notice's text in a tool result.
const noticeBytes = 2 << 10

// RunningTask is a task still running when a wait returned.
type RunningTask struct {
	TaskInfo
	OutputTail string `json:"output_tail,omitempty"`
}

// WaitOutput is the task_wait tool's result.
type WaitOutput struct {
	Done            []TaskResult  `json:"done"`
	Matched         *Match        `json:"matched,omitempty"`
	Listening       *Listening    `json:"listening,omitempty"`
	Notices         []NoticeInfo  `json:"notices,omitempty"`
	Running         []RunningTask `json:"running,omitempty"`
	DeliveredBefore []TaskInfo    `json:"delivered_before,omitempty"`
	TimedOut        bool          `json:"timed_out,omitempty"`
	Note            string        `json:"note,omitempty"`
}

func (s *Set) taskWait(ctx context.Context, v *task.View, in waitInput) (WaitOutput, error) {
	a, err := parseWait(v, in)
	if err != nil {
		return WaitOutput{}, err
	}
	if floor := s.cfg.WaitFloor; a.timeout < floor {
		a.note = fmt.Sprintf("timeout_seconds was raised to %s, the shortest wait: a wait ends as soon as the tasks do, so waiting longer costs nothing, while polling again costs a model call.", floor)
		a.timeout = floor
	}
	w, err := s.waitFor(ctx, v, a)
	if err != nil {
		return WaitOutput{}, err
	}
	out := s.waitOutput(v, w.r, w.stopped && len(w.waiting) == 0, waitNote(a, w, s.pushes(v.Owner())))
	out.Matched, out.Listening = w.m, w.port
	if w.m != nil {
		w.m.Line = shorten(w.m.Line, fieldBytes)
	}
	return out, nil
}

// waitArgs is a task_wait call, checked: what to wait for, how, and for
// how long.
type waitArgs struct {
	ids     []string // resolved, without repeats
	mode    task.WaitMode
	timeout time.Duration  // the default, or capped
	until   *regexp.Regexp // nil: only the tasks' condition ends the wait
	port    int            // until_port: the port, 0 for any, -1 for none
	note    string         // about the arguments: a timeout that was capped
}

// parseWait checks in and resolves its ids. Its error is a message for
// the model.
func parseWait(v *task.View, in waitInput) (waitArgs, error) {
	a := waitArgs{mode: task.Any, port: -1}
	switch in.Mode {
	case "", "any":
	case "all":
		a.mode = task.All
	default:
		return a, fail("mode must be \"any\" or \"all\", not %q.", shorten(in.Mode, 40))
	}
	switch {
	case len(in.TaskIDs) == 0:
		return a, fail("task_ids is empty; pass the ids to wait for, such as [\"shell:3\"].")
	case len(in.TaskIDs) > maxWaitIDs:
		return a, fail("Wait for at most %d tasks at a time (you passed %d).", maxWaitIDs, len(in.TaskIDs))
	case in.TimeoutSeconds < 0:
		return a, fail("timeout_seconds must not be negative (default %d, at most %d).", defaultWaitSeconds, maxWaitSeconds)
	}
	for _, raw := range in.TaskIDs {
		id, err := resolve(v, raw)
		if err != nil {
			return a, err
		}
		if !slices.Contains(a.ids, id) {
			a.ids = append(a.ids, id)
		}
	}
	a.timeout = seconds2d(in.TimeoutSeconds)
	switch {
	case a.timeout == 0:
		a.timeout = defaultWaitSeconds * time.Second
	case a.timeout > maxWaitSeconds*time.Second:
		a.timeout = maxWaitSeconds * time.Second
		a.note = fmt.Sprintf("timeout_seconds was capped at %d.", maxWaitSeconds)
	}
	if in.Until != "" {
		re, err := untilPattern(in.Until)
		if err != nil {
			return a, err
		}
		a.until = re
	}
	if in.UntilPort != "" {
		port, err := parsePort(in.UntilPort, false)
		if err != nil {
			return a, err
		}
		a.port = port
	}
	return a, nil
}

// parsePort reads until_port: a TCP port number, or "any" (0). Its error
// is a message for the model, naming every value the tool takes: bash's
// until_port takes "leased" too (isLeased, read before this).
func parsePort(s string, bash bool) (int, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "any") {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s, ":"))
	switch {
	case err == nil && n >= 1 && n <= 65535:
		return n, nil
	case bash:
		return 0, fail("until_port must be a TCP port number (1 to 65535) such as \"8080\", \"any\", or \"leased\" (the port leased with port), not %q.", shorten(s, 40))
	case isLeased(s):
		return 0, fail("until_port \"leased\" is bash's, for the command it starts; here name the port (task_inspect lists a task's leased ports), or pass \"any\".")
	}
	return 0, fail("until_port must be a TCP port number (1 to 65535) such as \"8080\", or \"any\", not %q.", shorten(s, 40))
}

// isLeased reports whether until_port is "leased": wait for the port
// bash leased for the command.
func isLeased(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "leased") }

// waitEnd is how a wait ended.
type waitEnd struct {
	r       task.WaitResult
	m       *Match     // the line until matched, if one did
	port    *Listening // the port until_port found, if it did
	waiting []string   // shells found waiting for input, which ended the wait at once
	stopped bool       // it timed out or stopped for input, not on its condition
	blind   []string   // with until: output that went by unseen, per shell
}

// waitFor waits as a says. A wait that timed out is a normal end; its
// error is a message for the model: the turn was cancelled, a task
// vanished, or until has no shell to look at.
func (s *Set) waitFor(ctx context.Context, v *task.View, a waitArgs) (waitEnd, error) {
	wctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errWaitTimedOut)
	defer cancel()
	var w waitEnd
	// A shell already waiting for input will not finish or print on its
	// own: say so now rather than at the timeout.
	for _, id := range a.ids {
		if prompt := waitingFor(v, id); prompt != "" {
			w.waiting = append(w.waiting, fmt.Sprintf("%s waits for input (%q)", id, prompt))
		}
	}
	if len(w.waiting) > 0 {
		wctx = ended(wctx, errWaitingForInput)
	}
	var err error
	if a.until != nil || a.port >= 0 {
		w.r, w.m, w.port, w.blind, err = s.waitUntil(wctx, v, a.ids, a.mode, a.until, a.port)
		if errors.Is(err, errNoShell) && a.until != nil {
			return w, fail("until waits for a line of a shell's output, and none of %s is a running shell; wait without until.", strings.Join(a.ids, ", "))
		}
		if errors.Is(err, errNoShell) {
			return w, fail("until_port waits for a shell to listen on a port, and none of %s is a running shell; wait without until_port.", strings.Join(a.ids, ", "))
		}
	} else {
		w.r, err = v.Wait(wctx, a.ids, a.mode)
	}
	switch {
	case w.m != nil, w.port != nil, err == nil:
	case ctx.Err() != nil:
		return w, fail("The wait was interrupted (the turn was cancelled); nothing was consumed.")
	case errors.Is(err, errWaitTimedOut), errors.Is(err, errWaitingForInput):
		w.stopped = true
		// Tasks that finished without meeting the condition are reported
		// now rather than later: take their results.
		for _, i := range w.r.Unconsumed {
			if res, ok := consume(ctx, v, i.ID); ok {
				w.r.Done = append(w.r.Done, res)
			}
		}
	default: // a task vanished between resolving and waiting
		return w, fail("%s; task_list shows your tasks.", err)
	}
	return w, nil
}

// ended returns a context that has already ended with cause: waiting on
// it only polls, taking what is ready without blocking.
func ended(parent context.Context, cause error) context.Context {
	ctx, stop := context.WithCancelCause(parent)
	stop(cause)
	return ctx
}

// waitNote says to the model why the wait ended as it did, led by that
// and followed by what it should know of its arguments and of output
// until could not see.
func waitNote(a waitArgs, w waitEnd, push bool) string {
	note := a.note
	if len(w.blind) > 0 {
		note = joinNotes(note, fmt.Sprintf("until could not look at part of the output (%s): it came faster than the wait reads and was no longer kept, so a line there may have matched unseen; read the output with task_output to be sure.", strings.Join(w.blind, "; ")))
	}
	still := "its result still comes to you when it finishes"
	if !push {
		still = "a later task_wait still returns its result when it finishes"
	}
	if w.port != nil && w.m == nil {
		return joinNotes(fmt.Sprintf("%s listens on port %d. Nothing was consumed: %s.", w.port.TaskID, w.port.Port, still), note)
	}
	switch {
	case w.m != nil:
		return joinNotes(fmt.Sprintf("%s printed a line matching until. Nothing was consumed by the match: %s. Read what follows with task_output {\"task_id\": %q, \"since\": %d}; a next wait with until starts after this line.", w.m.TaskID, still, w.m.TaskID, w.m.Cursor), note)
	case len(w.waiting) > 0:
		return joinNotes(strings.Join(w.waiting, "; ")+". It cannot go on by itself, so the wait ended at once: answer with task_input, or cancel it with task_cancel.", note)
	case w.stopped:
		return joinNotes(fmt.Sprintf("Still running after %s; this is not an error. Keep working, or wait again.", a.timeout), note)
	case len(w.r.Notices) > 0 && len(w.r.Running) > 0:
		return joinNotes("A notice from a task ended the wait early (see notices); the tasks under running have not finished.", note)
	}
	return note
}

// Why a wait ended without its condition.
var (
	errWaitTimedOut    = errors.New("the wait timed out")
	errWaitingForInput = errors.New("a task waits for input")
	errMatched         = errors.New("a line matched")
	errListening       = errors.New("a shell listens on the port")
	errNoShell         = errors.New("no shell to wait for a line of")
)

func (s *Set) waitOutput(v *task.View, r task.WaitResult, timedOut bool, note string) WaitOutput {
	now := time.Now()
	n := len(r.Done) + len(r.Running) + len(r.Earlier) + len(r.Notices)
	perText := min(resultBytes, s.cfg.ResultBudget/(n+1))
	perTail := min(tailBytes, s.cfg.ResultBudget/(2*n+2))
	out := WaitOutput{Done: []TaskResult{}, TimedOut: timedOut}
	for _, d := range r.Done {
		out.Done = append(out.Done, resultOf(d, now, perText))
	}
	for _, i := range r.Running {
		rt := RunningTask{TaskInfo: liveInfo(v, i, now)}
		if p, _ := processOf(v, i.ID); p != nil {
			rt.OutputTail, _ = tail(p, perTail)
		}
		out.Running = append(out.Running, rt)
	}
	for _, i := range r.Earlier {
		out.DeliveredBefore = append(out.DeliveredBefore, infoOf(i, now))
	}
	for _, n := range r.Notices {
		out.Notices = append(out.Notices, NoticeInfo{TaskID: n.TaskID, Kind: n.Kind, Text: shortenTail(n.Text, min(noticeBytes, perText))})
	}
	if len(out.DeliveredBefore) > 0 {
		note = joinNotes(note, "Tasks under delivered_before finished earlier and their results were already given to you.")
	}
	out.Note = note
	return out
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + " " + b
}

func untilPattern(pattern string) (*regexp.Regexp, error) {
	return compilePattern("until", pattern, maxUntilChars)
}

// compilePattern compiles the regular expression a model gave in field,
// or says what is wrong with it.
func compilePattern(field, pattern string, maxChars int) (*regexp.Regexp, error) {
	if len(pattern) > maxChars {
		return nil, fail("%s is longer than %d characters; use a shorter regular expression.", field, maxChars)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fail("%s is not a valid regular expression (Go syntax): %s.", field, shorten(err.Error(), 200))
	}
	return re, nil
}

// queuedShell reports whether id is a shell waiting in the run queue.
func queuedShell(v *task.View, id string) bool {
	info, err := v.Info(id)
	return err == nil && info.Kind == "shell" && info.State == task.Queued
}

// waitStarted waits until the queued shell id has a process, and returns
// it; nil if ctx ends or the task ends without one. The queue gives no
// signal of its own for a start, so it looks every 50ms: a wait for a
// line is seconds long, and the look is a map lookup.
func waitStarted(ctx context.Context, v *task.View, id string) *proc.Process {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if p, ok := Shell(v, id); ok {
			return p
		}
		if info, err := v.Info(id); err != nil || info.State.Finished() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// waitUntil waits for a new line matching re in the output of the shells
// among ids, as v.Wait waits for the tasks, and ends with whichever comes
// first: a line, the mode's condition, a notice, or ctx. Lines count from
// where the caller last read or matched each shell. A match consumes no
// result; the tasks' condition or a notice consume as v.Wait does, and a
// line printed before that still counts. blind says, per shell, how many
// bytes of its output went by unseen ("shell:3: 1234 bytes").
//
// With port (-1 for none) it also ends as soon as one of the shells
// listens on that TCP port (0: on any), looked for every portPoll; re may
// then be nil.
func (s *Set) waitUntil(ctx context.Context, v *task.View, ids []string, mode task.WaitMode, re *regexp.Regexp, port int) (_ task.WaitResult, _ *Match, _ *Listening, blind []string, _ error) {
	lines, stopLines := context.WithCancel(ctx)
	wctx, stopWait := context.WithCancelCause(ctx)
	defer stopWait(nil)
	var wg sync.WaitGroup
	matches := make(chan Match, len(ids))
	ports := make(chan Listening, len(ids))
	var blindMu sync.Mutex
	shells := 0
	for _, id := range ids {
		p, err := processOf(v, id)
		if err != nil {
			continue // not a shell: only its end counts
		}
		if p == nil && !queuedShell(v, id) {
			continue
		}
		shells++
		wg.Go(func() {
			if p == nil { // queued: its lines are looked at once it starts
				if p = waitStarted(lines, v, id); p == nil {
					return
				}
			}
			var listen sync.WaitGroup
			defer listen.Wait()
			if port >= 0 {
				listen.Go(func() {
					if n, ok := waitPort(lines, p, port); ok {
						ports <- Listening{TaskID: id, Port: n}
						stopWait(errListening)
					}
				})
			}
			if re == nil {
				return
			}
			from := max(s.cursor(v, id), s.matchCursor(v, id))
			m, err := p.WaitLine(lines, from, re)
			if m.Skipped > 0 {
				blindMu.Lock()
				blind = append(blind, fmt.Sprintf("%s: %d bytes", id, m.Skipped))
				blindMu.Unlock()
			}
			if err == nil && m.Found {
				matches <- Match{TaskID: id, Line: m.Line, Cursor: m.Next}
				stopWait(errMatched)
			}
		})
	}
	if shells == 0 {
		stopLines()
		return task.WaitResult{}, nil, nil, nil, errNoShell
	}
	r, err := v.Wait(wctx, ids, mode)
	// A shell that finished has had all its output looked at by now, or
	// will without blocking; the others stop.
	stopLines()
	wg.Wait()
	slices.Sort(blind)
	var match *Match
	var listening *Listening
	select {
	case m := <-matches:
		s.setMatchCursor(v, m.TaskID, m.Cursor)
		match = &m
	default:
	}
	select {
	case l := <-ports:
		listening = &l
	default:
	}
	if match != nil || listening != nil {
		err = nil
	}
	return r, match, listening, blind, err
}

// waitPort waits until p listens on the TCP port want (0: on any), and
// returns that port; false if ctx ends or p ends first. The kernel sends
// no notice of a listen: it looks every portPoll.
func waitPort(ctx context.Context, p *proc.Process, want int) (int, bool) {
	tick := time.NewTicker(portPoll)
	defer tick.Stop()
	for {
		for _, n := range p.Ports() {
			if want == 0 || n == want {
				return n, true
			}
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-p.Done():
			return 0, false
		case <-tick.C:
		}
	}
}
