// Package journal records what offstage ran, so that it outlives the
// process: sessions with their conversation, tasks with their state
// changes, results and whether they reached the model, and each shell's
// process and output log.
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
// # Writing off the hot path
//
// Recording never makes a task or a turn wait for the disk. Add copies a
// record into a bounded queue (Options.QueueRecords, 8192) and returns;
// one goroutine writes batches of up to Options.BatchRecords (512), one
// transaction each, so a crash loses at most what was not yet committed.
// When a write fails (a full disk, a database locked past its 10 s busy
// timeout), the batch is kept and retried with backoff (100 ms doubling
// to 5 s) while the session goes on; the queue then fills, and past its
// bound new records are dropped and counted. Options.Report hears of each
// episode once, and of its end with the count dropped. What the running
// session holds in memory is never affected. Close writes what is queued
// until its context ends.
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
//	      finished_at, exit_code, result, error, delivered, log_path, pid, pid_start)
//	task_events(session_id, id, at, event, state)       -- every state change
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
// recorded leader's pid and start time both still match.
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
package journal
