package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/offstage/offstage/task"
)

// Surface says who opens a session and how it is kept: the one
// description every face (the CLI's run, the MCP server, the ACP agent)
// and every embedder gives Open.
type Surface struct {
	// Name is recorded with the session ("run", "mcp", "acp", or yours).
	Name string
	// ID names the session: the id of its record, and the one a later
	// Resume gives back. Empty: the Journal names it (see Session.ID).
	ID string
	// Journal, if set, records the session (its conversation, its tasks
	// and their output logs) and can give it back after a restart. nil
	// records nothing.
	Journal Journal
	// Resume continues the recorded session ID instead of starting one: its
	// conversation comes back, results it never saw are delivered once and
	// it is told which tasks the restart orphaned. It needs a Journal.
	Resume bool
	// Model describes the model in the record ("openai gpt-4o").
	Model string
	// NoProjectInstructions leaves the project's AGENTS.md out. Otherwise,
	// when Config.ProjectInstructions is empty and there is a model, Open
	// reads them from the working directory (FindProjectInstructions).
	NoProjectInstructions bool
	// Logger hears what Open read and what it could not; nil discards.
	Logger *slog.Logger
}

// Journal keeps a durable record of sessions and gives one back to
// continue after a restart. *journal.Recorder (package journal) is the
// one offstage ships: SQLite in a state directory, or PostgreSQL for a
// fleet.
type Journal interface {
	// Record starts the record of a session and hooks cfg up to it: task
	// changes (cfg.Tasks.Recorder), messages (cfg.OnMessage), the shells'
	// output logs (cfg.Tools.LogDir, cfg.Tools.OnShell), and, for a
	// resume, where its task ids go on (cfg.Tasks.FirstID). info.Resume is
	// set for a resumed session, whose record continues its own: Record
	// takes the session over in one step, before anything is written
	// under it, and refuses it if another process took it since Load
	// (Resume.Claim). A session that has a record already and is not
	// resumed is refused: its conversation would be overwritten.
	Record(ctx context.Context, info SessionInfo, cfg *Config) (Record, error)
	// Load reads a recorded session back to continue it. id is the
	// session's whole id: a surface where a person may type the start of
	// one resolves it first (the CLI, with journal.Recorder.Resolve), and
	// one that names sessions to a program (ACP's session/load) gets the
	// session it named or none. An unknown id is an error wrapping
	// ErrUnknownSession; a session still open in a live process is refused.
	// Load takes nothing: two processes may load one session at once, and
	// Record lets one of them go on.
	Load(ctx context.Context, id string) (*Resume, error)
	// List returns recorded sessions, newest first, at most limit (0: a
	// default); of the directory dir only, unless it is empty.
	List(ctx context.Context, dir string, limit int) ([]SessionSummary, error)
}

// Record is the durable record of one open session.
type Record interface {
	// ID is the session's id.
	ID() string
	// Delivered records that results reached the conversation outside the
	// task table (a resume's, told at the first model request). Open calls
	// it for a resume's Resume.Delivered; a caller driving its own loop
	// with a Journal must call it once it has told them, or a later resume
	// tells them again.
	Delivered(ids ...string)
	// End records the session's end.
	End()
}

// TableBinder is a Record that is given the session's task table once
// Open has made it: a journal that carries out requests made outside the
// session (an operator stopping one of its tasks from another machine,
// see package journal) needs it. BindTable is called once, before Open
// returns, and must not block.
type TableBinder interface {
	BindTable(*task.Table)
}

// SessionInfo is what a Journal records of a session as it opens.
type SessionInfo struct {
	ID      string // empty: the journal names it
	Surface string
	Dir     string // the shells' working directory
	Model   string
	Resume  *Resume // the resumed conversation; nil for a new session
}

// SessionSummary is a recorded session, as Journal.List gives it.
type SessionSummary struct {
	ID, Surface, Dir string
	// Title is the start of its first message, if it has one.
	Title            string
	Started, Updated time.Time
	Ended            bool
}

// ErrUnknownSession is what Journal.Load wraps for an id it does not
// know.
var ErrUnknownSession = errors.New("no such session")

// closeTimeout bounds Session.Close when its context has no earlier
// deadline: every task's stop grace (3s) and then some.
const closeTimeout = 20 * time.Second

