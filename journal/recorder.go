package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

// RecorderOptions configure a Recorder.
type RecorderOptions struct {
	// LogDir holds the shells' output logs, a directory per session
	// (created 0700). Empty: no output logs (task_output then keeps only
	// what memory holds). The CLI uses logs/ beside journal.db.
	LogDir string
	// MaxLogBytes caps the output logs of all sessions together: the
	// oldest sessions' logs are removed first, never the one starting.
	// Default 1 GiB.
	MaxLogBytes int64
	// Version is recorded with this process (the host).
	Version string
	// Lease is how long this host's lease lasts in a shared journal
	// (PostgreSQL), renewed every sixth of it; default DefaultLease. A
	// SQLite journal has no leases: its hosts are checked by pid.
	Lease time.Duration
	// Report hears, in one sentence each, what a person running the
	// process should know: the journal's trouble (prefixed "journal: "),
	// a log that could not be written, logs pruned, tasks orphaned.
	// Default: dropped.
	Report func(msg string)
	// Orphaned, if set, hears of tasks of dead hosts marked orphaned (at
	// start-up, and while the lease is kept), instead of Report.
	Orphaned func(Recovered)
	// BellDir, in a SQLite journal, holds this process's doorbell: a Unix
	// socket (0600, in a 0700 directory) that offstage tasks cancel
	// connects to so that a cancel request is acted on at once rather
	// than at the next catch-up (every 5 s). Empty: no doorbell. The CLI
	// uses run/ beside journal.db. A PostgreSQL journal needs none: the
	// owner LISTENs.
	BellDir string
}

// Recorder is the journal as an agent runtime uses it
// (agent.Surface.Journal): it records this process as a host, marks what
// dead hosts left unfinished orphaned, records each session opened with
// agent.Open, keeps and prunes the shells' output logs, and gives a
// session back to resume or list. It is safe for concurrent use.
//
//	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
//	…
//	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{LogDir: filepath.Join(dir, "logs")})
//	…
//	defer rec.Close(context.Background())
//	s, err := agent.Open(ctx, cfg, agent.Surface{Name: "mine", Journal: rec})
type Recorder struct {
	j         *Journal
	store     *DB
	host      Host
	opts      RecorderOptions
	stopLease func() // nil without leases
	// Cancel requests: the watcher (startCancels) is woken through wake
	// (one token) and stopped by stopCancels.
	wake        chan struct{}
	stopCancels func()
	secret      string // PeerSecret

	mu     sync.Mutex
	open   map[string]bool           // guarded by mu: the sessions this process has open (recorded, not yet ended)
	tables map[string]*task.Table    // guarded by mu: their task tables (BindTable), where a cancel request is carried out
	shells map[taskKey]*proc.Process // guarded by mu: the shells running, for peers following their output
	addr   string                    // guarded by mu: where peers read output (SetPeerAddr)
	bell   string                    // guarded by mu: the doorbell socket, once listening
	pruned time.Time                 // guarded by mu: when the logs were last pruned (pruneDue)
}

var _ agent.Journal = (*Recorder)(nil)

