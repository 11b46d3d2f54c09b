package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

const tasksUsage = `Usage: offstage tasks [flags]
       offstage tasks show [flags] ID
       offstage tasks cancel [--reason TEXT] ID
       offstage tasks follow [--since BYTE | --lines N] ID

Shows what ran, from the journal: every task of every session, newest
first, or one task with its result and the end of its output log. ID is
shell:3 (the newest task of that id), SESSION/shell:3, or shell:3 with
--session. With a shared journal (--journal or $OFFSTAGE_JOURNAL_URL) it
shows the whole fleet, with each task's instance (its host name); ids are
unique within a session, so SESSION/shell:3 names a task across the
fleet. On a terminal the list has aligned columns and colour (none with
$NO_COLOR set or --no-color); piped, or with --json, it is JSON lines.
It shows the newest 50 (--limit) and says on stderr how many it left
out. Listing, show and follow only read the journal (a read-only file
system or directory is fine), and say on stderr which sessions' records
the journal lost.`

const tasksExamples = `  offstage tasks
  offstage tasks --state failed --since 24h
  OFFSTAGE_JOURNAL_URL=postgres://offstage@db/offstage offstage tasks --instance web-2
  offstage tasks --session 20261122-2217 --json | jq -r .label
  offstage tasks show shell:3
  offstage tasks cancel 20261122-2217-ab12cd/shell:4 --reason "runaway build"
  offstage tasks follow shell:4 --lines 50
`

// timeNow is the clock of relative times; tests fix it.
var timeNow = time.Now

func tasksCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tasks", flag.ContinueOnError)
	var dirFlag string
	fs.StringVar(&dirFlag, "state-dir", "", "directory of the journal (default $XDG_STATE_HOME/offstage, or ~/.local/state/offstage)")
	var jf journalFlags
	jf.registerShared(fs)
	instance := fs.String("instance", "", "only tasks of the instances on this host name (a shared journal's fleet)")
	session := fs.String("session", "", "only this session's tasks (an id, or its start)")
	state := fs.String("state", "", "only tasks in this state: "+stateList(", "))
	since := fs.String("since", "", "only tasks started since: a duration (2h, 30m) or a date (2026-11-22); with follow, the byte of the output to start from (0: its start)")
	reason := fs.String("reason", "", "with cancel: why, told to the task's session and recorded")
	lines := fs.Int("lines", 10, "with follow: start with the last this many lines of the output")
	limit := fs.Int("limit", 50, "at most this many tasks, the newest (0: all); stderr says how many more match")
	asJSON := fs.Bool("json", false, "JSON lines, one task per line (the default when not on a terminal)")
	noColor := fs.Bool("no-color", false, "no colour in the table (nor when $NO_COLOR is set)")
	rest, err := parse(fs, args, tasksUsage, tasksExamples, stdout)
	if err != nil {
		return err
	}
	verb := ""
	if len(rest) > 0 {
		verb = rest[0]
	}
	switch {
	case len(rest) > 0 && (!slices.Contains([]string{"show", "cancel", "follow"}, verb) || len(rest) > 2):
		return usagef("unexpected %q: offstage tasks takes flags, or \"show ID\", \"cancel ID\" or \"follow ID\"", strings.Join(rest, " "))
	case len(rest) == 1:
		return usagef("offstage tasks %s needs a task's id, such as shell:3 or SESSION/shell:3; offstage tasks lists them", verb)
	case *reason != "" && verb != "cancel":
		return usagef("--reason goes with offstage tasks cancel")
	case *lines < 0:
		return usagef("--lines %d: give 0 or more (the last N lines of the output to start with)", *lines)
	case *limit < 0:
		return usagef("--limit %d: give 0 (all) or more (at most that many tasks, the newest)", *limit)
	}
	followFrom := int64(-1) // the last --lines lines
	if verb == "follow" && *since != "" {
		n, err := strconv.ParseInt(*since, 10, 64)
		if err != nil || n < 0 {
			return usagef("--since %q: with follow, --since is a byte of the output (0: its start); --lines N starts with its last N lines", *since)
		}
		followFrom, *since = n, ""
	}
	var want journal.State
	if *state != "" {
		if want, err = journal.ParseState(*state); err != nil {
			if strings.ContainsRune(*state, os.PathSeparator) {
				return usagef("--state %q is not a state: in offstage tasks, --state filters by a task's state; the journal's directory is --state-dir", *state)
			}
			return usagef("--state %v", err)
		}
	}
	jf.state = dirFlag
	dir, err := jf.dir(os.Getenv)
	if err != nil {
		return err
	}
	if jf.sharedURL(os.Getenv) == "" {
		if path := filepath.Join(dir, "journal.db"); missing(path) {
			return usagef("no journal at %s yet: it is made by the first offstage run, mcp or acp (or pass --state-dir, or --journal for a shared one)", path)
		}
	}
	open := jf.openReading
	if verb == "cancel" {
		open = jf.open // a request is written
	}
	store, err := open(ctx, dir)
	if err != nil {
		return err
	}
	defer store.Close()
	fleet := store.Dialect() == "postgres"
	jsonOut := *asJSON || !isTerminal(stdout)
	if *session != "" {
		s, err := store.Session(ctx, *session)
		if err != nil {
			return usagef("%v", store.Explain(err))
		}
		*session = s.ID
	}
	switch verb {
	case "show":
		return readErr(store, showTaskLive(ctx, store, *session, rest[1], jsonOut, liveSessions(jf), stdout, stderr))
	case "cancel":
		return readErr(store, cancelTask(ctx, store, *session, rest[1], *reason, stdout))
	case "follow":
		return readErr(store, followTask(ctx, store, *session, rest[1], followFrom, *lines, stdout, stderr))
	}
	// All that match, to say how many --limit leaves out.
	f := journal.TaskFilter{Session: *session, State: want, Hostname: *instance}
	if *since != "" {
		if f.Since, err = parseSince(*since, timeNow()); err != nil {
			return err
		}
	}
	tasks, err := store.Tasks(ctx, f)
	if err != nil {
		return readErr(store, err)
	}
	if left := len(tasks) - *limit; *limit > 0 && left > 0 {
		tasks = tasks[:*limit]
		shown := fmt.Sprintf("the newest %d are shown", *limit)
		if *limit == 1 {
			shown = "the newest is shown"
		}
		defer fmt.Fprintf(stderr, "offstage: %s left out: %s; --limit 0 shows all (--since, --state or --session select fewer).\n", text.Plural(left, "older task"), shown)
	}
	defer lostNotes(ctx, store, tasks, stderr)
	markHostGone(ctx, store, tasks, stderr)
	if live, ok := askLive(jf); ok { // what offstage serve hosts now; JSON lines on stdout stay task records
		if jsonOut {
			writeLive(stderr, live, timeNow())
		} else {
			writeLive(stdout, live, timeNow())
		}
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		model, ps := sessionModels(ctx, store), userPrices()
		for _, t := range tasks {
			l := taskJSON(t)
			l.priced(model(t.Session), ps)
			enc.Encode(l)
		}
		return nil
	}
	if len(tasks) == 0 {
		fmt.Fprintln(stdout, "No tasks match.")
		return nil
	}
	writeTasks(stdout, tasks, timeNow(), !*noColor && os.Getenv("NO_COLOR") == "", fleet)
	return nil
}

// openReading opens the journal the flags choose, to read it: a SQLite
// file read-only (it works on a read-only file system, or in a
// directory this user may not write, and never changes the file).
func (f journalFlags) openReading(ctx context.Context, dir string) (*journal.DB, error) {
	if f.sharedURL(os.Getenv) != "" {
		return f.open(ctx, dir)
	}
	s, err := journal.OpenSQLiteReadOnly(filepath.Join(dir, "journal.db"))
	if err != nil {
		return nil, usagef("%v", err)
	}
	return s, nil
}

// readErr says what is wrong with the journal when reading it failed:
// damage, like permissions, is the user's to fix (exit status 2), with
// the same advice as anywhere else.
func readErr(store *journal.DB, err error) error {
	var o outcome
	if errors.As(err, &o) {
		return o.error
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return err // the user's input is at fault, not the journal
	}
	var se *journal.StoreError
	if err = store.Explain(err); errors.As(err, &se) && se.Kind != nil {
		return usagef("%v", err)
	}
	return err
}

