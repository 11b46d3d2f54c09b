package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, "sqlite"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/task"
)

// sqliteMigrations bring a SQLite journal from version i to i+1; the
// schema version is PRAGMA user_version. Only ever append.
var sqliteMigrations = []string{
	// 1: hosts, sessions with their conversation, tasks.
	`CREATE TABLE hosts (
		id TEXT PRIMARY KEY,
		hostname TEXT NOT NULL,
		pid INTEGER NOT NULL,
		start INTEGER NOT NULL,
		started_at INTEGER NOT NULL,
		version TEXT NOT NULL
	);
	CREATE TABLE sessions (
		id TEXT PRIMARY KEY,
		host_id TEXT NOT NULL,
		surface TEXT NOT NULL,
		cwd TEXT NOT NULL,
		model TEXT NOT NULL,
		started_at INTEGER NOT NULL,
		ended_at INTEGER
	);
	CREATE TABLE messages (
		session_id TEXT NOT NULL,
		seq INTEGER NOT NULL,
		body BLOB NOT NULL,
		PRIMARY KEY (session_id, seq)
	);
	CREATE TABLE tasks (
		session_id TEXT NOT NULL,
		id TEXT NOT NULL,
		kind TEXT NOT NULL,
		label TEXT NOT NULL,
		owner TEXT NOT NULL,
		state TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		started_at INTEGER,
		finished_at INTEGER,
		exit_code INTEGER,
		result TEXT NOT NULL DEFAULT '',
		error TEXT NOT NULL DEFAULT '',
		delivered INTEGER NOT NULL DEFAULT 0,
		log_path TEXT NOT NULL DEFAULT '',
		pid INTEGER NOT NULL DEFAULT 0,
		pid_start INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (session_id, id)
	);`,
	// 2: every state change with its time, and the index "offstage tasks"
	// reads newest first by.
	`CREATE TABLE task_events (
		session_id TEXT NOT NULL,
		id TEXT NOT NULL,
		at INTEGER NOT NULL,
		event TEXT NOT NULL,
		state TEXT NOT NULL
	);
	CREATE INDEX task_events_task ON task_events (session_id, id);
	CREATE INDEX tasks_created ON tasks (created_at);`,
	// 3: leases, for the schema a shared journal has too, and events that
	// a retried batch cannot write twice.
	`ALTER TABLE hosts ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE hosts ADD COLUMN orphaned_at INTEGER;
	DELETE FROM task_events WHERE rowid NOT IN (SELECT MIN(rowid) FROM task_events GROUP BY session_id, id, event, at);
	CREATE UNIQUE INDEX task_events_once ON task_events (session_id, id, event, at);`,
	// 4: how many records of a session the journal could not write.
	`ALTER TABLE sessions ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;`,
	// 5: what a shell used: its CPU time (nanoseconds) and peak memory
	// (bytes) at its end; NULL where it was not measured.
	`ALTER TABLE tasks ADD COLUMN cpu_ns INTEGER;
	ALTER TABLE tasks ADD COLUMN memory_peak INTEGER;`,
	// 6: operating a fleet: cancel requests (the record its owner acts
	// on), and where a live host is reached (its peer address, the
	// secret peers show it, the doorbell socket of a SQLite host).
	`CREATE TABLE cancels (
		session_id TEXT NOT NULL,
		id TEXT NOT NULL,
		requested_at INTEGER NOT NULL,
		requested_by TEXT NOT NULL,
		reason TEXT NOT NULL DEFAULT '',
		handled_at INTEGER,
		outcome TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (session_id, id)
	);
	CREATE INDEX cancels_pending ON cancels (session_id) WHERE handled_at IS NULL;
	ALTER TABLE hosts ADD COLUMN addr TEXT NOT NULL DEFAULT '';
	ALTER TABLE hosts ADD COLUMN secret TEXT NOT NULL DEFAULT '';
	ALTER TABLE hosts ADD COLUMN bell TEXT NOT NULL DEFAULT '';`,
	// 7: a shell's sandbox, as sandbox.Status says it; '' for none.
	`ALTER TABLE tasks ADD COLUMN sandbox TEXT NOT NULL DEFAULT '';`,
	// 8: who ended a task (task.Info.EndedBy: self, model, user, …,
	// host for an orphaned one) and why in words; '' before it ended, and
	// in rows written before this version.
	`ALTER TABLE tasks ADD COLUMN ended_by TEXT NOT NULL DEFAULT '';
	ALTER TABLE tasks ADD COLUMN end_reason TEXT NOT NULL DEFAULT '';`,
	// 9: tokens: what an agent task spent calling models (with the tasks
	// it started), and what a session spent in all and in autonomous
	// turns (auto_*), which a resumed session goes on from.
	tokensMigration("INTEGER"),
	// 10: the TCP ports leased for a shell (bash with port), as decimal
	// numbers joined by commas; '' for none.
	`ALTER TABLE tasks ADD COLUMN ports TEXT NOT NULL DEFAULT '';`,
}

// tokensMigration adds the token columns (schema 8) with the dialect's
// integer type.
func tokensMigration(integer string) string {
	var b strings.Builder
	for _, c := range tokenColumns {
		fmt.Fprintf(&b, "ALTER TABLE tasks ADD COLUMN %s %s NOT NULL DEFAULT 0;\n", c, integer)
	}
	for _, prefix := range []string{"", "auto_"} {
		for _, c := range tokenColumns {
			fmt.Fprintf(&b, "ALTER TABLE sessions ADD COLUMN %s%s %s NOT NULL DEFAULT 0;\n", prefix, c, integer)
		}
	}
	return b.String()
}

// tokenColumns are the columns of a task.Usage, in its fields' order.
var tokenColumns = []string{"input_tokens", "output_tokens", "cached_input_tokens", "model_calls"}

// lostVersion is the SQLite schema version that added sessions.lost, and
// usageVersion the one that added tasks.cpu_ns and memory_peak.
const (
	lostVersion    = 4
	usageVersion   = 5
	fleetVersion   = 6 // cancels, hosts.addr, secret, bell
	sandboxVersion = 7
	endsVersion    = 8  // tasks.ended_by, end_reason
	tokensVersion  = 9  // tasks and sessions: input_tokens, output_tokens, cached_input_tokens, model_calls (sessions also auto_*)
	portsVersion   = 10 // tasks.ports
)