// NewRecorder records this process as a host in store, marks the tasks
// that dead hosts left unfinished orphaned (stopping their processes still
// running on this machine, checked by pid and start time), keeps a lease
// in a shared journal, and returns the Recorder, which owns store from
// then on. A damaged or vanished journal is refused (the error wraps
// ErrDamaged or ErrGone, with its advice); a journal that only cannot
// write now is reported and retried while the sessions go on.
func NewRecorder(ctx context.Context, store *DB, opts RecorderOptions) (*Recorder, error) {
	if opts.MaxLogBytes <= 0 {
		opts.MaxLogBytes = 1 << 30
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Report == nil {
		opts.Report = func(string) {}
	}
	r := &Recorder{store: store, host: ThisHost(opts.Version), opts: opts, open: make(map[string]bool),
		tables: make(map[string]*task.Table), shells: make(map[taskKey]*proc.Process), wake: make(chan struct{}, 1), secret: newSecret()}
	troubles := func(msg string) { opts.Report("journal: " + msg) }
	shared := store.Dialect() == "postgres"
	if shared {
		r.host.Lease = time.Now().Add(opts.Lease)
	}
	// The host goes on record first, before its lease is renewed, and
	// directly: a journal found damaged (or gone) is refused now, as one
	// that cannot be opened is, rather than failing the whole session.
	// Without the host on record, recovery could not tell this process's
	// tasks from a dead one's.
	if err := store.Write(ctx, []Record{&r.host}); err != nil {
		if refused(err) {
			store.Close()
			return nil, err
		}
		troubles(fmt.Sprintf("the journal cannot write (%v); the session goes on and the journal retries", err))
		r.j = New(store, Options{Report: troubles})
		r.j.Add(&r.host)
	} else {
		r.j = New(store, Options{Report: troubles})
	}
	got, err := Recover(ctx, store, r.host)
	if err = store.Explain(err); refused(err) {
		r.j.Close(ctx)
		return nil, err
	}
	if err != nil {
		troubles(fmt.Sprintf("looking for tasks an earlier process left: %v", err))
	} else {
		r.orphaned(got)
	}
	if shared {
		leaseCtx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			KeepLease(leaseCtx, store, r.host, opts.Lease, troubles, r.orphaned)
		}()
		r.stopLease = func() { stop(); <-done }
	}
	r.j.Add(r.peerRecord())
	r.stopCancels = r.startCancels()
	return r, nil
}

// refused says whether a journal's trouble refuses it at its start: the
// file is damaged, or it vanished.
func refused(err error) bool {
	return errors.Is(err, ErrDamaged) || errors.Is(err, ErrGone)
}

// orphaned says what recovery found.
func (r *Recorder) orphaned(got Recovered) {
	if len(got.Tasks) == 0 {
		return
	}
	if r.opts.Orphaned != nil {
		r.opts.Orphaned(got)
		return
	}
	msg := text.Plural(len(got.Tasks), "task") + " of a process that is gone marked orphaned"
	if got.Killed > 0 {
		msg += "; " + text.Plural(got.Killed, "process group") + " still running stopped"
	}
	r.opts.Report(msg)
}

// Store returns the journal's store, for queries.
func (r *Recorder) Store() *DB { return r.store }

// Host returns this process as recorded.
func (r *Recorder) Host() Host { return r.host }

// Flush waits until every record queued so far is written, or ctx ends.
// Records are written in batches about every 20ms: a crash loses at most
// what was not yet written.
func (r *Recorder) Flush(ctx context.Context) error { return r.j.Flush(ctx) }

// Stats returns what the journal has written and lost so far.
func (r *Recorder) Stats() Stats { return r.j.Stats() }

// Trouble returns what keeps the journal from writing now, or nil
// (Journal.Trouble).
func (r *Recorder) Trouble() error { return r.j.Trouble() }

// LostOf returns how many records of session id the journal lost so far.
func (r *Recorder) LostOf(id string) int { return r.j.LostOf(id) }