// lostNotes says, on stderr, which of the sessions shown lost records:
// what the journal shows of them is incomplete.
func lostNotes(ctx context.Context, store *journal.DB, tasks []journal.Task, stderr io.Writer) {
	seen := map[string]bool{}
	for _, t := range tasks {
		if seen[t.Session] {
			continue
		}
		seen[t.Session] = true
		if s, err := store.Session(ctx, t.Session); err == nil && s.Lost > 0 {
			fmt.Fprintf(stderr, "offstage: the journal lost %s of session %s: what it shows of it is incomplete.\n", text.Plural(s.Lost, "record"), s.ID)
		}
	}
}

// markHostGone shows the unfinished tasks of sessions whose offstage is
// known gone (its process, on this machine; its lease, in a shared
// journal) as orphaned at once, and says so on stderr: the journal marks
// them so only when the next offstage starts. A session whose end was
// never recorded may also have lost records its host could not write (a
// full disk): that is said too.
func markHostGone(ctx context.Context, store *journal.DB, tasks []journal.Task, stderr io.Writer) {
	var hosts map[string]journal.Host
	gone := map[string]bool{} // by session
	n := 0
	for i, t := range tasks {
		if t.State.Finished() {
			continue
		}
		g, seen := gone[t.Session]
		if !seen {
			if hosts == nil {
				hosts = map[string]journal.Host{}
				hs, _ := store.Hosts(ctx, "") // display only: on error nothing is marked
				for _, h := range hs {
					hosts[h.ID] = h
				}
			}
			if s, err := store.Session(ctx, t.Session); err == nil {
				if h, ok := hosts[s.HostID]; ok {
					g = hostGone(h, timeNow())
				}
			}
			gone[t.Session] = g
		}
		if g {
			tasks[i].State = journal.Orphaned
			tasks[i].EndedBy, tasks[i].EndReason = task.ByHost, "its host died (its offstage is gone); the next offstage to start marks it orphaned"
			n++
		}
	}
	if n > 0 {
		it := "them"
		if n == 1 {
			it = "it"
		}
		fmt.Fprintf(stderr, "offstage: %s shown orphaned: the offstage that ran %s is gone, and the journal marks %s so when the next offstage starts; the end of %s session was never recorded, so its record may be incomplete.\n",
			text.Plural(n, "task"), it, it, map[bool]string{true: "its", false: "their"}[n == 1])
	}
}

// hostGone reports whether a host of the journal is known to have died:
// its lease ran out (a shared journal), or its process is gone from this
// machine. A host of another machine without a lease cannot be told.
func hostGone(h journal.Host, now time.Time) bool {
	if !h.Lease.IsZero() {
		return h.Lease.Before(now)
	}
	return !journal.Alive(h)
}

// missing says that path does not exist (not that it cannot be
// reached: OpenSQLiteReadOnly says why).
func missing(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}

// stateList names the states a task can be in, joined by sep.
func stateList(sep string) string {
	var names []string
	for _, s := range journal.States() {
		names = append(names, s.String())
	}
	return strings.Join(names, sep)
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02T15:04", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("--since %q is neither a duration (2h, 30m) nor a date (2026-11-22, 2026-11-22T15:04)", s)
}