// postgresMigrations are the same for PostgreSQL, whose schema version
// is the one row of offstage_schema.
var postgresMigrations = []string{
	`CREATE TABLE hosts (
		id text PRIMARY KEY,
		hostname text NOT NULL,
		pid integer NOT NULL,
		start bigint NOT NULL,
		started_at bigint NOT NULL,
		version text NOT NULL,
		lease_until bigint NOT NULL DEFAULT 0,
		orphaned_at bigint
	);
	CREATE TABLE sessions (
		id text PRIMARY KEY,
		host_id text NOT NULL,
		surface text NOT NULL,
		cwd text NOT NULL,
		model text NOT NULL,
		started_at bigint NOT NULL,
		ended_at bigint
	);
	CREATE INDEX sessions_host ON sessions (host_id);
	CREATE TABLE messages (
		session_id text NOT NULL,
		seq integer NOT NULL,
		body bytea NOT NULL,
		PRIMARY KEY (session_id, seq)
	);
	CREATE TABLE tasks (
		session_id text NOT NULL,
		id text NOT NULL,
		kind text NOT NULL,
		label text NOT NULL,
		owner text NOT NULL,
		state text NOT NULL,
		created_at bigint NOT NULL,
		started_at bigint,
		finished_at bigint,
		exit_code integer,
		result text NOT NULL DEFAULT '',
		error text NOT NULL DEFAULT '',
		delivered boolean NOT NULL DEFAULT false,
		log_path text NOT NULL DEFAULT '',
		pid integer NOT NULL DEFAULT 0,
		pid_start bigint NOT NULL DEFAULT 0,
		PRIMARY KEY (session_id, id)
	);
	CREATE INDEX tasks_created ON tasks (created_at);
	CREATE TABLE task_events (
		session_id text NOT NULL,
		id text NOT NULL,
		at bigint NOT NULL,
		event text NOT NULL,
		state text NOT NULL,
		PRIMARY KEY (session_id, id, event, at)
	);`,
	`ALTER TABLE sessions ADD COLUMN lost bigint NOT NULL DEFAULT 0;`,
	`ALTER TABLE tasks ADD COLUMN cpu_ns bigint;
	ALTER TABLE tasks ADD COLUMN memory_peak bigint;`,
	`CREATE TABLE cancels (
		session_id text NOT NULL,
		id text NOT NULL,
		requested_at bigint NOT NULL,
		requested_by text NOT NULL,
		reason text NOT NULL DEFAULT '',
		handled_at bigint,
		outcome text NOT NULL DEFAULT '',
		PRIMARY KEY (session_id, id)
	);
	CREATE INDEX cancels_pending ON cancels (session_id) WHERE handled_at IS NULL;
	ALTER TABLE hosts ADD COLUMN addr text NOT NULL DEFAULT '';
	ALTER TABLE hosts ADD COLUMN secret text NOT NULL DEFAULT '';
	ALTER TABLE hosts ADD COLUMN bell text NOT NULL DEFAULT '';`,
	`ALTER TABLE tasks ADD COLUMN sandbox text NOT NULL DEFAULT '';`,
	`ALTER TABLE tasks ADD COLUMN ended_by text NOT NULL DEFAULT '';
	ALTER TABLE tasks ADD COLUMN end_reason text NOT NULL DEFAULT '';`,
	tokensMigration("bigint"),
	`ALTER TABLE tasks ADD COLUMN ports text NOT NULL DEFAULT '';`,
}

// SchemaVersion is the schema version this offstage writes into SQLite.
var SchemaVersion = len(sqliteMigrations)

// dialect is what differs between the databases a DB speaks to; the
// statements and the logic are one.
type dialect struct {
	name       string
	migrations []string
	dollars    bool   // $1, $2 … instead of ?
	skipLocked string // appended to a SELECT that claims rows
	true       string // the literal of a true boolean
	// version reads the schema version in tx; lock, if set, runs first
	// so that processes migrating at once take turns.
	lock       string
	version    func(ctx context.Context, tx *sql.Tx) (int, error)
	setVersion func(ctx context.Context, tx *sql.Tx, v int) error
	// pipeline, if set, runs a batch's statements in one transaction in
	// one round trip (PostgreSQL); without it each is executed in turn.
	pipeline func(ctx context.Context, db *sql.DB, stmts []stmt) error
}

var sqliteDialect = &dialect{
	name: "sqlite", migrations: sqliteMigrations, true: "1",
	version: func(ctx context.Context, tx *sql.Tx) (v int, err error) {
		err = tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
		return v, err
	},
	setVersion: func(ctx context.Context, tx *sql.Tx, v int) error {
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v))
		return err
	},
}

var postgresDialect = &dialect{
	name: "postgres", migrations: postgresMigrations, dollars: true, skipLocked: " FOR UPDATE SKIP LOCKED", true: "true",
	lock: "SELECT pg_advisory_xact_lock(7390001)", // offstage's migration lock
	version: func(ctx context.Context, tx *sql.Tx) (int, error) {
		if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS offstage_schema (version integer NOT NULL)"); err != nil {
			return 0, err
		}
		var v int
		err := tx.QueryRowContext(ctx, "SELECT version FROM offstage_schema").Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			_, err = tx.ExecContext(ctx, "INSERT INTO offstage_schema (version) VALUES (0)")
		}
		return v, err
	},
	setVersion: func(ctx context.Context, tx *sql.Tx, v int) error {
		_, err := tx.ExecContext(ctx, "UPDATE offstage_schema SET version = $1", v)
		return err
	},
}

