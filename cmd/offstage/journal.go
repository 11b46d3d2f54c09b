package main

import (
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

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

// journalFlags choose where (and whether) a command records what it runs.
type journalFlags struct {
	state     string
	noJournal bool
	url       string
	lease     time.Duration
}

// journalURLEnv names a shared journal (PostgreSQL) without a flag, so
// its credentials stay out of the process list. Children never see it.
const journalURLEnv = "OFFSTAGE_JOURNAL_URL"

func (f *journalFlags) register(fs *flag.FlagSet) {
	const help = "directory of the journal and the output logs (default $XDG_STATE_HOME/offstage, or ~/.local/state/offstage)"
	fs.StringVar(&f.state, "state", "", help)
	fs.StringVar(&f.state, "state-dir", "", "the same as --state")
	fs.BoolVar(&f.noJournal, "no-journal", false, "record nothing: no journal, no output logs (task_output then keeps only the last 1 MiB in memory)")
	f.registerShared(fs)
	fs.DurationVar(&f.lease, "lease", journal.DefaultLease, "with a shared journal: how long this instance's lease lasts (renewed every sixth of it); an instance silent for longer is taken for gone and its tasks for orphaned")
}

// registerShared declares --journal.
func (f *journalFlags) registerShared(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "journal", "", "a shared journal: postgres://USER@HOST/DB (default $"+journalURLEnv+"; prefer the variable, which keeps the password out of the process list); output logs stay in --state")
}

// sharedURL is the PostgreSQL journal to use, if any.
func (f journalFlags) sharedURL(getenv func(string) string) string {
	if f.url != "" {
		return f.url
	}
	return getenv(journalURLEnv)
}

// open opens the journal the flags choose.
func (f journalFlags) open(ctx context.Context, dir string) (*journal.DB, error) {
	if u := f.sharedURL(os.Getenv); u != "" {
		if !journal.IsPostgres(u) {
			return nil, usagef("--journal (or $%s) must be a postgres:// URL", journalURLEnv)
		}
		s, err := journal.OpenPostgres(ctx, u)
		if err != nil {
			return nil, usagef("%v", err)
		}
		return s, nil
	}
	s, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		// A diagnosed trouble (damage, a read-only disk, permissions)
		// carries its own advice; anything else gets the ways out.
		var se *journal.StoreError
		if errors.As(err, &se) && se.Kind != nil {
			return nil, usagef("cannot open the journal in %s (%s): %v", dir, f.dirSource(os.Getenv), err)
		} else if se != nil {
			err = se.Err
		}
		return nil, usagef("cannot open the journal in %s (%s): %v; pass --state-dir DIR for another directory, or --no-journal to record nothing", dir, f.dirSource(os.Getenv), err)
	}
	return s, nil
}

// dirSource says where dir's answer came from, for an error to name it.
func (f journalFlags) dirSource(getenv func(string) string) string {
	switch x := getenv("XDG_STATE_HOME"); {
	case f.state != "":
		return "set by --state-dir"
	case x != "" && filepath.IsAbs(x):
		return "from XDG_STATE_HOME=" + x
	}
	return "the default, under HOME=" + getenv("HOME")
}

// dir returns the state directory.
func (f journalFlags) dir(getenv func(string) string) (string, error) {
	if f.state != "" {
		return filepath.Abs(f.state)
	}
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "offstage"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", usagef("no state directory: set XDG_STATE_HOME or HOME, pass --state-dir DIR, or --no-journal")
	}
	return filepath.Join(home, ".local", "state", "offstage"), nil
}

// maxLogBytes caps the output logs of all sessions together; the oldest
// sessions' logs go first. A variable for tests.
var maxLogBytes int64 = 1 << 30

// recorder is a command's journal: opened at start, closed at exit.
type recorder struct {
	j         *journal.Journal
	store     *journal.DB
	host      journal.Host
	dir       string
	stderr    io.Writer
	stopLease func() // nil without a shared journal
}