// writeTasks prints aligned columns, with the state in colour if colour,
// and with the instance (host name) of each task's session if fleet.
func writeTasks(w io.Writer, tasks []journal.Task, now time.Time, colour, fleet bool) {
	rows := [][]string{{"TASK", "STATE", "STARTED", "TOOK", "EXIT", "TOKENS", "SESSION", "LABEL"}}
	if fleet {
		rows[0] = append([]string{"INSTANCE"}, rows[0]...)
	}
	for _, t := range tasks {
		exit := "-"
		if t.ExitCode != nil {
			exit = fmt.Sprint(*t.ExitCode)
		}
		id := t.ID
		if t.Owner != "" {
			id += " ←" + t.Owner
		}
		tokens := "-"
		if t.Kind == agent.TaskKind {
			tokens = agent.FormatTokens(t.Usage.Tokens())
		}
		row := []string{id, t.State.String(), ago(t.Created, now), took(t, now), exit, tokens, t.Session, clip(t.Label, 50)}
		if fleet {
			row = append([]string{cmp.Or(t.Hostname, "?")}, row...)
		}
		rows = append(rows, row)
	}
	state := 1 // the STATE column
	if fleet {
		state++
	}
	writeColumns(w, rows, func(row, col int, cell string) string {
		if !colour || row == 0 || col != state {
			return cell
		}
		return paint(journal.State(cell))
	})
}

// paint colours a state for a terminal.
func paint(state journal.State) string {
	code := "0"
	switch state {
	case journal.Completed:
		code = "32"
	case journal.Failed, journal.Orphaned, journal.TimedOut:
		code = "31"
	case journal.Running, journal.Queued:
		code = "33"
	}
	return "\x1b[" + code + "m" + state.String() + "\x1b[0m"
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return short(now.Sub(t)) + " ago"
}

// took is how long t ran: "?" for an orphaned task, whose host died
// while it ran at a time no record holds (its finish, if recorded, is
// when the death was found: the next offstage's start, a lease's end),
// so that its TOOK does not go on growing.
func took(t journal.Task, now time.Time) string {
	switch {
	case t.Started.IsZero():
		return "-"
	case t.State == journal.Orphaned:
		return "?"
	case t.Finished.IsZero():
		return short(now.Sub(t.Started)) + "…"
	}
	return short(t.Finished.Sub(t.Started))
}

// short writes a duration the way people say it: 850ms, 12s, 4m, 3h, 2d.
func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// taskLine is a task as JSON.
type taskLine struct {
	Session   string        `json:"session"`
	TaskID    string        `json:"task_id"`
	Kind      string        `json:"kind"`
	Label     string        `json:"label"`
	Owner     string        `json:"owner,omitempty"`
	State     journal.State `json:"state"`
	Created   time.Time     `json:"created"`
	Started   *time.Time    `json:"started,omitempty"`
	Finished  *time.Time    `json:"finished,omitempty"`
	ExitCode  *int          `json:"exit_code,omitempty"`
	Delivered bool          `json:"delivered"`
	Host      string        `json:"host,omitempty"`
	LogPath   string        `json:"log_path,omitempty"`
	Result    string        `json:"result,omitempty"`
	Error     string        `json:"error,omitempty"`
	// What a shell used, at its end, where it was measured; the peak
	// counts page cache where a cgroup measured it (see peakCounts).
	CPUSeconds      float64 `json:"cpu_seconds,omitempty"`
	MemoryPeakBytes int64   `json:"memory_peak_bytes,omitempty"`
	// Sandbox is a shell's sandbox ("" for none).
	Sandbox string `json:"sandbox,omitempty"`
	// Ports are the TCP ports leased for a shell (bash with port); the
	// first was its $PORT.
	Ports []int `json:"ports,omitempty"`
	// Who ended it and why (task.Info.EndedBy); "" while it runs and in
	// a journal older than these.
	EndedBy   string `json:"ended_by,omitempty"`
	EndReason string `json:"end_reason,omitempty"`
	// Usage is what an agent task spent calling models, with the tasks
	// it started; Cost is its price, where the config file gives the
	// model's (in the user's currency).
	Usage *task.Usage `json:"usage,omitempty"`
	Cost  *float64    `json:"cost,omitempty"`
}

// sessionModels returns the model of each session asked of it, read once.
func sessionModels(ctx context.Context, store *journal.DB) func(session string) string {
	models := make(map[string]string)
	return func(session string) string {
		m, ok := models[session]
		if !ok {
			if s, err := store.Session(ctx, session); err == nil {
				m = s.Model
			}
			models[session] = m
		}
		return m
	}
}

// priced adds an agent task's cost to l, where ps has its model's price.
func (l *taskLine) priced(model string, ps prices) {
	if l.Usage == nil {
		return
	}
	if c, ok := ps.cost(model, *l.Usage); ok {
		l.Cost = &c
	}
}