// DB is a journal in a SQL database: the embedded SQLite file
// (OpenSQLite) or a PostgreSQL server a fleet shares (OpenPostgres). Both
// run the same statements.
type DB struct {
	db    *sql.DB
	where string // the file, or the server's address without credentials
	d     *dialect
	// file is the SQLite file as it was opened: each write first checks
	// that the path still names it. Zero for PostgreSQL and for readers.
	file fileID
	// head is the file's descriptor this process shares (see heads),
	// which overwritten reads; held is its identity, zero if none is held
	// (PostgreSQL, or a reader that could not open the file itself).
	head *os.File
	held fileID
	// header is the start of the SQLite file's header as first seen valid
	// (its magic string, page size and format versions, which never
	// change), nil until then; each write first checks that the file
	// still starts so. Guarded by the journal's single writer.
	header []byte
	// lost is the expression of sessions.lost: the column, or 0 in a file
	// opened to read whose schema predates it.
	lost string
	// usage is the expression of tasks.cpu_ns and memory_peak: the
	// columns, or 0, 0 in a file opened to read whose schema predates them.
	usage string
	// sandbox is the expression of tasks.sandbox: the column, or '' in
	// a file opened to read whose schema predates it.
	sandbox string
	// ends is the expression of tasks.ended_by and end_reason: the
	// columns, or '', '' in a file opened to read whose schema predates
	// them. taskTokens and sessionTokens are the expressions of the token
	// columns, or zeros likewise.
	ends                      string
	taskTokens, sessionTokens string
	// ports is the expression of tasks.ports: the column, or '' likewise.
	ports   string
	reading bool // opened by OpenSQLiteReadOnly
	// noFleet: a file opened to read whose schema predates cancel
	// requests and peer addresses; it has none.
	noFleet bool
	// listen is the PostgreSQL connection's configuration, for the
	// connection that LISTENs for cancel requests; nil for SQLite.
	listen *pgx.ConnConfig
}

// fileID names a file on its machine.
type fileID struct{ dev, ino uint64 }

func idOf(info os.FileInfo) fileID {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{uint64(st.Dev), st.Ino}
}

// sqliteURI is the URI SQLite opens path by, with its query q.
func sqliteURI(path string, q url.Values) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// OpenSQLite opens (creating it and its directory on first use) the
// journal database at path and brings its schema up to date. The file,
// and the -wal and -shm files SQLite keeps beside it, are readable by
// their owner only (0600), whatever the umask. Trouble is a *StoreError
// that names the file and says what to do: a damaged file (ErrDamaged), a
// read-only file system (ErrReadOnlyFS), files this user may not write
// (ErrPermission); a file written by a newer offstage is refused too, and
// so is a directory or file another user could have prepared (ErrLoose,
// see CheckDir): the journal is never a symlink.
func OpenSQLite(path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, diagnose(path, err, false)
	}
	if err := checkJournal(path); err != nil {
		return nil, err
	}
	f, id, err := createPrivate(path)
	if err != nil {
		return nil, diagnose(path, err, false)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", sqliteURI(path, q))
	if err != nil {
		releaseHead(id)
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	s := newDB(db, path, sqliteDialect)
	s.file, s.head, s.held = id, f, id
	// Switching a new file to WAL takes a lock that does not wait for the
	// busy timeout: a process opening the journal just as another creates
	// it retries for a while, up to 5 s in all. A lock held for longer
	// than the busy timeout (another process stopped in a transaction:
	// Ctrl-Z, a debugger) fails it after that timeout, once: retrying it
	// too made a locked journal's refusal take 105 s (a CI run's finding:
	// offstage run, its supervisor stopped mid-write, waited past 60 s).
	retryUntil := time.Now().Add(5 * time.Second)
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		err = s.migrate(context.Background()) // OpenSQLite takes no ctx: SQLite's busy timeout bounds the wait
		if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().Add(wait).After(retryUntil) {
			break
		}
		time.Sleep(wait)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	s.overwritten() // takes the header, if SQLite wrote it already
	return s, nil
}

// checkJournal refuses the journal at path if another user could have
// prepared its directory or its files (CheckDir), or if any of them is a
// symlink.
func checkJournal(path string) error {
	if err := CheckDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := checkFile(p); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	}
	return nil
}

// createPrivate creates the journal's file 0600 if it does not exist, so
// that SQLite, which gives the -wal and -shm files the mode of the
// database, never makes any of them readable by others; a journal made
// 0644 by an older offstage is narrowed, with the side files that exist.
// It returns the file's descriptor (holdHead: the caller releases it) and
// identity.
func createPrivate(path string) (*os.File, fileID, error) {
	f, id, err := holdHead(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fileID{}, err
	}
	info, err := f.Stat()
	if err == nil && info.Mode().Perm()&0o077 != 0 {
		if err = f.Chmod(0o600); err == nil {
			for _, side := range []string{path + "-wal", path + "-shm"} {
				if err = os.Chmod(side, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
					break
				}
				err = nil
			}
		}
	}
	if err != nil {
		releaseHead(id)
		return nil, fileID{}, err
	}
	return f, id, nil
}

// OpenSQLiteReadOnly opens the journal at path to read it (offstage
// tasks): it never writes, never creates the file, and works in a
// directory this user may not write or on a read-only file system. A
// file whose schema is older than this offstage's is read as it is; one
// from a newer offstage is refused. Trouble is a *StoreError, as with
// OpenSQLite.
func OpenSQLiteReadOnly(path string) (*DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, diagnose(path, err, true)
	}
	if err := checkJournal(path); err != nil {
		return nil, err
	}
	// Held for its life like a writer's (see heads), so that no DB of
	// this process that closes drops this one's locks; a file this user
	// cannot open is SQLite's to refuse.
	f, held, herr := holdHead(path, os.O_RDONLY, 0)
	if herr != nil {
		held = fileID{}
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	s, v, err := openReading(path, q)
	if err != nil && !exists(path+"-wal") {
		// A WAL journal needs its -shm file, which a reader cannot make in
		// a directory it may not write. Without a -wal file nobody is
		// writing and nothing waits to be checkpointed: the file alone is
		// the whole journal, and SQLite may read it as immutable.
		q.Set("immutable", "1")
		if s2, v2, err2 := openReading(path, q); err2 == nil {
			s, v, err = s2, v2, nil
		}
	}
	if err != nil {
		if held != (fileID{}) {
			releaseHead(held)
		}
		return nil, diagnose(path, err, true)
	}
	s.head, s.held = f, held
	if v > len(sqliteMigrations) {
		s.Close()
		return nil, fmt.Errorf("journal %s has schema version %d, newer than this offstage understands (%d): upgrade offstage", path, v, len(sqliteMigrations))
	}
	if v < lostVersion {
		s.lost = "0"
	}
	if v < usageVersion {
		s.usage = noUsage
	}
	s.noFleet = v < fleetVersion
	if v < sandboxVersion {
		s.sandbox = "''"
	}
	if v < endsVersion {
		s.ends = "'', ''"
	}
	if v < tokensVersion {
		s.taskTokens, s.sessionTokens = noTaskTokens, noSessionTokens
	}
	if v < portsVersion {
		s.ports = "''"
	}
	s.reading = true
	return s, nil
}