// openRecorder opens the journal, or returns nil with --no-journal. Tasks
// that an offstage which died left unfinished are marked orphaned on the
// way, and their processes still running are stopped.
func openRecorder(ctx context.Context, f journalFlags, stderr io.Writer) (*recorder, error) {
	if f.noJournal {
		return nil, nil
	}
	dir, err := f.dir(os.Getenv)
	if err != nil {
		return nil, err
	}
	store, err := f.open(ctx, dir)
	if err != nil {
		return nil, err
	}
	r := &recorder{store: store, dir: dir, stderr: stderr, host: journal.ThisHost(version())}
	report := func(msg string) { fmt.Fprintf(stderr, "offstage: journal: %s\n", msg) }
	if store.Dialect() == "postgres" {
		if f.lease <= 0 {
			f.lease = journal.DefaultLease
		}
		r.host.Lease = time.Now().Add(f.lease)
	}
	// The host goes on record first, before its lease is renewed, and
	// directly: a journal found damaged (or gone) is refused now, as one
	// that cannot be opened is, rather than failing the whole session.
	if err := store.Write(ctx, []journal.Record{&r.host}); err != nil {
		if refused(err) {
			store.Close()
			return nil, usagef("%v", err)
		}
		report(fmt.Sprintf("the journal cannot write (%v); the session goes on and the journal retries", err))
		r.j = journal.New(store, journal.Options{Report: report})
		r.j.Add(&r.host)
	} else {
		r.j = journal.New(store, journal.Options{Report: report})
	}
	got, err := journal.Recover(ctx, store, r.host)
	if err = store.Explain(err); refused(err) {
		r.close()
		return nil, usagef("%v", err)
	}
	if err != nil {
		report(fmt.Sprintf("looking for tasks an earlier offstage left: %v", err))
	} else {
		r.orphaned(got)
	}
	if store.Dialect() == "postgres" {
		leaseCtx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			journal.KeepLease(leaseCtx, store, r.host, f.lease, report, r.orphaned)
		}()
		r.stopLease = func() { stop(); <-done }
	}
	return r, nil
}

// orphaned says what Recover found.
func (r *recorder) orphaned(got journal.Recovered) {
	n := len(got.Tasks)
	if n == 0 {
		return
	}
	fmt.Fprintf(r.stderr, "offstage: %s of an offstage that is gone marked orphaned", plural(n, "task"))
	if got.Killed > 0 {
		fmt.Fprintf(r.stderr, "; %s still running stopped", plural(got.Killed, "process group"))
	}
	fmt.Fprintln(r.stderr, " (offstage tasks --state orphaned).")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// refused says whether a journal's trouble refuses the session at its
// start: the file is damaged, or it vanished.
func refused(err error) bool {
	return errors.Is(err, journal.ErrDamaged) || errors.Is(err, journal.ErrGone)
}

// close writes what is queued, for a few seconds at most, and returns
// what the journal lost, if it lost anything.
func (r *recorder) close() error {
	if r == nil {
		return nil
	}
	if r.stopLease != nil {
		r.stopLease()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.j.Close(ctx)
	st := r.j.Stats()
	if st.Lost == 0 {
		return nil
	}
	return fmt.Errorf("the journal lost %s of this run (%v): what it shows of this run is incomplete", plural(int(st.Lost), "record"), st.Err)
}

// closeInto closes the journal as a command returns: a loss becomes the
// command's error (exit status 1, and the last line says so), or, if it
// failed already, is said just before its error.
func (r *recorder) closeInto(errp *error) {
	err := r.close()
	switch {
	case err == nil:
	case *errp == nil:
		*errp = err
	default:
		fmt.Fprintln(r.stderr, "offstage:", err)
	}
}

// sessionRec records one session.
type sessionRec struct {
	log    *journal.SessionLog
	logDir string
	stderr io.Writer
}

// session starts recording a session; seq is how many messages it has
// already (when resumed).
func (r *recorder) session(id, surface, cwd, model string, seq int) *sessionRec {
	if r == nil {
		return nil
	}
	log := r.j.StartSession(journal.Session{ID: id, HostID: r.host.ID, Surface: surface, Cwd: cwd, Model: model, Started: time.Now()}, seq)
	logDir := filepath.Join(r.dir, "logs", id)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		fmt.Fprintf(r.stderr, "offstage: journal: no output logs this session: %v\n", err)
		logDir = ""
	}
	r.pruneLogs(id)
	return &sessionRec{log: log, logDir: logDir, stderr: r.stderr}
}

// apply hooks a session's configuration up to the recording.
func (sr *sessionRec) apply(cfg *agent.Config) {
	if sr == nil {
		return
	}
	cfg.Tasks.Recorder = sr.log
	cfg.OnMessage = func(m provider.Message) {
		b, err := json.Marshal(m)
		if err == nil {
			sr.log.Message(b)
		}
	}
	cfg.Tools.LogDir = sr.logDir
	// A log that cannot be written (a full disk) is said once, as it
	// happens; the task's result and task_output say it too.
	cfg.Tools.Process.OnLogError = func(err error) {
		fmt.Fprintf(sr.stderr, "offstage: %v; the rest of that task's output is kept only in memory (its last 1 MiB)\n", err)
	}
	cfg.Tools.OnShell = func(id string, p *proc.Process) {
		start, _ := journal.ProcessStart(p.PID())
		sr.log.Process(id, p.PID(), start, p.LogPath())
	}
}

// end records the session's end.
func (sr *sessionRec) end() {
	if sr != nil {
		sr.log.End()
	}
}

// pruneLogs removes the oldest sessions' logs (never keep's) while all of
// them add up to more than maxLogBytes, and says what it removed.
func (r *recorder) pruneLogs(keep string) {
	root := filepath.Join(r.dir, "logs")
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type dirSize struct {
		name string
		size int64
	}
	var dirs []dirSize
	var total int64
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := dirSize{name: e.Name()}
		filepath.WalkDir(filepath.Join(root, e.Name()), func(_ string, f os.DirEntry, err error) error {
			if err == nil && !f.IsDir() {
				if info, err := f.Info(); err == nil {
					d.size += info.Size()
				}
			}
			return nil
		})
		total += d.size
		dirs = append(dirs, d)
	}
	slices.SortFunc(dirs, func(a, b dirSize) int { return strings.Compare(a.name, b.name) }) // ids sort by start time
	var removed int
	var freed int64
	for _, d := range dirs {
		if total <= maxLogBytes {
			break
		}
		if d.name == keep {
			continue
		}
		if os.RemoveAll(filepath.Join(root, d.name)) == nil {
			total -= d.size
			freed += d.size
			removed++
		}
	}
	if removed > 0 {
		what := "the oldest session"
		if removed > 1 {
			what = fmt.Sprintf("the %d oldest sessions", removed)
		}
		fmt.Fprintf(r.stderr, "offstage: removed the output logs of %s (%s) to keep all logs under %s.\n", what, size(freed), size(maxLogBytes))
	}
}