func taskJSON(t journal.Task) taskLine {
	l := taskLine{Session: t.Session, TaskID: t.ID, Kind: t.Kind, Label: t.Label, Owner: t.Owner, State: t.State,
		Created: t.Created.UTC(), ExitCode: t.ExitCode, Delivered: t.Delivered, Host: t.Hostname, LogPath: t.LogPath,
		CPUSeconds: t.CPU.Seconds(), MemoryPeakBytes: t.MemoryPeak, Sandbox: t.Sandbox, Ports: t.Ports, EndedBy: t.EndedBy, EndReason: t.EndReason}
	if t.Kind == agent.TaskKind {
		u := t.Usage
		l.Usage = &u
	}
	if !t.Started.IsZero() {
		s := t.Started.UTC()
		l.Started = &s
	}
	if !t.Finished.IsZero() {
		f := t.Finished.UTC()
		l.Finished = &f
	}
	return l
}

// usedLine says what a shell used, at its end: "CPU 1m23.4s, peak
// memory 1.4 GiB (…)"; "" where nothing was measured. The peak says what
// it counts (issue 37 item 15): a cgroup's memory.peak charges the page
// cache of the files the task read or wrote, so a sleep after a build
// showed 42 MiB, and a reader took it for what its processes held.
func usedLine(t journal.Task) string {
	var parts []string
	if t.CPU > 0 {
		parts = append(parts, "CPU "+t.CPU.Round(100*time.Millisecond).String())
	}
	if t.MemoryPeak > 0 {
		parts = append(parts, "peak memory "+text.Bytes(t.MemoryPeak)+" ("+peakCounts+")")
	}
	return strings.Join(parts, ", ")
}

// peakCounts is what a peak memory figure counts, said beside it.
const peakCounts = "page cache included where a cgroup measured it"

// portsLine says which ports a shell leased: "20417 ($PORT), 20418,
// leased while it runs".
func portsLine(t journal.Task) string {
	list := make([]string, len(t.Ports))
	for i, p := range t.Ports {
		list[i] = strconv.Itoa(p)
	}
	list[0] += " ($PORT)"
	held := "leased while it runs"
	if !t.Finished.IsZero() || t.State == journal.Orphaned {
		held = "leased while it ran, released at its end"
	}
	return strings.Join(list, ", ") + ", " + held
}

// showTask prints one task with its result and the end of its log; an
// unfinished task whose offstage is gone shows orphaned, as in the list
// (markHostGone, which says so on stderr).
// undeliveredAdvice says how a finished result that no turn heard reaches
// the conversation of a session of surface: run's and acp's conversations
// resume; an MCP client's are its own, which offstage cannot resume.
func undeliveredAdvice(surface, session string) string {
	switch surface {
	case "run":
		return " (offstage run --resume=" + session + " delivers it)"
	case "acp":
		return " (loading the session in the editor, ACP session/load, delivers it)"
	case "mcp":
		return " (its MCP client's session ended; read its result here, or with offstage tasks show --json)"
	}
	return ""
}

// liveSessions are the sessions offstage serve hosts now, if it runs.
func liveSessions(jf journalFlags) map[string]bool {
	live, ok := askLive(jf)
	if !ok {
		return nil
	}
	m := make(map[string]bool, len(live.Sessions))
	for _, s := range live.Sessions {
		m[s.ID] = true
	}
	return m
}

func showTask(ctx context.Context, store *journal.DB, session, id string, jsonOut bool, w, stderr io.Writer) error {
	return showTaskLive(ctx, store, session, id, jsonOut, nil, w, stderr)
}