// openReading opens path read-only and reads its schema version.
func openReading(path string, q url.Values) (*DB, int, error) {
	db, err := sql.Open("sqlite", sqliteURI(path, q))
	if err != nil {
		return nil, 0, err
	}
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		db.Close()
		return nil, 0, err
	}
	// A page past the first may be damaged: look at the schema too.
	if _, err := db.Exec("SELECT count(*) FROM sqlite_master"); err != nil {
		db.Close()
		return nil, 0, err
	}
	return newDB(db, path, sqliteDialect), v, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// moved returns ErrGone, as a *StoreError, if the journal's path no
// longer names the file it opened: one stat per batch.
func (s *DB) moved() error {
	if s.file == (fileID{}) {
		return nil
	}
	info, err := os.Stat(s.where)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &StoreError{Path: s.where, Kind: ErrGone, Err: errors.New("removed")}
	case err == nil && idOf(info) != s.file:
		return &StoreError{Path: s.where, Kind: ErrGone, Err: errors.New("replaced by another file")}
	}
	return nil
}

// sqliteMagic starts every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// headerLen is how much of the header overwritten compares: the magic
// string, the page size and the file format versions (bytes 0-19), which
// SQLite never changes in a file once made (the rest counts changes).
const headerLen = 20

// overwritten returns ErrDamaged, as a *StoreError, if the journal's file
// no longer starts with the header it had: truncated, or overwritten by
// something else while open. SQLite would not notice until the next
// open: with WAL, a running process reads the pages it has cached and
// writes to the -wal file, so without this its records would go on into
// a file nobody can open again. A 20-byte read per batch, through the
// descriptor the process keeps for the file (see heads).
// Damage past the header is found by SQLite when it reads it.
func (s *DB) overwritten() error {
	if s.file == (fileID{}) {
		return nil
	}
	head := make([]byte, headerLen)
	n, err := s.head.ReadAt(head, 0) // never a descriptor of its own: see heads
	head = head[:n]
	valid := n == headerLen && string(head[:len(sqliteMagic)]) == sqliteMagic
	switch {
	case s.header == nil && valid:
		s.header = head // the first write that finds it made
		return nil
	case s.header == nil:
		return nil // not written yet: SQLite writes it with the first page
	case valid && string(head) == string(s.header):
		return nil
	case err != nil && !errors.Is(err, io.EOF):
		return nil // cannot be read now: SQLite will say why
	case n == 0:
		return &StoreError{Path: s.where, Kind: ErrDamaged, Err: errors.New("truncated to 0 bytes while this offstage had it open")}
	}
	return &StoreError{Path: s.where, Kind: ErrDamaged, Err: errors.New("its header was overwritten while this offstage had it open: it is no SQLite database any more")}
}

func newDB(db *sql.DB, where string, d *dialect) *DB {
	return &DB{db: db, where: where, d: d, lost: "s.lost", usage: usageColumns, sandbox: "t.sandbox", ends: "t.ended_by, t.end_reason", taskTokens: taskTokenColumns, sessionTokens: sessionTokenColumns, ports: "t.ports"}
}

// Path returns where the journal is: its file, or its server's address
// (without credentials).
func (s *DB) Path() string { return s.where }

// Dialect names the database: "sqlite" or "postgres".
func (s *DB) Dialect() string { return s.d.name }

// rebind turns ? placeholders into $1, $2 … for PostgreSQL, once per
// statement.
func (d *dialect) rebind(q string) string {
	if !d.dollars {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// migrate brings the schema up to date, under ctx: a start waiting behind
// another instance's migration (its lock) gives up when ctx ends.
func (s *DB) migrate(ctx context.Context) error {
	damaged := s.diagnose
	if s.d != sqliteDialect {
		damaged = func(err error) error {
			return fmt.Errorf("journal %s cannot be used (%w): check the server and the user's rights", s.where, err)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil) // immediate in SQLite: one process migrates at a time
	if err != nil {
		return damaged(err)
	}
	defer tx.Rollback()
	if s.d.lock != "" {
		if _, err := tx.ExecContext(ctx, s.d.lock); err != nil {
			return damaged(err)
		}
	}
	v, err := s.d.version(ctx, tx)
	if err != nil {
		return damaged(err)
	}
	if v > len(s.d.migrations) {
		return fmt.Errorf("journal %s has schema version %d, newer than this offstage understands (%d): upgrade offstage, or use another --state directory", s.where, v, len(s.d.migrations))
	}
	for ; v < len(s.d.migrations); v++ {
		if _, err := tx.ExecContext(ctx, s.d.migrations[v]); err != nil {
			return damaged(fmt.Errorf("migration to version %d: %w", v+1, err))
		}
	}
	if err := s.d.setVersion(ctx, tx, v); err != nil {
		return damaged(err)
	}
	if err := tx.Commit(); err != nil {
		return damaged(err)
	}
	return nil
}

// Close closes the database.
func (s *DB) Close() error {
	err := s.db.Close()
	if s.held != (fileID{}) {
		releaseHead(s.held)
	}
	return err
}

func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64)
}

// diagnose explains an error of the SQLite journal (see StoreError).
func (s *DB) diagnose(err error) error {
	if s.d != sqliteDialect {
		return err
	}
	return diagnose(s.where, err, s.reading)
}

// Explain diagnoses an error that reading the SQLite journal returned: a
// *StoreError that tells damage from permissions from a read-only file
// system, and says what to do. Errors of PostgreSQL, ErrNotFound and
// Session's "more than one session starts with" (the id's fault, not the
// journal's), and nil, are returned as they are.
func (s *DB) Explain(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, errAmbiguous) { // the caller's id, not the journal, is at fault
		return err
	}
	return s.diagnose(err)
}

// Write applies batch in one transaction, each statement prepared once.
// In SQLite, a file that is damaged, or that was removed or replaced since
// it was opened, is a *StoreError with ErrDamaged or ErrGone.
func (s *DB) Write(ctx context.Context, batch []Record) error {
	if err := s.moved(); err != nil {
		return err
	}
	if err := s.overwritten(); err != nil {
		return err
	}
	return s.diagnose(s.write(ctx, batch))
}