// receiptWait bounds how long a closing session waits for the results
// held for answers being written to be settled, before its recording
// ends (Session.CloseCause): an answer a relay passes on is settled
// within milliseconds; one stuck on a client that reads nothing is not
// waited for longer.
const receiptWait = time.Second

// Open opens a session for a surface: the one way the CLI, the MCP and
// ACP servers and an embedder start a conversation with everything around
// it. Beyond New it
//
//   - reads the project's instructions (AGENTS.md) from the working
//     directory, unless given or turned off (Surface.NoProjectInstructions);
//   - with Surface.Resume, loads the recorded session (Journal.Load):
//     its history, the results it never saw and what the restart
//     orphaned, and numbers its new tasks on after the old ones;
//   - records the session into Surface.Journal (Journal.Record), and the
//     results a resume tells as delivered, so a second resume never tells
//     them again.
//
// Session.Close then does the whole shutdown: it stops the turn and Run,
// cancels every task, waits until every process is reaped (at most 20s,
// or until its ctx ends) and ends the record.
//
// A nil Config.Model gives a session with the tools and no spawn_agent,
// whose turns fail with ErrNoModel: what a tools-only surface (an MCP
// server without a model) needs.
//
// ctx is the session's lifetime, not a time limit for Open (which reads
// files and the journal): the session's tasks descend from it, and when
// it ends the session closes as by Session.Close, its record ends and its
// turns fail with ErrClosed. Give Open a ctx that lasts as long as the
// conversation.
func Open(ctx context.Context, cfg Config, sf Surface) (*Session, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	logger := sf.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir := cfg.Tools.Process.Dir
	if cfg.Model != nil && !sf.NoProjectInstructions && cfg.ProjectInstructions == "" && dir != "" {
		text, files, err := FindProjectInstructions(dir)
		if err != nil {
			logger.Warn("project instructions not read", "dir", dir, "err", err)
		}
		if len(files) > 0 {
			logger.Info("project instructions", "session", sf.ID, "files", files)
		}
		cfg.ProjectInstructions = text
	}
	id := sf.ID
	if sf.Resume {
		if sf.Journal == nil || sf.ID == "" {
			return nil, errors.New("agent: Surface.Resume needs a Journal and the ID of the session to resume")
		}
		res, err := sf.Journal.Load(ctx, id)
		if err != nil {
			return nil, err
		}
		cfg.Resume, cfg.Tasks.FirstID, id = res, res.FirstID, res.ID
	}
	var rec Record
	if sf.Journal != nil {
		var err error
		rec, err = sf.Journal.Record(ctx, SessionInfo{ID: id, Surface: sf.Name, Dir: dir, Model: sf.Model, Resume: cfg.Resume}, &cfg)
		if err != nil {
			return nil, err
		}
		id = rec.ID()
	}
	s, err := build(ctx, cfg)
	if err != nil {
		if rec != nil {
			rec.End()
		}
		return nil, err
	}
	s.id, s.record = id, rec
	if b, ok := rec.(TableBinder); ok {
		b.BindTable(s.table)
	}
	if r := cfg.Resume; r != nil && rec != nil && len(r.Delivered) > 0 {
		// Told at the first model request: recorded as delivered now, so a
		// second resume never tells them again (a crash before that request
		// loses them from the conversation; the journal still has them).
		rec.Delivered(r.Delivered...)
	}
	s.watchLife(ctx)
	return s, nil
}

// check refuses a configuration New cannot run.
func (c Config) check() error {
	for i, p := range c.Profiles {
		if p.Name == "" {
			return fmt.Errorf("agent: profile %d has an empty name", i)
		}
		for _, q := range c.Profiles[:i] {
			if q.Name == p.Name {
				return fmt.Errorf("agent: profile %d has a repeated name %q", i, p.Name)
			}
		}
	}
	return nil
}

// WithDefaultProfiles returns list with each of DefaultProfiles that it
// does not override (by name) added after it: what a surface offers when
// it loads profiles of its own.
func WithDefaultProfiles(list []Profile) []Profile {
	out := append([]Profile(nil), list...)
	for _, d := range DefaultProfiles() {
		found := false
		for _, p := range list {
			found = found || p.Name == d.Name
		}
		if !found {
			out = append(out, d)
		}
	}
	return out
}
