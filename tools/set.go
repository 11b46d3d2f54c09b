package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"
	"weak"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

// Config configures a Set. The zero value gives the documented defaults.
type Config struct {
	// Process is the template for every shell the bash tool starts: shell,
	// working directory, environment and its policy, capture sizes. Its
	// Command and Stdin are set per call. The first bash result each
	// caller gets names the variables Process.EnvPolicy withholds.
	Process proc.Config
	// ResultBudget caps the JSON text of any one result. Default 16 KiB.
	ResultBudget int
	// LogDir, if set, keeps each shell's whole output in a log file there
	// (capped by Process.LogMaxBytes), from which task_output reads what
	// memory no longer holds. It is the one log setting to use: the bash
	// tool passes it to each shell as proc.ShellOptions.LogDir, which names
	// the shell's log after its task id ("shell-3.log") and wins over
	// Process.LogPath. Leave Process.LogPath empty: without LogDir, every
	// shell would truncate and write that one file.
	LogDir string
	// OnShell, if set, is told of each shell's process once it starts.
	OnShell func(id string, p *proc.Process)
	// OnShellExit, if set, is told of each shell's process once it has
	// ended (its Exit is ready), before its task finishes: a journal
	// records what it used.
	OnShellExit func(id string, p *proc.Process)
	// OnPorts, if set, is told of the TCP ports leased for a shell (bash
	// with port), once its task exists, from the goroutine of the call: a
	// journal records them for "offstage tasks show". It must not keep
	// ports.
	OnPorts func(id string, ports []int)
	// NoPush says that results and notices do not come back to the
	// top-level caller (owner "") by themselves, as over MCP, where
	// nothing reaches the model unless it calls for it. The descriptions
	// and the notes then say how to get them (task_wait) instead of
	// promising them. The descriptions are the Set's, whoever calls: give
	// callers to whom results do come back (an agent's sub-agents) a Set
	// without NoPush.
	NoPush bool
	// Escalate, if set, is asked before a command runs outside the
	// sandbox of Process.Sandbox (bash with sandbox: false): over ACP a
	// permission request to the user, in a terminal a prompt. Without it
	// such a call is refused with a tool error. The model never widens
	// the sandbox alone.
	Escalate Escalate
	// Ports leases TCP ports to shells that ask (bash with port). Nil: a
	// PortLeases of the Set's own, with the defaults; leases of different
	// PortLeases (other Sets, other offstage processes) never overlap
	// either way.
	Ports *PortLeases
	// Advice words what the model is told the user can do about a
	// refusal (the sandbox, a withheld variable), in the terms of the
	// program around the tools; empty, it is said in general.
	Advice Advice
	// WaitFloor is the shortest wait task_wait makes: a shorter
	// timeout_seconds is lengthened to it, and the result says so. A wait
	// ends as soon as its tasks do, so a longer one costs nothing, while
	// each short wait that times out costs a model call to poll again.
	// Default 5s; negative: no floor.
	WaitFloor time.Duration
}

// Defaults and caps the descriptions promise; a test checks that the
// descriptions say these numbers.
const (
	defaultBudget       = 16 << 10
	defaultYieldSeconds = 30  // bash: a foreground command is adopted after this
	defaultWaitSeconds  = 30  // task_wait
	defaultWaitFloor    = 5   // task_wait lengthens a shorter timeout to this
	maxWaitSeconds      = 300 // task_wait clamps to this
	maxWaitIDs          = 20  // task_wait
	defaultRecent       = 10  // task_inspect: blocks or lines
	maxRecent           = 50
	outputBytes         = 8 << 10 // task_output: bytes of output per call
	tailBytes           = 2 << 10 // output tails in snapshots
	resultBytes         = 4 << 10 // a finished task's result text
	fieldBytes          = 512     // labels, activities, errors
	maxListed           = 100     // task_list
	inputTimeout        = 5 * time.Second
	maxCursors          = 4096
)