// showTaskLive is offstage tasks show; live are the sessions offstage
// serve hosts now, whose results an attach delivers.
func showTaskLive(ctx context.Context, store *journal.DB, session, id string, jsonOut bool, live map[string]bool, w, stderr io.Writer) error {
	t, err := findTask(ctx, store, session, id, func(msg string) { fmt.Fprintf(stderr, "offstage: %s.\n", msg) })
	if err != nil {
		return err
	}
	one := []journal.Task{t}
	markHostGone(ctx, store, one, stderr)
	t = one[0]
	tail, tailErr := "", error(nil)
	if t.LogPath != "" {
		tail, tailErr = journal.LogTail(t, 20, 4<<10)
	}
	events, _ := store.TaskEvents(ctx, t.Session, t.ID)
	req, reqErr := store.CancelRequest(ctx, t.Session, t.ID)
	var cancel *cancelLine
	if reqErr == nil {
		cancel = &cancelLine{By: req.By, Reason: req.Reason, Requested: req.Requested.UTC(), Outcome: req.Outcome}
		if !req.Handled.IsZero() {
			h := req.Handled.UTC()
			cancel.Handled = &h
		}
	}
	var lost int
	var model, surface string
	if s, err := store.Session(ctx, t.Session); err == nil {
		lost, model, surface = s.Lost, s.Model, s.Surface
	}
	ps := userPrices()
	if jsonOut {
		l := taskJSON(t)
		l.priced(model, ps)
		l.Result, l.Error = t.Result, t.Error
		type event struct {
			At    time.Time `json:"at"`
			Event string    `json:"event"`
		}
		out := struct {
			taskLine
			Events      []event     `json:"events,omitempty"`
			OutputTail  string      `json:"output_tail,omitempty"`
			LogError    string      `json:"log_error,omitempty"`
			SessionLost int         `json:"session_lost,omitempty"` // records of its session the journal lost
			Cancel      *cancelLine `json:"cancel_request,omitempty"`
		}{taskLine: l, OutputTail: tail, SessionLost: lost, Cancel: cancel}
		for _, e := range events {
			out.Events = append(out.Events, event{At: e.At.UTC(), Event: e.Event})
		}
		if tailErr != nil {
			out.LogError = tailErr.Error()
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(out)
	}
	// Labels, reasons, errors and output are anyone's text: no escape
	// sequence of theirs reaches the terminal.
	w = &safeWriter{w: w}
	now := timeNow()
	fmt.Fprintf(w, "%s of session %s", t.ID, t.Session)
	if t.Hostname != "" {
		fmt.Fprintf(w, " (on %s)", t.Hostname)
	}
	fmt.Fprintf(w, "\n  %s: %s\n  state:   %s", t.Kind, t.Label, t.State)
	if t.ExitCode != nil {
		fmt.Fprintf(w, ", exit %d", *t.ExitCode)
	}
	d := took(t, now)
	if d == "?" {
		d = "unknown (its offstage died while it ran)"
	}
	fmt.Fprintf(w, "\n  started: %s, took %s\n", ago(t.Created, now), d)
	if t.EndedBy != "" {
		fmt.Fprintf(w, "  ended by: %s", t.EndedBy)
		if t.EndReason != "" {
			fmt.Fprintf(w, " (%s)", t.EndReason)
		}
		fmt.Fprintln(w)
	}
	if used := usedLine(t); used != "" {
		fmt.Fprintf(w, "  used:    %s\n", used)
	}
	if t.Kind == agent.TaskKind {
		fmt.Fprintf(w, "  tokens:  %s\n", cmp.Or(usageText(t.Usage, model, ps), "none recorded"))
	}
	if t.Sandbox != "" {
		fmt.Fprintf(w, "  sandbox: %s\n", t.Sandbox)
	}
	if len(t.Ports) > 0 {
		fmt.Fprintf(w, "  ports:   %s\n", portsLine(t))
	}
	if t.Owner != "" {
		fmt.Fprintf(w, "  started by %s\n", t.Owner)
	}
	switch {
	case t.Delivered:
		fmt.Fprintln(w, "  its result reached the conversation")
	case t.State == journal.Orphaned:
		fmt.Fprintln(w, "  orphaned: its offstage stopped while it ran")
	case t.Finished.IsZero():
	default:
		advice := undeliveredAdvice(surface, t.Session)
		if live[t.Session] && surface == "run" {
			advice = " (its session is live under offstage serve: offstage run --attach " + t.Session + " delivers it)"
		}
		fmt.Fprintln(w, "  its result has not reached the conversation"+advice)
	}
	if t.Error != "" {
		fmt.Fprintf(w, "  error:   %s\n", t.Error)
	}
	if lost > 0 {
		fmt.Fprintf(w, "  the journal lost %s of its session: what it shows may be incomplete\n", text.Plural(lost, "record"))
	}
	if len(events) > 0 {
		var steps []string
		for _, e := range events {
			steps = append(steps, fmt.Sprintf("%s %s", e.Event, e.At.Sub(t.Created).Round(time.Millisecond)))
		}
		fmt.Fprintf(w, "  history: %s (from its start)\n", strings.Join(steps, ", "))
	}
	if cancel != nil {
		fmt.Fprintf(w, "  cancel:  requested by %s %s", cancel.By, ago(cancel.Requested, now))
		if cancel.Reason != "" {
			fmt.Fprintf(w, " (%s)", cancel.Reason)
		}
		if cancel.Outcome != "" {
			fmt.Fprintf(w, "; outcome: %s", cancel.Outcome)
		} else {
			fmt.Fprint(w, "; its offstage has not acted on it yet")
		}
		fmt.Fprintln(w)
	}
	if t.Result != "" {
		fmt.Fprintf(w, "\nresult:\n%s\n", indent(t.Result))
	}
	switch {
	case tailErr != nil:
		fmt.Fprintf(w, "\noutput log %s cannot be read: %v\n", t.LogPath, tailErr)
	case tail != "":
		fmt.Fprintf(w, "\nend of its output (%s):\n%s\n", t.LogPath, indent(tail))
	}
	return nil
}

// cancelLine is an operator's cancel request of a task, as JSON.
type cancelLine struct {
	By        string     `json:"by"`
	Reason    string     `json:"reason,omitempty"`
	Requested time.Time  `json:"requested"`
	Handled   *time.Time `json:"handled,omitempty"`
	Outcome   string     `json:"outcome,omitempty"`
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// findTask finds the task id names: SESSION/shell:3, shell:3 of session,
// or the newest shell:3, saying to note when other sessions have one too;
// with note nil (a cancel, which must not stop the wrong one), a shell:3
// of several sessions is a usage error naming how to pick one.
func findTask(ctx context.Context, store *journal.DB, session, id string, note func(string)) (journal.Task, error) {
	if s, rest, ok := strings.Cut(id, "/"); ok {
		full, err := store.Session(ctx, s)
		if err != nil {
			return journal.Task{}, usagef("%v", err)
		}
		session, id = full.ID, rest
	}
	if !task.ValidID(id) {
		return journal.Task{}, usagef("%s is not a task id: an id is a kind, a colon and a number from 1, as shell:3 or agent:2, or SESSION/shell:3 for one session's; offstage tasks lists them", text.Quote(id, 40))
	}
	var t journal.Task
	var err error
	if session != "" {
		t, err = store.Task(ctx, session, id)
	} else {
		var ts []journal.Task
		if ts, err = store.Tasks(ctx, journal.TaskFilter{}); err != nil {
			return journal.Task{}, err
		}
		var sessions []string // holding a task id, newest first
		for _, x := range ts {
			if x.ID == id {
				if len(sessions) == 0 {
					t = x
				}
				sessions = append(sessions, x.Session)
			}
		}
		switch {
		case len(sessions) == 0:
			err = fmt.Errorf("%w: task %s", journal.ErrNotFound, id)
		case len(sessions) > 1 && note == nil:
			return journal.Task{}, usagef("%s is in %d sessions; name one, as %s/%s (offstage tasks lists them)", id, len(sessions), sessions[0], id)
		case len(sessions) > 1:
			note(fmt.Sprintf("%s is in %d sessions; this is the newest, %s/%s (name another as SESSION/%s)", id, len(sessions), t.Session, id, id))
		}
	}
	if errors.Is(err, journal.ErrNotFound) {
		return journal.Task{}, usagef("no task %s in the journal; offstage tasks lists them", clip(id, 80))
	}
	if err != nil {
		return journal.Task{}, err
	}
	return t, nil
}
