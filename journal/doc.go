// Package journal records what offstage ran, so that it outlives the
// process: sessions with their conversation, tasks with their state
// changes, results and whether they reached the model, and each shell's
// process and output log.
//
// An agent runtime uses it through a [Recorder] (NewRecorder), which
// agent.Open takes as its Surface.Journal: it records this process as a
// host, marks what crashed processes left running orphaned (and stops
// their processes), records each session, its conversation and tasks,
// keeps the shells' output logs with a cap on them all, and gives a
// session back to resume, exactly once, or to list. A session is resumed
// by one process at a time: Record takes it over in one statement, so of
// two processes resuming it at once one goes on and the other is refused
// before it writes anything. The rest of this page is the machinery
// below it.
//
// A [Journal] writes through a [Store]: [OpenSQLite] is the embedded
// default, one file in the user's state directory, in WAL mode so several
// offstage processes can share it; [OpenPostgres] is a PostgreSQL server a
// fleet of offstage instances shares (github.com/jackc/pgx/v5). Both are a
// [DB] and run the same statements; only the schema's DDL, how its
// version is kept, and PostgreSQL's pipelining of a batch into one round
// trip differ. The task table does not depend on this package: a
// [SessionLog] is a task.Recorder the table is given.
//
// # Concurrency properties
//
// A DB, a Journal, a SessionLog and a Recorder are each safe for
// concurrent use. Several processes share one journal: SQLite's file in
// WAL mode (writers take turns, each waiting up to a 10 s busy timeout),
// PostgreSQL's server (the schema is migrated under an advisory lock,
// once). A Journal has one writer goroutine, started by New and
// ended by Close: records are written in the order they were added, in
// batches of one transaction each, so another process reading the store
// sees a batch whole or not at all. Add and a SessionLog's methods never
// block, except SessionLog.Pace, for at most Options.Backpressure (see
// below); Flush blocks until what was queued before it is written or ctx
// ends; Close, idempotent, writes what is queued until ctx ends and stops
// the writer. After Close, records are dropped and counted. A Recorder
// starts, besides its Journal's writer, a goroutine that hears of cancel
// requests and, on a shared journal (PostgreSQL), one that keeps this
// host's lease; its Close stops them all. Close a session (agent.Session
// .Close, which ends its record) before its Recorder.
//
// # Writing off the hot path
//
// Add copies a record into a bounded queue (Options.QueueRecords, 8192)
// and returns; one goroutine writes batches of up to
// Options.BatchRecords (512), one transaction each, so a crash loses at
// most what was not yet committed. A turn never waits for the disk.
//
// # A full queue: brief backpressure, loss only when the store fails
//
// SQLite on a 2-core machine sustains about 30,000–55,000 records a
// second (BenchmarkJournalThroughput; down to 12,000 with the machine
// heavily loaded), about 8,000–14,000 task lives of four records
// (spawned, started, finished, delivered); PostgreSQL on the same machine
// about 25,000. A table spawning no-op tasks in a loop goes 20 times
// faster. Real work (a shell forks a
// process, a model spawns from a turn) stays far below that rate, but a
// library user's burst may not, and records are what the journal is for.
// So the answer to a full queue is chosen by who is recording:
//
//   - Recording a task's spawn waits, once the queue is half full, until
//     the writer frees room, for at most Options.Backpressure (1s): a
//     burst of spawns goes at the store's pace (BenchmarkSpawnDrainJournal
//     keeps all 4 records per task, 0 dropped). The table asks before it
//     spawns, in the spawner's goroutine and outside its lock
//     (task.Pacer, SessionLog.Pace), so only the spawner waits: the
//     table's other callers, its running tasks and the records they make
//     go on. The bound keeps the stall short: a store that frees no room in that
//     time is reported ("has not taken a batch"), and spawns stop waiting
//     until it writes again.
//   - Everything else never waits: a task's later records (they come from
//     under the table's lock, from every task's goroutine), a turn's
//     messages (agent.Config.OnMessage must not block), a session's start
//     and end. The half of the queue spawns leave free is theirs, so
//     while the writer keeps up they always fit.
//   - While the store fails (a full disk, a database locked past its 10 s
//     busy timeout, a server away), nothing waits: the batch is kept and
//     retried with backoff (100 ms doubling to 5 s) while the session goes
//     on; the queue fills, and past its bound new records are dropped.
//
// Rejected: waiting in the spawner instead of the recorder (the table
// offers no hook outside its lock, and every caller of Spawn would have
// to remember to call one: a forgotten call is silent loss); an
// unbounded queue (memory); dropping on a full queue while the writer is
// healthy (what this package did: a burst lost 84% of its records).
//
// Every record not written is counted: Stats gives the journal's total
// and the reason, Options.Report hears of each episode once and of its
// end with the count, and a session's end writes its own loss into the
// journal (Session.Lost), which offstage tasks shows. What the running
// session holds in memory is never affected. Close writes what is queued
// until its context ends.
//
// # Trouble with the file
//
// Errors about the SQLite file are a *StoreError that tells damage
// (ErrDamaged) from a read-only file system (ErrReadOnlyFS) from
// permissions (ErrPermission), each with its advice; SQLite's own codes do
// not, so the kernel is asked (access(2)) about the directory, the file
// and its -wal and -shm. Damage is the same error wherever it is found:
// at open (refused), while reading (offstage tasks), while writing. Found
// while writing, damage ends the journal's writing: it is not retried,
// and what follows is lost and counted. So does a file removed or
// replaced while it is open (ErrGone): each batch first compares the
// path's device and inode with the file opened, one stat(2), and its
// first 20 bytes with the header the file had (magic, page size, format),
// so a file truncated or overwritten in place is found damaged while it is
// open, not at the next open (in WAL mode SQLite reads its cache and
// writes the -wal file, and would not notice); damage past the header is
// found when SQLite reads it. The journal
// and its -wal and -shm files are 0600 whatever the umask (the file is
// made 0600 before SQLite opens it, and SQLite gives the side files its
// mode; older 0644 files are narrowed). OpenSQLiteReadOnly reads without
// ever writing (SQLite's mode=ro; immutable=1 when the directory allows no
// -shm file and no -wal file exists, so nothing is being written), for a
// reader in a directory it may not write or on a read-only file system.
//
// # Schema
//
// The schema is versioned (SQLite: PRAGMA user_version; PostgreSQL: the
// row of offstage_schema) and migrated forward on open, in one
// transaction (SQLite: immediate; PostgreSQL: under an advisory lock), so
// processes opening the journal at once migrate it once. State changes
// are unique per task, event and time, and every write is an upsert, so a
// batch written again (its commit was lost on the way back) changes
// nothing. A file written by a newer offstage, or
// one that is not a database, is refused with an error naming the file
// and what to do.
//
//	hosts(id, hostname, pid, start, started_at, version, lease_until, orphaned_at)
//	sessions(id, host_id, surface, cwd, model, started_at, ended_at)
//	messages(session_id, seq, body)                     -- the conversation
//	tasks(session_id, id, kind, label, owner, state, created_at, started_at,
//	      finished_at, exit_code, result, error, delivered, log_path, pid, pid_start,
//	      cpu_ns, memory_peak,                          -- a shell's use, at its end
//	      sandbox,                                      -- its sandbox ('' for none)
//	      ended_by, end_reason,                         -- who ended it, and why
//	      input_tokens, output_tokens, cached_input_tokens, model_calls, -- an agent's
//	      ports)                                        -- ports leased for a shell ("20417,20418")
//	task_events(session_id, id, at, event, state)       -- every state change
//	cancels(session_id, id, requested_at, requested_by, reason,
//	        handled_at, outcome)                        -- operators' cancel requests
//
// and hosts also keep addr, secret and bell (see HostPeer): where a live
// host serves its tasks' output to its peers, the secret they show it,
// and its doorbell socket.
//
// Times are Unix nanoseconds. A task is keyed by its session and its id
// (shell:3); a resumed session keeps its id and its table continues the
// numbering (task.Options.FirstID).
//
// # Restart
//
// A host is one offstage process, named by its pid and its start time
// (from /proc): a pid alone can be reused. [Recover], run at start, finds
// hosts of this machine that are gone while their sessions were open:
// their unfinished tasks become orphaned, their sessions end, and shells
// of theirs still running are killed by process group, but only when the
// recorded leader's pid and start time both still match and the group
// carries what offstage gave it (see Trust).
//
// # Trust
//
// A record is trusted only as far as whoever can write the journal (with
// a shared PostgreSQL journal, every user of it): it may cancel tasks and
// read their output, not choose what offstage signals or opens. Recovery
// never signals pid 0 or 1 or its own group, and kills a recovered group
// only if it carries an offstage mark (OFFSTAGE_MARK, or the RLIMIT_RTTIME
// mark of package proc) or lies in a dead host's cgroup directory;
// otherwise its task is orphaned and the process left alone. A log is
// opened only with [OpenLog], which reads LOGS/SESSION/ID.log of the
// task's own session and id, never through a symlink. A state directory,
// log directory or journal another user could have prepared is refused
// ([CheckDir], [ErrLoose]), as OpenSSH's StrictModes refuses a loose
// ~/.ssh, and the journal is never opened through a symlink.
//
// # A fleet
//
// In a journal several machines share (a [Leaser]: PostgreSQL), each host
// holds a lease and renews it ([KeepLease], every sixth of
// [DefaultLease], 30 s). A host whose lease ran out is gone, wherever it
// ran: [DB.OrphanExpired] claims such hosts with SELECT … FOR UPDATE SKIP
// LOCKED and orphans their tasks in the same transaction, marking the
// host handled, so of all the hosts that look, exactly one handles each.
// A host cut off from the database for longer than its lease is taken for
// gone too; it goes on serving, is told so once, and its later records
// set its tasks' states right. When the database is away, the writer
// keeps retrying (see above), so records arrive late, in order, and once.
//
// # Operating a fleet
//
// Any task can be stopped by whoever can open the journal
// (DB.RequestCancel; package cmd/offstage/internal/fleet's Cancel is the whole
// step). The request is a row of cancels, and that row is the truth: a
// Recorder acts on the pending requests of the sessions its host holds
// (DB.PendingCancels) when it hears of one and every 5 seconds anyway,
// cancels the task in its session's table (agent.Open hands a Record
// the table: agent.TableBinder) with an *OperatorCancel as the cause,
// so the model is told who stopped it and why, and records what it did
// (DB.HandleCancel). It hears of a request through PostgreSQL's NOTIFY,
// sent in the request's transaction, on a connection of its own that
// LISTENs (made again with backoff when lost, reading the record after
// each connection); in SQLite through its doorbell, a Unix socket in
// RecorderOptions.BellDir (0600 in a 0700 directory) whose path it
// records (HostPeer.Bell). Connecting to the doorbell only makes the
// host read the journal, so it needs no authority of its own. A
// Recorder also keeps its live shells (Shell) and a secret
// (PeerSecret) that it records with its address (SetPeerAddr), so that
// its peers can follow its tasks' output (cmd/offstage/internal/fleet). Whoever can
// open the journal can read that secret: the journal's credentials are
// the trust boundary for stopping tasks and reading their output.
package journal