// Set is the model's toolset: bash, task_list, task_inspect, task_output,
// task_wait, task_cancel, task_input. One Set serves many callers, of one
// task table or of many (several conversations, each with its own table);
// each call acts only through the caller's task.View, and what the Set
// remembers of a caller (where it last read each task's output) is kept
// per table and owner, so shell:1 of one table is never taken for shell:1
// of another. Its methods are safe for concurrent use.
type Set struct {
	cfg   Config
	tools []*Tool

	mu      sync.Mutex
	cursors map[cursorKey]int64 // guarded by mu; where each caller last stopped reading each task's output
	order   []cursorKey         // guarded by mu; insertion order, to bound cursors
	told    map[caller]bool     // guarded by mu; callers told which variables their commands lack (envNote)
	fence   string              // what the sandbox lets commands do, for the model; "" when off

	polls map[pollKey]pollState // guarded by mu; what each caller last saw of each task (poll.go)

	leased sync.Map // a shell task's done channel → the ports it holds ([]int), while it runs
}

// caller names who calls: an owner of one task table. The table is held
// weakly, so that what the Set remembers of a closed table's callers does
// not keep the table (and its tasks' output) in memory; a key of a table
// that is gone matches no live caller.
type caller struct {
	table weak.Pointer[task.Table]
	owner string
}

func callerOf(v *task.View) caller { return caller{table: weak.Make(v.Table()), owner: v.Owner()} }

// cursorKey names a caller's place in a task's output: where it last read
// (task_output), or where its last wait with until matched.
type cursorKey struct {
	caller
	id    string
	match bool
}

// New returns a Set.
func New(cfg Config) *Set {
	if cfg.ResultBudget <= 0 {
		cfg.ResultBudget = defaultBudget
	}
	if cfg.Ports == nil {
		cfg.Ports = &PortLeases{}
	}
	if cfg.WaitFloor == 0 {
		cfg.WaitFloor = defaultWaitFloor * time.Second
	}
	s := &Set{cfg: cfg, cursors: make(map[cursorKey]int64), told: make(map[caller]bool), polls: make(map[pollKey]pollState)}
	if sb := &cfg.Process.Sandbox; sb.On() && sb.Workspace == "" {
		// The session's directory, fixed here: a call's cwd must not move
		// the fence.
		sb.Workspace = cfg.Process.Dir
		if sb.Workspace == "" {
			sb.Workspace, _ = os.Getwd()
		}
	}
	b, push := cfg.ResultBudget, !cfg.NoPush
	s.cfg = cfg
	s.fence = s.fenceNow()
	bashText := Describe(bashMD, push)
	if s.fence != "" {
		bashText += "\n\n" + s.fence + " A write refused outside those places, or a network call that fails, comes back saying the sandbox refused it. " + escalationText(cfg.Escalate != nil)
	}
	bash := classify(newTool("bash", bashText, b, s.bash), "Run a shell command", Execute, false, true)
	bash.StartsTasks = true
	s.tools = []*Tool{
		bash,
		classify(newTool("task_list", Describe(taskListMD, push), b, s.taskList), "List background tasks", ReadOnly, true, false).Enum("status", listStatuses...),
		classify(newTool("task_inspect", Describe(taskInspectMD, push), b, s.taskInspect), "Inspect a task", ReadOnly, false, false),
		classify(newTool("task_output", Describe(taskOutputMD, push), b, s.taskOutput), "Read a shell's output", ReadOnly, false, false),
		classify(newTool("task_wait", Describe(taskWaitMD, push), b, s.taskWait), "Wait for tasks", ReadOnly, false, false).Enum("mode", "any", "all"),
		classify(newTool("task_cancel", Describe(taskCancelMD, push), b, s.taskCancel), "Cancel a task", Destructive, true, false),
		classify(newTool("task_input", Describe(taskInputMD, push), b, s.taskInput), "Send input to a shell", Execute, false, true).Enum("keys", keyEnum...),
	}
	return s
}