// Close stops the lease, writes what is queued (trying until ctx ends,
// and at most 5 seconds) and closes the store. It returns an error saying
// how many records were lost, if the journal lost any: what it shows of
// this run is then incomplete. Close the sessions first.
func (r *Recorder) Close(ctx context.Context) error {
	r.stopCancels()
	if r.stopLease != nil {
		r.stopLease()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r.j.Close(ctx)
	st := r.j.Stats()
	if st.Lost == 0 {
		return nil
	}
	return fmt.Errorf("the journal lost %s of this run (%v): what it shows of this run is incomplete", text.Plural(int(st.Lost), "record"), st.Err)
}

// Record implements agent.Journal: it records the session's start and
// hooks cfg up to the journal (task changes, messages, output logs, and
// each shell's process for recovery). A session that is not resumed must
// have a new id (or none: the journal names it).
//
// A resumed session is taken over first, in one statement written at
// once (not queued): only if it is still held as Load saw it
// (agent.Resume.Claim), so that of two processes resuming one session at
// once exactly one goes on, and the other is refused before anything is
// written under the session or its logs. A journal that cannot write now
// refuses the resume too: it could not tell. A resumed session numbers
// its messages on after the ones it has, and its tasks after the ones it
// had (cfg.Tasks.FirstID is raised to Resume.FirstID), so that an
// embedder's own loop, which makes its task table from cfg.Tasks, never
// overwrites the old tasks' records. The results the resume tells are
// the caller's to mark: Record.Delivered(Resume.Delivered...) once told
// (agent.Open does it).
func (r *Recorder) Record(ctx context.Context, info agent.SessionInfo, cfg *agent.Config) (agent.Record, error) {
	id := info.ID
	if id == "" {
		id = NewID()
	}
	var log *SessionLog
	if info.Resume != nil {
		if err := r.take(ctx, id, info); err != nil {
			return nil, err
		}
		log = r.j.continueSession(id, info.Resume.Seq)
		cfg.Tasks.FirstID = max(cfg.Tasks.FirstID, info.Resume.FirstID)
	} else {
		r.mu.Lock()
		r.open[id] = true
		r.mu.Unlock()
		log = r.j.StartSession(Session{ID: id, HostID: r.host.ID, Surface: info.Surface, Cwd: info.Dir, Model: info.Model, Started: time.Now()}, 0)
	}
	cfg.Tasks.Recorder = log
	onMessage := cfg.OnMessage
	cfg.OnMessage = func(m provider.Message) {
		if b, err := json.Marshal(m); err == nil {
			log.Message(b)
		}
		if onMessage != nil {
			onMessage(m)
		}
	}
	onUsage := cfg.OnUsage
	cfg.OnUsage = func(u agent.Usage) {
		log.Tokens(u.Total, u.Autonomous)
		if onUsage != nil {
			onUsage(u)
		}
	}
	if r.opts.LogDir != "" && cfg.Tools.LogDir == "" {
		dir := filepath.Join(r.opts.LogDir, id)
		err := os.MkdirAll(dir, 0o700)
		if err == nil {
			err = CheckDir(dir)
		}
		if err != nil {
			r.opts.Report(fmt.Sprintf("journal: no output logs this session: %v", err))
		} else {
			cfg.Tools.LogDir = dir
		}
		if r.pruneDue() {
			r.pruneLogs(ctx, id)
		}
	}
	// A log that cannot be written (a full disk) is said once, as it
	// happens; the task's result and task_output say it too.
	onLogError := cfg.Tools.Process.OnLogError
	cfg.Tools.Process.OnLogError = func(err error) {
		r.opts.Report(fmt.Sprintf("%v; the rest of that task's output is kept only in memory (its last 1 MiB)", err))
		if onLogError != nil {
			onLogError(err)
		}
	}
	onShell := cfg.Tools.OnShell
	cfg.Tools.OnShell = func(task string, p *proc.Process) {
		// A start time that cannot be read is 0, which no process has:
		// recovery then never kills by this pid (the safe direction).
		start, _ := ProcessStart(p.PID())
		log.Process(task, p.PID(), start, p.Log().Path)
		r.mu.Lock()
		r.shells[taskKey{id, task}] = p
		r.mu.Unlock()
		if st := p.Sandbox(); st.Mode != sandbox.Off {
			log.Sandbox(task, st.String())
		}
		if onShell != nil {
			onShell(task, p)
		}
	}
	onPorts := cfg.Tools.OnPorts
	cfg.Tools.OnPorts = func(task string, ports []int) {
		log.Ports(task, ports)
		if onPorts != nil {
			onPorts(task, ports)
		}
	}
	onExit := cfg.Tools.OnShellExit
	cfg.Tools.OnShellExit = func(task string, p *proc.Process) {
		// Before the task's end is recorded: the CPU time and peak memory
		// "offstage tasks show" gives.
		if e, ok := p.Exit(); ok && (e.CPU > 0 || e.MemoryPeak > 0) {
			log.Usage(task, e.CPU, e.MemoryPeak)
		}
		r.mu.Lock()
		delete(r.shells, taskKey{id, task})
		r.mu.Unlock()
		if onExit != nil {
			onExit(task, p)
		}
	}
	return &openSession{SessionLog: log, r: r}, nil
}

// openSession is the record of a session while this process has it
// open: its end lets the process resume it again.
type openSession struct {
	*SessionLog
	r *Recorder
}

func (o *openSession) End() {
	o.SessionLog.End()
	o.r.mu.Lock()
	delete(o.r.open, o.ID())
	delete(o.r.tables, o.ID())
	for k := range o.r.shells {
		if k.session == o.ID() {
			delete(o.r.shells, k)
		}
	}
	o.r.mu.Unlock()
}

// isOpen says whether this process has session id open.
func (r *Recorder) isOpen(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open[id]
}

// take takes session id over for this process to resume it, and marks
// it open here; a session this process has open already is refused.
func (r *Recorder) take(ctx context.Context, id string, info agent.SessionInfo) error {
	r.mu.Lock()
	if r.open[id] {
		r.mu.Unlock()
		return openHere(id)
	}
	r.open[id] = true
	r.mu.Unlock()
	err := r.claim(ctx, id, info)
	if err != nil {
		r.mu.Lock()
		delete(r.open, id)
		r.mu.Unlock()
	}
	return err
}

func openHere(id string) error {
	return fmt.Errorf("session %s is open in this offstage already; end it first", id)
}

// claim takes session id over in the journal, in one statement, from
// the holder Load saw; a Resume made by hand (no Claim) is checked here
// as Load would, and a session the journal does not hold is recorded,
// unless another process just did.
func (r *Recorder) claim(ctx context.Context, id string, info agent.SessionInfo) error {
	from, endedAt, ok := parseClaim(info.Resume.Claim)
	if !ok {
		s, err := r.lookup(ctx, id)
		switch {
		case errors.Is(err, agent.ErrUnknownSession):
			took, err := r.store.insertOnce(ctx, Session{ID: id, HostID: r.host.ID, Surface: info.Surface, Cwd: info.Dir, Model: info.Model, Started: time.Now()})
			if err != nil {
				return fmt.Errorf("cannot record session %s to resume it (%w); try again", id, err)
			}
			if !took {
				return r.taken(ctx, id, "")
			}
			return nil
		case err != nil:
			return err
		}
		from, endedAt = s.HostID, nanos(s.Ended)
	}
	took, err := r.store.take(ctx, id, r.host.ID, from, endedAt)
	if err != nil {
		return fmt.Errorf("cannot take session %s over to resume it (%w); try again", id, err)
	}
	if !took {
		return r.taken(ctx, id, from)
	}
	return nil
}

// taken says why a session could not be taken over from the host from:
// who took it, if another process did.
func (r *Recorder) taken(ctx context.Context, id, from string) error {
	s, err := r.store.sessionByID(ctx, id)
	if err == nil && s.HostID != from && s.HostID != r.host.ID {
		who := "another offstage"
		if h, err := r.store.host(ctx, s.HostID); err == nil {
			who += fmt.Sprintf(" (pid %d", h.PID)
			if name, _ := os.Hostname(); h.Hostname != name {
				who += " on " + h.Hostname
			}
			who += ")"
		}
		return fmt.Errorf("session %s was resumed by %s just now; end it first", id, who)
	}
	return fmt.Errorf("session %s changed while this offstage was resuming it (it ended, or the tasks its dead process left were just marked orphaned); resume it again", id)
}

// claimOf is agent.Resume.Claim for s as read: its host, and when it
// ended (0: it is open).
func claimOf(s Session) string {
	return s.HostID + " " + strconv.FormatInt(nanos(s.Ended), 10)
}

// parseClaim reads a claim that claimOf wrote.
func parseClaim(c string) (host string, endedAt int64, ok bool) {
	i := strings.LastIndexByte(c, ' ')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(c[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return c[:i], n, true
}

// nanos is t in Unix nanoseconds as the journal keeps it, 0 for none.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Latest returns the id of the newest session recorded by surface that
// has a conversation to continue.
func (r *Recorder) Latest(ctx context.Context, surface string) (string, error) {
	all, err := r.store.Sessions(ctx, 0)
	if err != nil {
		return "", r.store.Explain(err)
	}
	for _, s := range all {
		if s.Surface != surface {
			continue
		}
		// A conversation that never got a message (its input ended at
		// once) is nothing to continue: the one before it is.
		if _, err := r.store.FirstMessage(ctx, s.ID); errors.Is(err, ErrNotFound) {
			continue
		}
		return s.ID, nil
	}
	return "", unknownSession(fmt.Sprintf("there is no %s session to resume in %s", surface, r.store.Path()))
}

// unknownSession is an error that is agent.ErrUnknownSession, in its own
// words.
type unknownSession string

func (e unknownSession) Error() string        { return string(e) }
func (e unknownSession) Is(target error) bool { return target == agent.ErrUnknownSession }

// Resolve returns the id of the session whose id is id, or else the
// only one whose id starts with it: what a person typing an id (the CLI's
// --resume) may give. An unknown id is an error wrapping
// agent.ErrUnknownSession, as is a start that more than one id shares
// (its message says so). Load takes the whole id only.
func (r *Recorder) Resolve(ctx context.Context, id string) (string, error) {
	s, err := r.store.Session(ctx, id)
	if errors.Is(err, ErrNotFound) && r.flush(ctx) == nil {
		s, err = r.store.Session(ctx, id) // this process may have recorded it, and not written it yet
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return "", r.unknown(id)
	case errors.Is(err, errAmbiguous):
		return "", unknownSession(fmt.Sprintf("more than one session in %s has an id that starts with %s; give more of it", r.store.Path(), text.Quote(id, maxShownID)))
	case err != nil:
		return "", r.store.Explain(err)
	}
	return s.ID, nil
}

// maxShownID bounds an id a message quotes: an id offstage made is 22
// characters, one a client sent may be anything.
const maxShownID = 80

// unknown is the error for a session id the journal does not hold.
func (r *Recorder) unknown(id string) error {
	return unknownSession(fmt.Sprintf("no session %s in %s", text.Quote(id, maxShownID), r.store.Path()))
}

// Load implements agent.Journal: it reads a recorded session back, its
// conversation, the results of its own tasks that never reached it, and
// the tasks a restart orphaned (told with their last output lines). A
// session still open in a live process (this one too), or whose host
// cannot be checked, is refused. Load takes nothing over: Record does,
// from the holder Load saw (agent.Resume.Claim).
func (r *Recorder) Load(ctx context.Context, id string) (*agent.Resume, error) {
	if r.isOpen(id) { // its record may not be written yet
		return nil, openHere(id)
	}
	s, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	msgs, err := r.store.History(ctx, s.ID)
	if err != nil {
		return nil, fmt.Errorf("reading session %s: %w", s.ID, r.store.Explain(err))
	}
	out := &agent.Resume{ID: s.ID, Claim: claimOf(s), Usage: agent.Usage{Total: s.Usage, Autonomous: s.Autonomous}}
	for _, m := range msgs {
		var pm provider.Message
		if err := json.Unmarshal(m.Body, &pm); err != nil {
			return nil, fmt.Errorf("session %s: message %d cannot be read: %v", s.ID, m.Seq, err)
		}
		out.History = append(out.History, pm)
		out.Seq = max(out.Seq, m.Seq)
	}
	tasks, err := r.store.Tasks(ctx, TaskFilter{Session: s.ID})
	if err != nil {
		return nil, fmt.Errorf("reading session %s: %w", s.ID, r.store.Explain(err))
	}
	var orphaned []string
	slices.Reverse(tasks) // oldest first
	for _, t := range tasks {
		if _, n, ok := strings.Cut(t.ID, ":"); ok {
			if k, err := strconv.ParseUint(n, 10, 64); err == nil {
				out.FirstID = max(out.FirstID, k)
			}
		}
		if t.Delivered || t.Owner != "" {
			continue // a sub-agent's tasks were its own to hear of
		}
		switch {
		case t.State == Orphaned:
			orphaned = append(orphaned, describeOrphan(t))
			out.Delivered = append(out.Delivered, t.ID)
		case t.State.Finished():
			out.Results = append(out.Results, resultOf(t))
			out.Delivered = append(out.Delivered, t.ID)
		}
	}
	if len(orphaned) > 0 {
		out.Notices = append(out.Notices, task.Notice{Kind: "orphaned", Time: time.Now(),
			Text: "offstage restarted, and these tasks of yours were still running when it stopped; they were stopped and their results are lost. Start again what is still needed.\n" + strings.Join(orphaned, "\n")})
	}
	return out, nil
}

// lookup reads the session id (the whole id: see Resolve) to resume, and
// refuses it if another live process has it open.
func (r *Recorder) lookup(ctx context.Context, id string) (Session, error) {
	s, err := r.store.sessionByID(ctx, id)
	if errors.Is(err, ErrNotFound) && r.flush(ctx) == nil {
		s, err = r.store.sessionByID(ctx, id) // this process may have recorded it, and not written it yet
	}
	if errors.Is(err, ErrNotFound) {
		return Session{}, r.unknown(id)
	}
	if err != nil {
		return Session{}, r.store.Explain(err)
	}
	if s.HostID == r.host.ID {
		// This process had it open (and ended it, or Load refuses it): what
		// it queued of it (its last messages, its end) is written before it
		// is read back, and before it is taken over (an end written after
		// that would end the resumed session on record).
		if err := r.flush(ctx); err != nil {
			return Session{}, fmt.Errorf("session %s: this offstage's last records of it are not written yet (%v); try again", s.ID, err)
		}
		if s, err = r.store.sessionByID(ctx, s.ID); err != nil {
			return Session{}, r.store.Explain(err)
		}
	}
	if err := r.checkNotRunning(ctx, s); err != nil {
		return Session{}, err
	}
	return s, nil
}

// flush writes what this process queued, waiting at most 5 seconds.
func (r *Recorder) flush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return r.j.Flush(ctx)
}

// checkNotRunning refuses to resume a session that another live process
// still has open. It fails closed: when the hosts cannot be read, it
// cannot tell, and refuses.
func (r *Recorder) checkNotRunning(ctx context.Context, s Session) error {
	if !s.Ended.IsZero() || s.HostID == r.host.ID {
		return nil
	}
	hosts, err := r.store.Hosts(ctx, r.host.ID)
	if err != nil {
		return fmt.Errorf("cannot tell whether session %s is still running in another process (%w); try again", s.ID, r.store.Explain(err))
	}
	if slices.ContainsFunc(hosts, func(h Host) bool { return h.ID == s.HostID && Alive(h) }) {
		return fmt.Errorf("session %s is still running in another offstage (pid of its host is alive); end it first", s.ID)
	}
	return nil
}

// List implements agent.Journal: the sessions recorded, newest first (200
// unless limit says otherwise), of dir only unless it is empty, each
// titled with the start of its first message.
func (r *Recorder) List(ctx context.Context, dir string, limit int) ([]agent.SessionSummary, error) {
	if limit <= 0 {
		limit = 200
	}
	all, err := r.store.Sessions(ctx, limit)
	if err != nil {
		return nil, r.store.Explain(err)
	}
	var out []agent.SessionSummary
	for _, s := range all {
		if dir != "" && s.Cwd != dir {
			continue
		}
		sum := agent.SessionSummary{ID: s.ID, Surface: s.Surface, Dir: s.Cwd, Started: s.Started, Updated: s.Started, Ended: !s.Ended.IsZero()}
		if sum.Ended {
			sum.Updated = s.Ended
		}
		if first, err := r.store.FirstMessage(ctx, s.ID); err == nil {
			var m provider.Message
			if json.Unmarshal(first.Body, &m) == nil {
				sum.Title = text.OneLine(m.TextOf(), 80)
			}
		}
		out = append(out, sum)
	}
	return out, nil
}

// describeOrphan says what an orphaned task was, with its last output
// lines.
func describeOrphan(t Task) string {
	s := fmt.Sprintf("- %s (%s) started %s ago", t.ID, t.Label, time.Since(t.Created).Round(time.Second))
	if t.LogPath == "" {
		return s
	}
	tail, err := LogTail(t, 5, 1024)
	switch {
	case err != nil:
		s += fmt.Sprintf("; its output log cannot be read (%v)", err)
	case tail != "":
		s += "; its last output:\n    " + strings.ReplaceAll(strings.TrimRight(tail, "\n"), "\n", "\n    ")
	}
	return s
}

// resultOf turns a recorded task into the result a resumed session is
// told; a state this offstage does not know reads as failed.
func resultOf(t Task) task.Result {
	state, ok := t.State.Task()
	if !ok {
		state = task.Failed
	}
	r := task.Result{Info: task.Info{ID: t.ID, Kind: t.Kind, Label: t.Label, State: state,
		Created: t.Created, Started: t.Started, Finished: t.Finished, ExitCode: t.ExitCode}, Text: t.Result}
	if t.Error != "" {
		r.Err = errors.New(t.Error)
	}
	return r
}

// pruneEvery spaces the prunes of the logs: each reads every session's
// log directory and the whole session list, which took 60 ms a session
// with 4,500 sessions recorded (an outsider's finding: every session/new
// of a long-time user paid it). Logs may so pass their cap by what a
// minute's sessions write, until the next session starts.
const pruneEvery = time.Minute

// pruneDue reports whether the logs are due a prune: the first session
// this Recorder records, then at most every pruneEvery.
func (r *Recorder) pruneDue() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.pruned.IsZero() && time.Since(r.pruned) < pruneEvery {
		return false
	}
	r.pruned = time.Now()
	return true
}

// pruneLogs removes the oldest sessions' logs while all of them add up to
// more than MaxLogBytes, and says what it removed. It never removes the
// logs of keep, nor of a session the journal says is still open (another
// of this process's sessions, or another process's sharing the
// directory): their commands still write there, and read back from there.
func (r *Recorder) pruneLogs(ctx context.Context, keep string) {
	root := r.opts.LogDir
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	open := map[string]bool{keep: true}
	sessions, err := r.store.Sessions(ctx, 0)
	if err != nil {
		return // which sessions run cannot be told: remove nothing
	}
	for _, s := range sessions {
		if s.Ended.IsZero() {
			open[s.ID] = true
		}
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
		if total <= r.opts.MaxLogBytes {
			break
		}
		if open[d.name] {
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
		r.opts.Report(fmt.Sprintf("removed the output logs of %s (%s) to keep all logs under %s.", what, byteSize(freed), byteSize(r.opts.MaxLogBytes)))
	}
}

// byteSize writes a byte count for people: 812 KiB, 3.1 MiB, 1.0 GiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<20:
		return fmt.Sprintf("%d KiB", n>>10)
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