func (s *DB) write(ctx context.Context, batch []Record) error {
	w := &writer{d: s.d}
	for _, r := range batch {
		if err := w.record(r); err != nil {
			return err
		}
	}
	if s.d.pipeline != nil {
		return s.d.pipeline(ctx, s.db, w.stmts)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	prepared := map[string]*sql.Stmt{}
	defer func() {
		for _, st := range prepared {
			st.Close()
		}
	}()
	for _, q := range w.stmts {
		st := prepared[q.query]
		if st == nil {
			if st, err = tx.PrepareContext(ctx, q.query); err != nil {
				return err
			}
			prepared[q.query] = st
		}
		if _, err := st.ExecContext(ctx, q.args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// stmt is one statement of a batch, rebound for the dialect.
type stmt struct {
	query string
	args  []any
}

// writer turns a batch's records into statements.
type writer struct {
	d     *dialect
	stmts []stmt
}

func (w *writer) exec(query string, args ...any) error {
	w.stmts = append(w.stmts, stmt{w.d.rebind(query), args})
	return nil
}

const (
	insertHost = `INSERT INTO hosts (id, hostname, pid, start, started_at, version, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, pid = excluded.pid, start = excluded.start, started_at = excluded.started_at, version = excluded.version`
	insertSession = `INSERT INTO sessions (id, host_id, surface, cwd, model, started_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET host_id = excluded.host_id, ended_at = NULL`
	endSession     = `UPDATE sessions SET ended_at = ?, lost = CASE WHEN lost > ? THEN lost ELSE ? END WHERE id = ?` // the most any run of it lost
	insertMessage  = `INSERT INTO messages (session_id, seq, body) VALUES (?, ?, ?) ON CONFLICT (session_id, seq) DO UPDATE SET body = excluded.body`
	updateProcess  = `UPDATE tasks SET pid = ?, pid_start = ?, log_path = ? WHERE session_id = ? AND id = ?`
	updateDelivery = `UPDATE tasks SET delivered = TRUE WHERE session_id = ? AND id = ?`
	// updateUndelivery: the answer that carried the result never reached
	// the client (task.Receipt.Return); the result waits again.
	updateUndelivery = `UPDATE tasks SET delivered = FALSE WHERE session_id = ? AND id = ?`
	updateUsage      = `UPDATE tasks SET cpu_ns = ?, memory_peak = ? WHERE session_id = ? AND id = ?`
	updatePeer       = `UPDATE hosts SET addr = ?, secret = ?, bell = ? WHERE id = ?`
	updateSandbox    = `UPDATE tasks SET sandbox = ? WHERE session_id = ? AND id = ?`
	updatePorts      = `UPDATE tasks SET ports = ? WHERE session_id = ? AND id = ?`
	// Token figures only grow: a record that arrives after a newer one
	// (OnUsage is called from several goroutines) changes nothing.
	updateTaskTokens    = `UPDATE tasks SET input_tokens = ?, output_tokens = ?, cached_input_tokens = ?, model_calls = ? WHERE session_id = ? AND id = ? AND model_calls <= ?`
	updateSessionTokens = `UPDATE sessions SET input_tokens = ?, output_tokens = ?, cached_input_tokens = ?, model_calls = ?,
		auto_input_tokens = ?, auto_output_tokens = ?, auto_cached_input_tokens = ?, auto_model_calls = ? WHERE id = ? AND model_calls <= ?`
	insertTask = `INSERT INTO tasks (session_id, id, kind, label, owner, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (session_id, id) DO UPDATE SET kind = excluded.kind, label = excluded.label, owner = excluded.owner, state = excluded.state, created_at = excluded.created_at`
	updateStarted  = `UPDATE tasks SET state = ?, started_at = ? WHERE session_id = ? AND id = ?`
	updateFinished = `UPDATE tasks SET state = ?, finished_at = ?, exit_code = ?, result = ?, error = ?, ended_by = ?, end_reason = ? WHERE session_id = ? AND id = ?`
	insertEvent    = `INSERT INTO task_events (session_id, id, at, event, state) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
	// insertDeliveredEvent: a delivery outside the table (Delivered), in
	// the task's history with the state it has.
	insertDeliveredEvent = `INSERT INTO task_events (session_id, id, at, event, state) SELECT ?, ?, ?, ?, state FROM tasks WHERE session_id = ? AND id = ? ON CONFLICT DO NOTHING`
)

func (w *writer) record(r Record) error {
	switch r := r.(type) {
	case *Host:
		var lease int64
		if !r.Lease.IsZero() {
			lease = r.Lease.UnixNano()
		}
		return w.exec(insertHost, r.ID, r.Hostname, r.PID, r.Start, r.Started.UnixNano(), r.Version, lease)
	case *Session:
		return w.exec(insertSession, r.ID, r.HostID, r.Surface, r.Cwd, r.Model, r.Started.UnixNano())
	case SessionEnd:
		return w.exec(endSession, r.At.UnixNano(), r.Lost, r.Lost, r.Session)
	case *Message:
		return w.exec(insertMessage, r.Session, r.Seq, r.Body)
	case TaskProcess:
		return w.exec(updateProcess, r.PID, r.PIDStart, r.LogPath, r.Session, r.ID)
	case HostPeer:
		return w.exec(updatePeer, r.Addr, r.Secret, r.Bell, r.ID)
	case TaskSandbox:
		return w.exec(updateSandbox, r.Sandbox, r.Session, r.ID)
	case TaskPorts:
		return w.exec(updatePorts, formatPorts(r.Ports), r.Session, r.ID)
	case SessionTokens:
		t, a := r.Total, r.Autonomous
		return w.exec(updateSessionTokens, t.InputTokens, t.OutputTokens, t.CachedInputTokens, t.ModelCalls,
			a.InputTokens, a.OutputTokens, a.CachedInputTokens, a.ModelCalls, r.Session, t.ModelCalls)
	case TaskUsage:
		return w.exec(updateUsage, nullIfZero(int64(r.CPU)), nullIfZero(r.MemoryPeak), r.Session, r.ID)
	case Delivered:
		at := r.At
		if at.IsZero() {
			at = time.Now()
		}
		for _, id := range r.IDs {
			if err := w.exec(updateDelivery, r.Session, id); err != nil {
				return err
			}
			// Its history says so too (an outsider's finding: it ended
			// "delivered, undelivered" while the task said delivered).
			if err := w.exec(insertDeliveredEvent, r.Session, id, at.UnixNano(), task.EventDelivered.String(), r.Session, id); err != nil {
				return err
			}
		}
		return nil
	case *TaskChange:
		return w.change(r)
	}
	return fmt.Errorf("journal: unknown record %T", r)
}

func (w *writer) change(c *TaskChange) error {
	state := c.State.String()
	var err error
	if u := c.Usage; !u.IsZero() && (c.Type == task.EventProgress || c.Type == task.EventFinished) {
		if err := w.exec(updateTaskTokens, u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.ModelCalls, c.Session, c.ID, u.ModelCalls); err != nil {
			return err
		}
	}
	switch c.Type {
	case task.EventSpawned:
		err = w.exec(insertTask, c.Session, c.ID, c.Kind, c.Label, c.Owner, state, c.Time.UnixNano())
	case task.EventStarted:
		err = w.exec(updateStarted, state, c.Time.UnixNano(), c.Session, c.ID)
	case task.EventFinished:
		var code any
		if c.ExitCode != nil {
			code = *c.ExitCode
		}
		err = w.exec(updateFinished, state, c.Time.UnixNano(), code, c.Result, c.Err, c.EndedBy, c.EndReason, c.Session, c.ID)
	case task.EventDelivered:
		err = w.exec(updateDelivery, c.Session, c.ID)
	case task.EventUndelivered:
		err = w.exec(updateUndelivery, c.Session, c.ID)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	return w.exec(insertEvent, c.Session, c.ID, c.Time.UnixNano(), c.Type.String(), state)
}

// takeSession is the one step that takes a session over to resume it:
// only if it is still held by the host, and ended at the time (0: open),
// that the resuming process checked. Every take sets both, so of two
// processes that checked the same thing, one changes the row and the
// other finds it changed. In PostgreSQL the second waits for the first's
// row lock and then sees its update.
const takeSession = `UPDATE sessions SET host_id = ?, ended_at = NULL WHERE id = ? AND host_id = ? AND COALESCE(ended_at, 0) = ?`

// insertSessionOnce records a session that the journal did not hold, if
// nobody recorded it meanwhile.
const insertSessionOnce = `INSERT INTO sessions (id, host_id, surface, cwd, model, started_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`

// take takes session id over for host, from the host from that held it
// with its end at endedAt (Unix nanoseconds, 0 if it was open), directly
// and synchronously (not through a Journal's queue). It reports whether
// it did; false means another process took it, or it changed, since.
func (s *DB) take(ctx context.Context, id, host, from string, endedAt int64) (bool, error) {
	return s.execOne(ctx, takeSession, host, id, from, endedAt)
}

// insertOnce records a session new to the journal, directly; false means
// another process recorded one with that id first.
func (s *DB) insertOnce(ctx context.Context, x Session) (bool, error) {
	return s.execOne(ctx, insertSessionOnce, x.ID, x.HostID, x.Surface, x.Cwd, x.Model, x.Started.UnixNano())
}

// execOne runs one statement at once and reports whether it changed a
// row. A SQLite file removed or replaced since it was opened is ErrGone.
func (s *DB) execOne(ctx context.Context, query string, args ...any) (bool, error) {
	if err := s.moved(); err != nil {
		return false, err
	}
	res, err := s.db.ExecContext(ctx, s.d.rebind(query), args...)
	if err != nil {
		return false, s.diagnose(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.diagnose(err)
	}
	return n == 1, nil
}

// host returns the host recorded with id.
func (s *DB) host(ctx context.Context, id string) (Host, error) {
	hosts, err := s.queryHosts(ctx, s.db, `WHERE id = ?`, id)
	if err != nil {
		return Host{}, err
	}
	if len(hosts) == 0 {
		return Host{}, fmt.Errorf("%w: host %s", ErrNotFound, id)
	}
	return hosts[0], nil
}

// Hosts returns the hosts, other than except and not yet orphaned, that
// have open sessions or unfinished tasks.
func (s *DB) Hosts(ctx context.Context, except string) ([]Host, error) {
	return s.queryHosts(ctx, s.db, `WHERE id != ? AND orphaned_at IS NULL AND EXISTS (SELECT 1 FROM sessions s WHERE s.host_id = h.id AND (s.ended_at IS NULL
			OR EXISTS (SELECT 1 FROM tasks t WHERE t.session_id = s.id AND t.state IN ('queued', 'running'))))`, except)
}

func (s *DB) queryHosts(ctx context.Context, q querier, where string, args ...any) ([]Host, error) {
	rows, err := q.QueryContext(ctx, s.d.rebind(`SELECT id, hostname, pid, start, started_at, version, lease_until FROM hosts h `+where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Host
	for rows.Next() {
		var h Host
		var started, lease int64
		if err := rows.Scan(&h.ID, &h.Hostname, &h.PID, &h.Start, &started, &h.Version, &lease); err != nil {
			return nil, err
		}
		h.Started = time.Unix(0, started)
		if lease != 0 {
			h.Lease = time.Unix(0, lease)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// Orphan marks the unfinished tasks of hostID's sessions orphaned, ends
// its open sessions, and returns the tasks, in one transaction that also
// marks the host handled: of several processes racing to do it, one gets
// the tasks, and the others nothing.
func (s *DB) Orphan(ctx context.Context, hostID string, at time.Time) ([]Task, error) {
	_, tasks, err := s.orphan(ctx, `WHERE id = ? AND orphaned_at IS NULL`, at, hostID)
	return tasks, err
}

// OrphanExpired orphans, as Orphan does, every host whose lease ended
// before now that nobody has handled; hosts another process is handling
// at the same moment are skipped (FOR UPDATE SKIP LOCKED in PostgreSQL).
func (s *DB) OrphanExpired(ctx context.Context, now time.Time) ([]Host, []Task, error) {
	return s.orphan(ctx, `WHERE lease_until > 0 AND lease_until < ? AND orphaned_at IS NULL`, now, now.UnixNano())
}

// orphan claims the hosts that where selects and orphans what they left.
func (s *DB) orphan(ctx context.Context, where string, at time.Time, args ...any) ([]Host, []Task, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	hosts, err := s.queryHosts(ctx, tx, where+s.d.skipLocked, args...)
	if err != nil {
		return nil, nil, err
	}
	var all []Task
	for _, h := range hosts {
		tasks, err := s.queryTasks(ctx, tx, `WHERE t.session_id IN (SELECT id FROM sessions WHERE host_id = ?) AND t.state IN ('queued', 'running') ORDER BY t.created_at`, h.ID)
		if err != nil {
			return nil, nil, err
		}
		for _, q := range []struct {
			query string
			args  []any
		}{
			{`UPDATE tasks SET state = 'orphaned', finished_at = ?, ended_by = 'host', end_reason = ? WHERE session_id IN (SELECT id FROM sessions WHERE host_id = ?) AND state IN ('queued', 'running')`, []any{at.UnixNano(), orphanReason(h), h.ID}},
			{`UPDATE sessions SET ended_at = ? WHERE host_id = ? AND ended_at IS NULL`, []any{at.UnixNano(), h.ID}},
			{`UPDATE hosts SET orphaned_at = ? WHERE id = ?`, []any{at.UnixNano(), h.ID}},
		} {
			if _, err := tx.ExecContext(ctx, s.d.rebind(q.query), q.args...); err != nil {
				return nil, nil, err
			}
		}
		for _, t := range tasks {
			if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO task_events (session_id, id, at, event, state) VALUES (?, ?, ?, 'orphaned', 'orphaned') ON CONFLICT DO NOTHING`), t.Session, t.ID, at.UnixNano()); err != nil {
				return nil, nil, err
			}
		}
		all = append(all, tasks...)
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, err
	}
	return hosts, all, nil
}

// orphanReason is the end_reason of the tasks a dead host left.
func orphanReason(h Host) string {
	r := fmt.Sprintf("its host died: offstage pid %d on %s", h.PID, h.Hostname)
	if !h.Lease.IsZero() {
		r += fmt.Sprintf(" (lease ended %s)", h.Lease.UTC().Format(time.RFC3339))
	}
	return r + "; the task was marked orphaned"
}

// Renew extends a host's lease; false means the host was orphaned
// meanwhile. A host not recorded yet (its record still queued) is fine.
func (s *DB) Renew(ctx context.Context, hostID string, until time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE hosts SET lease_until = ? WHERE id = ? AND orphaned_at IS NULL`), until.UnixNano(), hostID)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	var orphaned sql.NullInt64
	err = s.db.QueryRowContext(ctx, s.d.rebind(`SELECT orphaned_at FROM hosts WHERE id = ?`), hostID).Scan(&orphaned)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return true, nil
	case err != nil:
		return false, err
	}
	return !orphaned.Valid, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// A task's columns are taskColumns, then usage (usageColumns, or
// noUsage in an older journal read as it is), its sandbox, its end, its
// tokens and its ports, then taskFrom.
const (
	taskColumns = `SELECT t.session_id, t.id, t.kind, t.label, t.owner, t.state, t.created_at, t.started_at, t.finished_at,
	t.exit_code, t.result, t.error, t.delivered, t.log_path, t.pid, t.pid_start, COALESCE(h.hostname, ''), `
	usageColumns = `COALESCE(t.cpu_ns, 0), COALESCE(t.memory_peak, 0)`
	noUsage      = `0, 0`
	// the tokens of a task, then of a session (schema 8)
	taskTokenColumns    = `t.input_tokens, t.output_tokens, t.cached_input_tokens, t.model_calls`
	noTaskTokens        = `0, 0, 0, 0`
	sessionTokenColumns = `s.input_tokens, s.output_tokens, s.cached_input_tokens, s.model_calls, s.auto_input_tokens, s.auto_output_tokens, s.auto_cached_input_tokens, s.auto_model_calls`
	noSessionTokens     = `0, 0, 0, 0, 0, 0, 0, 0`
	taskFrom            = `
	FROM tasks t LEFT JOIN sessions s ON s.id = t.session_id LEFT JOIN hosts h ON h.id = s.host_id `
)

func (s *DB) queryTasks(ctx context.Context, q querier, where string, args ...any) ([]Task, error) {
	rows, err := q.QueryContext(ctx, s.d.rebind(taskColumns+s.usage+", "+s.sandbox+", "+s.ends+", "+s.taskTokens+", "+s.ports+taskFrom+where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		var t Task
		var created, cpu int64
		var started, finished, code sql.NullInt64
		var ports string
		if err := rows.Scan(&t.Session, &t.ID, &t.Kind, &t.Label, &t.Owner, &t.State, &created, &started, &finished,
			&code, &t.Result, &t.Error, &t.Delivered, &t.LogPath, &t.PID, &t.PIDStart, &t.Hostname, &cpu, &t.MemoryPeak, &t.Sandbox, &t.EndedBy, &t.EndReason,
			&t.Usage.InputTokens, &t.Usage.OutputTokens, &t.Usage.CachedInputTokens, &t.Usage.ModelCalls, &ports); err != nil {
			return nil, err
		}
		t.Ports = parsePorts(ports)
		t.CPU = time.Duration(cpu)
		if t.EndedBy == "" && t.State == Orphaned {
			t.EndedBy = task.ByHost // recorded before ended_by was
		}
		t.Created, t.Started, t.Finished = time.Unix(0, created), fromNanos(started), fromNanos(finished)
		if code.Valid {
			c := int(code.Int64)
			t.ExitCode = &c
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Tasks returns tasks newest first.
func (s *DB) Tasks(ctx context.Context, f TaskFilter) ([]Task, error) {
	var conds []string
	var args []any
	if f.Session != "" {
		conds, args = append(conds, "t.session_id = ?"), append(args, f.Session)
	}
	if f.State != "" {
		conds, args = append(conds, "t.state = ?"), append(args, string(f.State))
	}
	if !f.Since.IsZero() {
		conds, args = append(conds, "t.created_at >= ?"), append(args, f.Since.UnixNano())
	}
	if f.Hostname != "" {
		conds, args = append(conds, "h.hostname = ?"), append(args, f.Hostname)
	}
	where := ""
	if len(conds) > 0 {
		where = "WHERE " + strings.Join(conds, " AND ")
	}
	where += " ORDER BY t.created_at DESC, t.id DESC"
	if f.Limit > 0 {
		where += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return s.queryTasks(ctx, s.db, where, args...)
}

// Task returns one task.
func (s *DB) Task(ctx context.Context, session, id string) (Task, error) {
	ts, err := s.queryTasks(ctx, s.db, "WHERE t.session_id = ? AND t.id = ?", session, id)
	if err != nil {
		return Task{}, err
	}
	if len(ts) == 0 {
		return Task{}, fmt.Errorf("%w: task %s of session %s", ErrNotFound, id, session)
	}
	return ts[0], nil
}

const sessionColumns = `SELECT s.id, s.host_id, s.surface, s.cwd, s.model, s.started_at, s.ended_at,
	(SELECT COUNT(*) FROM tasks t WHERE t.session_id = s.id), COALESCE(h.hostname, ''), `
const sessionFrom = ` FROM sessions s LEFT JOIN hosts h ON h.id = s.host_id `

func (s *DB) querySessions(ctx context.Context, where string, args ...any) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(sessionColumns+s.lost+", "+s.sessionTokens+sessionFrom+where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var x Session
		var started int64
		var ended sql.NullInt64
		if err := rows.Scan(&x.ID, &x.HostID, &x.Surface, &x.Cwd, &x.Model, &started, &ended, &x.Tasks, &x.Hostname, &x.Lost,
			&x.Usage.InputTokens, &x.Usage.OutputTokens, &x.Usage.CachedInputTokens, &x.Usage.ModelCalls,
			&x.Autonomous.InputTokens, &x.Autonomous.OutputTokens, &x.Autonomous.CachedInputTokens, &x.Autonomous.ModelCalls); err != nil {
			return nil, err
		}
		x.Started, x.Ended = time.Unix(0, started), fromNanos(ended)
		out = append(out, x)
	}
	return out, rows.Err()
}

// Sessions returns sessions newest first.
func (s *DB) Sessions(ctx context.Context, limit int) ([]Session, error) {
	where := "ORDER BY s.started_at DESC"
	if limit > 0 {
		where += fmt.Sprintf(" LIMIT %d", limit)
	}
	return s.querySessions(ctx, where)
}

// Session returns the session with id, or the only one whose id starts
// with it.
func (s *DB) Session(ctx context.Context, id string) (Session, error) {
	ss, err := s.querySessions(ctx, "WHERE s.id = ? OR s.id LIKE ? ESCAPE '\\' ORDER BY s.id = ? DESC LIMIT 2", id, likePrefix(id), id)
	if err != nil {
		return Session{}, err
	}
	switch {
	case len(ss) == 0:
		return Session{}, fmt.Errorf("%w: session %s", ErrNotFound, text.Quote(id, 80))
	case ss[0].ID == id || len(ss) == 1:
		return ss[0], nil
	}
	return Session{}, fmt.Errorf("journal: %w %s; give more of its id", errAmbiguous, text.Quote(id, 80))
}

// errAmbiguous is what Session wraps for a start of an id that more than
// one session's id shares.
var errAmbiguous = errors.New("more than one session starts with")

// sessionByID returns the session with id, and no other.
func (s *DB) sessionByID(ctx context.Context, id string) (Session, error) {
	ss, err := s.querySessions(ctx, "WHERE s.id = ?", id)
	if err != nil {
		return Session{}, err
	}
	if len(ss) == 0 {
		return Session{}, fmt.Errorf("%w: session %s", ErrNotFound, text.Quote(id, 80))
	}
	return ss[0], nil
}

func likePrefix(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s) + "%"
}

// History returns a session's conversation in order.
func (s *DB) History(ctx context.Context, session string) ([]Message, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT seq, body FROM messages WHERE session_id = ? ORDER BY seq`), session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m := Message{Session: session}
		if err := rows.Scan(&m.Seq, &m.Body); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

var (
	_ Store  = (*DB)(nil)
	_ Leaser = (*DB)(nil)
)

// FirstMessage returns a session's first message (ErrNotFound if it has
// none), without reading the rest.
func (s *DB) FirstMessage(ctx context.Context, session string) (Message, error) {
	m := Message{Session: session}
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT seq, body FROM messages WHERE session_id = ? ORDER BY seq LIMIT 1`), session).Scan(&m.Seq, &m.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("%w: messages of session %s", ErrNotFound, session)
	}
	return m, err
}

// LastSeq returns the number of a session's last message, 0 if it has
// none.
func (s *DB) LastSeq(ctx context.Context, session string) (int, error) {
	var n sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT MAX(seq) FROM messages WHERE session_id = ?`), session).Scan(&n)
	return int(n.Int64), err
}