// Describe renders a tool description written for both faces: md is a
// text/template whose {{if .Push}}…{{else}}…{{end}} sections say what is
// true where results come back to the model by themselves (push) and
// where they do not (over MCP: the model must ask, with task_wait). It
// panics on a template that does not parse or run, which is a
// programming error (the descriptions are embedded).
func Describe(md string, push bool) string {
	key := describeKey{md, push}
	described.mu.Lock()
	text, ok := described.m[key]
	described.mu.Unlock()
	if ok {
		return text
	}
	text = describe(md, push)
	described.mu.Lock()
	defer described.mu.Unlock()
	if described.m == nil {
		described.m = make(map[describeKey]string)
	}
	if len(described.m) < maxDescribed {
		described.m[key] = text
	}
	return text
}

// described keeps what Describe rendered, for the life of the process:
// the descriptions are embedded, a fixed few, and every Set (one or two
// per session) renders the same ones. Beyond maxDescribed (a caller
// rendering texts of its own) it renders without keeping.
var described struct {
	mu sync.Mutex
	m  map[describeKey]string // guarded by mu
}

type describeKey struct {
	md   string
	push bool
}

const maxDescribed = 64

func describe(md string, push bool) string {
	t := template.Must(template.New("").Option("missingkey=error").Parse(md))
	var b strings.Builder
	if err := t.Execute(&b, struct{ Push bool }{push}); err != nil {
		panic(fmt.Sprintf("tools: description template: %v", err))
	}
	return b.String()
}

// pushes reports whether results come back to owner by themselves.
func (s *Set) pushes(owner string) bool { return owner != "" || !s.cfg.NoPush }

// classify sets what a tool's callers are told about it. task_inspect,
// task_output and task_wait are not idempotent: a result or output they
// return is not returned again.
func classify(t *Tool, title string, safety Safety, idempotent, openWorld bool) *Tool {
	t.Title, t.Safety, t.Idempotent, t.OpenWorld = title, safety, idempotent, openWorld
	t.needsView = true // every one of a Set's acts for its caller
	return t
}

// Tools returns the tools, in a stable order. Their schemas are built
// once per process and shared by every Set: read them, do not change them
// (Define makes a tool whose schemas are its own).
func (s *Set) Tools() []*Tool { return s.tools }

// Tool returns the tool called name, or nil if the set has none. A name a
// model sent may be none of them: check, and answer the model with an
// error result that lists Tools. A nil *Tool does not panic: its Call
// returns ErrNoTool and its Check refuses every call.
func (s *Set) Tool(name string) *Tool {
	for _, t := range s.tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// cursor returns where v's owner last stopped reading id's output.
func (s *Set) cursor(v *task.View, id string) int64 {
	return s.cursorOf(cursorKey{callerOf(v), id, false})
}

// matchCursor returns where v's owner's last task_wait with until stopped
// looking at id's output (just after the line it matched).
func (s *Set) matchCursor(v *task.View, id string) int64 {
	return s.cursorOf(cursorKey{callerOf(v), id, true})
}

func (s *Set) setCursor(v *task.View, id string, c int64) {
	s.set(cursorKey{callerOf(v), id, false}, c)
}
func (s *Set) setMatchCursor(v *task.View, id string, c int64) {
	s.set(cursorKey{callerOf(v), id, true}, c)
}

func (s *Set) cursorOf(k cursorKey) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursors[k]
}

// set records a cursor. The oldest cursors are forgotten beyond
// maxCursors (their next read starts over).
func (s *Set) set(k cursorKey, c int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cursors[k]; !ok {
		s.order = append(s.order, k)
		if len(s.order) > maxCursors {
			delete(s.cursors, s.order[0])
			s.order = s.order[1:]
		}
	}
	s.cursors[k] = c
}