// resumeFlag is --resume: alone it means the latest session, with =ID
// (or a following argument that looks like a session id) that one.
type resumeFlag struct {
	set bool
	id  string
}

func (r *resumeFlag) String() string   { return r.id }
func (r *resumeFlag) IsBoolFlag() bool { return true }
func (r *resumeFlag) Set(v string) error {
	r.set = true
	if v != "true" {
		r.id = v
	}
	if v == "false" {
		r.set, r.id = false, ""
	}
	return nil
}

// resumed is what a resumed session brings back.
type resumed struct {
	session journal.Session
	seq     int
	firstID uint64
	resume  *agent.Resume
	told    []string // task ids whose notice or result the resume delivers
}

// loadResume reads a recorded session to continue: its conversation, the
// results that never reached it, and the tasks the restart orphaned.
func (r *recorder) loadResume(ctx context.Context, id string) (*resumed, error) {
	if r == nil {
		return nil, usagef("--resume needs the journal; drop --no-journal")
	}
	var s journal.Session
	var err error
	if id == "" {
		var all []journal.Session
		all, err = r.store.Sessions(ctx, 0)
		for _, x := range all {
			if x.Surface == "run" {
				s = x
				break
			}
		}
		if err == nil && s.ID == "" {
			return nil, usagef("there is no session to resume in %s", r.store.Path())
		}
	} else {
		s, err = r.store.Session(ctx, id)
	}
	if errors.Is(err, journal.ErrNotFound) {
		return nil, usagef("no session %q in %s; offstage tasks lists them", id, r.store.Path())
	}
	if err != nil {
		return nil, usagef("%v", r.store.Explain(err))
	}
	if s.Ended.IsZero() && s.HostID != r.host.ID {
		if hosts, _ := r.store.Hosts(ctx, r.host.ID); slices.ContainsFunc(hosts, func(h journal.Host) bool { return h.ID == s.HostID && journal.Alive(h) }) {
			return nil, usagef("session %s is still running in another offstage (pid of its host is alive); end it first", s.ID)
		}
	}
	msgs, err := r.store.History(ctx, s.ID)
	if err != nil {
		return nil, fmt.Errorf("reading session %s: %w", s.ID, r.store.Explain(err))
	}
	out := &resumed{session: s, resume: &agent.Resume{}}
	for _, m := range msgs {
		var pm provider.Message
		if err := json.Unmarshal(m.Body, &pm); err != nil {
			return nil, fmt.Errorf("session %s: message %d cannot be read: %v", s.ID, m.Seq, err)
		}
		out.resume.History = append(out.resume.History, pm)
		out.seq = max(out.seq, m.Seq)
	}
	tasks, err := r.store.Tasks(ctx, journal.TaskFilter{Session: s.ID})
	if err != nil {
		return nil, fmt.Errorf("reading session %s: %w", s.ID, r.store.Explain(err))
	}
	var orphaned []string
	slices.Reverse(tasks) // oldest first
	for _, t := range tasks {
		if _, n, ok := strings.Cut(t.ID, ":"); ok {
			if k, err := strconv.ParseUint(n, 10, 64); err == nil {
				out.firstID = max(out.firstID, k)
			}
		}
		if t.Delivered || t.Owner != "" {
			continue
		}
		switch t.State {
		case journal.Orphaned:
			orphaned = append(orphaned, describeOrphan(t))
			out.told = append(out.told, t.ID)
		case "completed", "failed", "canceled", "timed_out":
			out.resume.Results = append(out.resume.Results, resultOf(t))
			out.told = append(out.told, t.ID)
		}
	}
	if len(orphaned) > 0 {
		out.resume.Notices = append(out.resume.Notices, task.Notice{Kind: "orphaned", Time: time.Now(),
			Text: "offstage restarted, and these tasks of yours were still running when it stopped; they were stopped and their results are lost. Start again what is still needed.\n" + strings.Join(orphaned, "\n")})
	}
	return out, nil
}