// TaskEvent is one recorded state change of a task.
type TaskEvent struct {
	At    time.Time
	Event string // spawned, started, finished, delivered, undelivered, orphaned
	State State
}

// TaskEvents returns a task's state changes in order.
func (s *DB) TaskEvents(ctx context.Context, session, id string) ([]TaskEvent, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT at, event, state FROM task_events WHERE session_id = ? AND id = ? ORDER BY at, event`), session, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TaskEvent
	for rows.Next() {
		var e TaskEvent
		var at int64
		if err := rows.Scan(&at, &e.Event, &e.State); err != nil {
			return nil, err
		}
		e.At = time.Unix(0, at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// nullIfZero is n, or NULL for 0: not measured.
func nullIfZero(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

// formatPorts is how tasks.ports holds a shell's leased ports: decimal
// numbers joined by commas.
func formatPorts(ports []int) string {
	list := make([]string, len(ports))
	for i, p := range ports {
		list[i] = strconv.Itoa(p)
	}
	return strings.Join(list, ",")
}

// parsePorts reads tasks.ports, keeping only what is a TCP port: the
// column is data, which a hand-edited or damaged journal may hold
// anything in.
func parsePorts(s string) []int {
	if s == "" {
		return nil
	}
	var ports []int
	for f := range strings.SplitSeq(s, ",") {
		if p, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && p > 0 && p < 65536 && len(ports) < maxPorts {
			ports = append(ports, p)
		}
	}
	return ports
}

// maxPorts bounds the ports read of one task (bash leases at most 8).
const maxPorts = 64