// resolve turns what the model sent into one of the caller's task ids. It
// accepts surrounding white space and a bare number N for the caller's
// task KIND:N (numbers are unique in a table, so this is unambiguous).
func resolve(v *task.View, raw string) (string, error) {
	id := strings.TrimSpace(raw)
	if id == "" {
		return "", fail("task_id is empty; pass an id such as shell:3 from task_list.")
	}
	if n, err := strconv.ParseUint(id, 10, 64); err == nil {
		suffix := ":" + strconv.FormatUint(n, 10)
		if n > 0 { // the caller's first task numbered n or more, without copying the list
			page, _ := v.AppendBriefs(make([]task.Brief, 0, 1), task.Query{After: "task:" + strconv.FormatUint(n-1, 10), Limit: 1})
			if len(page) == 1 && strings.HasSuffix(page[0].ID, suffix) {
				return page[0].ID, nil
			}
		}
		for _, kind := range []string{"shell", "agent"} {
			if _, err := v.Info(kind + suffix); errors.Is(err, task.ErrNotOwner) {
				return "", idFail(kind+suffix, err)
			}
		}
		return "", fail("You have no task numbered %s; task_list shows your tasks.", id)
	}
	if !task.ValidID(id) {
		return "", fail("%q is not a task id: an id is a kind, a colon and a number from 1, as shell:3 or agent:2 (or the number alone, 3); task_list shows yours.", shorten(id, 40))
	}
	if _, err := v.Info(id); err != nil {
		return "", idFail(id, err)
	}
	return id, nil
}

// idFail turns a table error about id into a sentence for the model.
func idFail(id string, err error) error {
	switch {
	case errors.Is(err, task.ErrNotOwner):
		// Its owner may be a sub-agent, the top level, or the caller's
		// own parent (an agent's own id is its parent's task): "another
		// agent" was wrong for two of those (an outsider's finding).
		return fail("%s is not one of your tasks (someone else started it); you can only act on tasks you started (task_list shows them).", id)
	case errors.Is(err, task.ErrNotFound):
		return fail("There is no task %q (it never existed or was cleared after it finished); task_list shows your tasks.", shorten(id, 80))
	}
	return err
}

// TaskInfo is how the tools show a task.
type TaskInfo struct {
	ID            string   `json:"task_id"`
	Kind          string   `json:"kind"`
	Label         string   `json:"label"`
	Status        string   `json:"status"`
	AgeSeconds    float64  `json:"age_seconds"`
	Iteration     int      `json:"iteration,omitempty"`
	Activity      string   `json:"activity,omitempty"`
	SilentSeconds *float64 `json:"silent_seconds,omitempty"` // while unfinished
	ExitCode      *int     `json:"exit_code,omitempty"`
	// WaitingForInput is the prompt a running shell seems to wait on.
	WaitingForInput string `json:"waiting_for_input,omitempty"`
}

func infoOf(i task.Info, now time.Time) TaskInfo {
	out := TaskInfo{
		ID: i.ID, Kind: i.Kind, Label: shorten(i.Label, fieldBytes), Status: i.State.String(),
		AgeSeconds: seconds(now.Sub(i.Created)), Iteration: i.Iteration,
		Activity: shorten(i.Activity, fieldBytes),
	}
	if !i.State.Finished() {
		since := i.LastActivity
		if since.IsZero() {
			since = i.Created // queued: silent since it was spawned
		}
		silent := seconds(now.Sub(since))
		out.SilentSeconds = &silent
	}
	out.ExitCode = i.ExitCode
	return out
}

// liveInfo is infoOf for a task that may be running: a shell that seems
// to wait for input says on what.
func liveInfo(v *task.View, i task.Info, now time.Time) TaskInfo {
	out := infoOf(i, now)
	if !i.State.Finished() {
		out.WaitingForInput = waitingFor(v, i.ID)
	}
	return out
}

// waitingFor returns the prompt a shell seems to wait on, or "".
func waitingFor(v *task.View, id string) string {
	if p, ok := Shell(v, id); ok {
		if prompt, ok := p.WaitingForInput(); ok {
			return shorten(prompt, fieldBytes)
		}
	}
	return ""
}