// describeOrphan says what an orphaned task was, with its last output
// lines.
func describeOrphan(t journal.Task) string {
	s := fmt.Sprintf("- %s (%s) started %s ago", t.ID, t.Label, time.Since(t.Created).Round(time.Second))
	if t.LogPath == "" {
		return s
	}
	tail, err := logTail(t.LogPath, 5, 1024)
	switch {
	case err != nil:
		s += fmt.Sprintf("; its output log cannot be read (%v)", err)
	case tail != "":
		s += "; its last output:\n    " + strings.ReplaceAll(strings.TrimRight(tail, "\n"), "\n", "\n    ")
	}
	return s
}

// logTail returns the cleaned last lines of a log file, at most maxBytes.
func logTail(path string, lines, maxBytes int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	off := max(0, st.Size()-int64(maxBytes))
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	text := strings.TrimRight(proc.Clean(buf), "\n")
	all := strings.Split(text, "\n")
	if off > 0 && len(all) > 1 {
		all = all[1:] // the first line is cut
	}
	return strings.Join(all[max(0, len(all)-lines):], "\n"), nil
}

// resultOf turns a recorded task into the result a resumed session is
// told.
func resultOf(t journal.Task) task.Result {
	state, ok := t.State.Task()
	if !ok {
		state = task.Failed
	}
	r := task.Result{Info: task.Info{ID: t.ID, Kind: t.Kind, Label: t.Label, State: state,
		Created: t.Created, Started: t.Started, Finished: t.Finished}, Text: t.Result}
	r.ExitCode = t.ExitCode
	if t.Error != "" {
		r.Err = errors.New(t.Error)
	}
	return r
}

// hook records the sessions a server surface starts (nil without a
// journal).
func (r *recorder) hook(model string) agent.RecordSession {
	if r == nil {
		return nil
	}
	return func(id, surface string, cfg *agent.Config) func() {
		if id == "" {
			id = journal.NewID()
		}
		seq, _ := r.store.LastSeq(context.Background(), id) // a loaded session's messages continue its own
		sr := r.session(id, surface, cfg.Tools.Process.Dir, model, seq)
		sr.apply(cfg)
		return sr.end
	}
}

// acpSessions answers ACP's session/list and session/load from the
// journal.
type acpSessions struct{ r *recorder }

func (a acpSessions) List(ctx context.Context, cwd string) ([]acp.SessionInfo, error) {
	all, err := a.r.store.Sessions(ctx, 200)
	if err != nil {
		return nil, a.r.store.Explain(err)
	}
	var out []acp.SessionInfo
	for _, s := range all {
		if s.Surface == "mcp" || (cwd != "" && s.Cwd != cwd) {
			continue // an MCP session has no conversation to load
		}
		info := acp.SessionInfo{SessionId: acp.SessionId(s.ID), Cwd: s.Cwd}
		updated := s.Started
		if !s.Ended.IsZero() {
			updated = s.Ended
		}
		info.UpdatedAt = acp.Ptr(updated.UTC().Format(time.RFC3339))
		if first, err := a.r.store.FirstMessage(ctx, s.ID); err == nil {
			var m provider.Message
			if json.Unmarshal(first.Body, &m) == nil && m.TextOf() != "" {
				info.Title = acp.Ptr(text.OneLine(m.TextOf(), 80))
			}
		}
		out = append(out, info)
	}
	return out, nil
}

func (a acpSessions) Load(ctx context.Context, id string) (*agent.Resume, uint64, error) {
	if _, err := a.r.store.Session(ctx, id); err != nil {
		if errors.Is(err, journal.ErrNotFound) {
			return nil, 0, fmt.Errorf("%w: %s is not in the journal", acpserver.ErrUnknownSession, id)
		}
		return nil, 0, err
	}
	res, err := a.r.loadResume(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if len(res.told) > 0 {
		a.r.j.Add(journal.Delivered{Session: res.session.ID, IDs: res.told})
	}
	return res.resume, res.firstID, nil
}

// sessions returns the journal's sessions for ACP (nil without one).
func (r *recorder) sessions() acpserver.Sessions {
	if r == nil {
		return nil
	}
	return acpSessions{r}
}

// size writes a byte count for people: 812 KiB, 3.1 MiB, 1.0 GiB.
func size(n int64) string {
	switch {
	case n < 1<<20:
		return fmt.Sprintf("%d KiB", n>>10)
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
