package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/journal"
)

// journalFlags choose where (and whether) a command records what it runs.
type journalFlags struct {
	state     string
	oldState  *oldName // --state, the old name of --state-dir: in offstage tasks it is a task's state
	noJournal bool
	required  bool // the command cannot run without the journal (serve): no --no-journal to advise
	url       string
	lease     time.Duration
}

// journalURLEnv names a shared journal (PostgreSQL) without a flag, so
// its credentials stay out of the process list. Children never see it.
const journalURLEnv = "OFFSTAGE_JOURNAL_URL"

func (f *journalFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.state, "state-dir", "", "directory of the journal and the output logs (default $XDG_STATE_HOME/offstage, or ~/.local/state/offstage)")
	f.oldState = &oldName{Value: fs.Lookup("state-dir").Value}
	fs.Var(f.oldState, "state", "")
	fs.BoolVar(&f.noJournal, "no-journal", false, "record nothing: no journal, no output logs (task_output then keeps only the last 1 MiB in memory)")
	f.registerShared(fs)
	fs.DurationVar(&f.lease, "lease", journal.DefaultLease, "with a shared journal: how long this instance's lease lasts (renewed every sixth of it); an instance silent for longer is taken for gone and its tasks for orphaned")
}

// registerShared declares --journal.
func (f *journalFlags) registerShared(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "journal", "", "a shared journal: postgres://USER@HOST/DB (default $"+journalURLEnv+"; prefer the variable, which keeps the password out of the process list); output logs stay in --state-dir")
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
		if errors.As(err, &se) {
			se.Required = f.required
		}
		if se != nil && se.Kind != nil {
			return nil, usagef("cannot open the journal in %s (%s): %v", dir, f.dirSource(os.Getenv), err)
		} else if se != nil {
			err = se.Err
		}
		// A loose directory's refusal names --state-dir already: it is
		// not said twice (outsider 17).
		var ways []string
		if !strings.Contains(err.Error(), "--state-dir") {
			ways = append(ways, "pass --state-dir DIR for another directory")
		}
		switch {
		case f.required:
		case ways == nil:
			ways = append(ways, "or pass --no-journal to record nothing")
		default:
			ways = append(ways, "--no-journal to record nothing")
		}
		if len(ways) == 0 {
			return nil, usagef("cannot open the journal in %s (%s): %v", dir, f.dirSource(os.Getenv), err)
		}
		return nil, usagef("cannot open the journal in %s (%s): %v; %s", dir, f.dirSource(os.Getenv), err, strings.Join(ways, ", or "))
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
		return "", usagef("no state directory: set XDG_STATE_HOME or HOME, or pass --state-dir DIR")
	}
	return filepath.Join(home, ".local", "state", "offstage"), nil
}

// maxLogBytes caps the output logs of all sessions together; the oldest
// sessions' logs go first. A variable for tests.
var maxLogBytes int64 = 1 << 30

// recorder is a command's journal (package journal's Recorder), opened at
// start and closed at exit; nil with --no-journal.
type recorder struct {
	*journal.Recorder
	stderr io.Writer
}

// openRecorder opens the journal, or returns nil with --no-journal. Tasks
// that an offstage which died left unfinished are marked orphaned on the
// way, and their processes still running are stopped.
func openRecorder(ctx context.Context, f journalFlags, stderr io.Writer) (*recorder, error) {
	if f.oldState != nil && f.oldState.used {
		fmt.Fprintln(stderr, "offstage: --state is the old name of --state-dir, which it still sets here; use --state-dir (in offstage tasks, --state filters by a task's state).")
	}
	if f.noJournal {
		return nil, nil
	}
	dir, err := f.dir(os.Getenv)
	if err != nil {
		return nil, f.orNoJournal(err)
	}
	store, err := f.open(ctx, dir)
	if err != nil {
		return nil, f.orNoJournal(err)
	}
	r := &recorder{stderr: stderr}
	r.Recorder, err = journal.NewRecorder(ctx, store, journal.RecorderOptions{
		LogDir:      filepath.Join(dir, "logs"),
		MaxLogBytes: maxLogBytes,
		Version:     version(),
		Lease:       f.lease,
		Report:      func(msg string) { fmt.Fprintf(stderr, "offstage: %s\n", msg) },
		Orphaned:    r.orphaned,
		BellDir:     filepath.Join(dir, "run"),
	})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return r, nil
}

// orphaned says what recovery found.
func (r *recorder) orphaned(got journal.Recovered) {
	fmt.Fprintf(r.stderr, "offstage: %s of an offstage that is gone marked orphaned", text.Plural(len(got.Tasks), "task"))
	if got.Killed > 0 {
		fmt.Fprintf(r.stderr, "; %s still running stopped", text.Plural(got.Killed, "process group"))
	}
	fmt.Fprintln(r.stderr, " (offstage tasks --state orphaned).")
}

// journal is the recorder as agent.Open takes it: nil without one.
func (r *recorder) journal() agent.Journal {
	if r == nil {
		return nil
	}
	return r.Recorder
}

// closeInto closes the journal as a command returns: a loss becomes the
// command's error (exit status 1, and the last line says so), or, if it
// failed already, is said just before its error.
func (r *recorder) closeInto(errp *error) {
	if r == nil {
		return
	}
	err := r.Close(context.Background())
	switch {
	case err == nil:
	case *errp == nil:
		*errp = err
	default:
		fmt.Fprintln(r.stderr, "offstage:", err)
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

// resumeID resolves --resume: the session it names, or the latest one
// offstage run recorded.
func (r *recorder) resumeID(ctx context.Context, f resumeFlag) (string, error) {
	if r == nil {
		return "", usagef("--resume needs the journal; drop --no-journal")
	}
	if f.id != "" {
		id, err := r.Resolve(ctx, f.id) // a person may type the start of an id; agent.Open loads the whole id only
		if err != nil {
			return "", openError(err)
		}
		return id, nil
	}
	id, err := r.Latest(ctx, "run")
	if err != nil {
		return "", usagef("%v", err)
	}
	return id, nil
}

// writable is the recorder's store, for a cancel request (see
// mountDashboard); it stays open.
func (r *recorder) writable(context.Context) (journal.Store, func(), error) {
	return r.Store(), func() {}, nil
}

// orNoJournal adds --no-journal to the advice of an error opening the
// journal for a command that has the flag (run, mcp, acp); the journal
// package and the commands that only read it (tasks, dashboard) do not
// name it, nor does serve, which cannot run without it.
func (f journalFlags) orNoJournal(err error) error {
	if f.required || strings.Contains(err.Error(), "--no-journal") {
		return err
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return usagef("%v; or pass --no-journal to record nothing", err)
	}
	return fmt.Errorf("%w; or pass --no-journal to record nothing", err)
}