// seconds rounds to a tenth: enough for a model, stable to read.
func seconds(d time.Duration) float64 {
	return float64(d.Round(100*time.Millisecond)) / float64(time.Second)
}

// TaskResult is how the tools show a finished task's result.
type TaskResult struct {
	TaskInfo
	Ending
	Result string   `json:"result,omitempty"`
	Error  string   `json:"error,omitempty"`
	Trace  []string `json:"trace,omitempty"` // what a sub-agent did: its last tool calls
}

// Trace caps: the last traceLines lines, each cut to traceLineBytes.
const (
	traceLines     = 8
	traceLineBytes = 160
)

// ShortTrace returns the end of a task's trace, capped for a model: the
// last 8 lines, each at most 160 bytes, led by a note of what it left out.
func ShortTrace(trace []string) []string {
	if len(trace) == 0 {
		return nil
	}
	var out []string
	if len(trace) > traceLines {
		out = append(out, fmt.Sprintf("…(%d earlier lines)", len(trace)-traceLines))
		trace = trace[len(trace)-traceLines:]
	}
	for _, line := range trace {
		out = append(out, shorten(line, traceLineBytes))
	}
	return out
}

// Ending is how the tools say who ended a finished task (task.EndOf):
// ended_by always, end_reason unless the task ended by itself (its
// status, exit code and error say that already).
type Ending struct {
	EndedBy   string `json:"ended_by,omitempty"`
	EndReason string `json:"end_reason,omitempty"`
}

func endingOf(i task.Info) Ending {
	e := Ending{EndedBy: i.EndedBy}
	if i.EndedBy != task.BySelf {
		e.EndReason = shorten(i.EndReason, fieldBytes)
	}
	return e
}

func resultOf(r task.Result, now time.Time, textBytes int) TaskResult {
	out := TaskResult{TaskInfo: infoOf(r.Info, now), Ending: endingOf(r.Info), Result: shortenResult(r.Text, textBytes), Trace: ShortTrace(r.Trace)}
	if r.Err != nil {
		out.Error = shorten(r.Err.Error(), fieldBytes)
	}
	return out
}

// Outputs is where Shell looks a task up: a *task.View (its owner's
// tasks) or a *task.Table (every task).
type Outputs interface {
	Output(id string) (task.Output, error)
}

// Shell returns the process of shell task id: the one SpawnShell started.
// It reports false for a task that v does not show (another owner's, for
// a view), is not a shell, or has no process: still queued, or it failed
// to start. The process stays readable after the task ended, as long as
// the table keeps the task. It does not block.
func Shell(v Outputs, id string) (*proc.Process, bool) {
	out, err := v.Output(id)
	if err != nil {
		return nil, false
	}
	p, ok := out.(*proc.Process)
	return p, ok
}

// processOf returns the process behind a shell task, nil for a shell
// still queued, or a tool error. A queued shell that just started
// attaches its process a moment after it turns running: that moment is
// waited for.
func processOf(v *task.View, id string) (*proc.Process, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		if p, ok := Shell(v, id); ok {
			return p, nil
		}
		info, err := v.Info(id)
		if err != nil {
			return nil, idFail(id, err)
		}
		switch {
		case info.Kind != "shell":
			return nil, fail("%s is %s task, not a shell; use task_inspect to see its progress.", id, article(info.Kind))
		case info.State != task.Running || time.Now().After(deadline):
			return nil, nil // queued, or it failed to start: no process
		}
		time.Sleep(time.Millisecond)
	}
}

func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// consume delivers the result of a finished task now, so it is reported
// once, here, and not reflowed later. ok is false if it was delivered
// before (or is not finished). It keeps ctx's values, not its end: a
// task.Receipt the call's ctx carries holds the delivery.
func consume(ctx context.Context, v *task.View, id string) (task.Result, bool) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cancel() // never wait: only take what is there
	r, err := v.Wait(ctx, []string{id}, task.Any)
	if err != nil || len(r.Done) != 1 {
		return task.Result{}, false
	}
	return r.Done[0], true
}
