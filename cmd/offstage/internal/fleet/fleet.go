// Package fleet operates the tasks a journal records, from any machine
// that can open it: [Cancel] stops a task wherever it runs, [Follow]
// prints its output as it comes, and [Handler] is what an owning
// instance serves its peers so that they can follow.
//
// # Stopping a task
//
// Cancel writes a request into the journal (journal.DB.RequestCancel):
// the record is the truth, and the host that owns the task's session
// acts on it however it hears of it, then records what it did. With
// PostgreSQL the request is announced with NOTIFY in the same
// transaction, and each instance LISTENs on a connection of its own;
// with SQLite on one machine, Cancel rings the owner's doorbell, a Unix
// socket in the state directory's run/ (0600 in a 0700 directory) whose
// path the host recorded. Either way each owner also reads its pending
// requests every 5 seconds and whenever it (re)connects, so a lost
// notification, a doorbell rung while nobody listened, or a request an
// older offstage wrote, is caught up.
//
// The doorbell rather than watching the journal: watching a SQLite file
// means polling it (a query every few hundred milliseconds in every
// process, forever, for something that happens rarely) or inotify on its
// -wal file, which every write of every session touches and which is not
// portable. A socket wakes the owner only when asked, at once, and
// carries no authority: connecting to it only makes the owner read the
// journal, which the caller could write anyway.
//
// The owner cancels the task in its session's table with a
// journal.OperatorCancel as the cause: the task ends canceled, and its
// owner (the model) is told it was stopped by an operator, with who and
// why, not that it stopped it itself; the task's record says so too.
//
// # Following a task
//
// Output stays where it was written (the shell's log, and the owner's
// memory): it is not copied into the database. An instance serving
// offstage mcp --http records its address with its lease, with a secret
// made at its start; Follow asks the owner (GET /fleet/v1/output with
// the secret as a bearer token), which sends what the task printed from
// the cursor asked and then its output as it comes, until the task ends.
// When the owner is gone or cannot be reached, Follow reads the log where
// it was written if that is this machine, and otherwise says where it is.
//
// # Trust
//
// Whoever can open the journal may stop any task of it and read any
// task's output: the journal's credentials (the SQLite file's
// permissions, 0600; PostgreSQL's user) are the trust boundary. That is
// why a peer's secret is kept in the journal: it grants reading output,
// which the journal's users may do, and nothing more. The MCP token,
// which runs commands, is never recorded. A secret dies with its process.
// Peers speak plain HTTP, as offstage mcp --http does: on a network that
// is not trusted, put TLS in front of the instances (a proxy) as for the
// MCP endpoint itself. An instance listening on loopback records a
// loopback address, which a follower on another machine never dials (its
// own loopback would receive the secret): such an instance serves only
// its own machine.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/offstage/offstage/journal"
)

// Errors Cancel and Follow return, to branch on.
var (
	// ErrFinished: the task had ended before the request; the returned
	// Task says how.
	ErrFinished = errors.New("the task has already ended")
	// ErrPending: the request is recorded, but its owner did not act on
	// it before the wait ended (it may be busy, cut off from the
	// journal, or gone: if it is gone, the task will be orphaned).
	ErrPending = errors.New("the cancel request is recorded but its owner has not acted on it yet")
	// ErrNotHere: the owner does not have the task's session open (it
	// ended, or it was resumed elsewhere).
	ErrNotHere = errors.New("the task's session is not open in the offstage that ran it")
	// ErrOwnerGone: the offstage that ran the task is gone (its process
	// on this machine, or its lease in a shared journal): nobody can
	// stop the task, which is orphaned (its shells were or will be
	// killed by the next offstage to start on its machine). Nothing is
	// recorded.
	ErrOwnerGone = errors.New("the offstage that ran the task is gone")
)

// Store is what Cancel and Follow need of a journal: *journal.DB.
type Store interface {
	journal.Store
	RequestCancel(ctx context.Context, session, id, by, reason string, at time.Time) (journal.CancelRequest, bool, error)
	CancelRequest(ctx context.Context, session, id string) (journal.CancelRequest, error)
	PeerOf(ctx context.Context, session string) (journal.Peer, error)
}

var _ Store = (*journal.DB)(nil)

// cancelWait bounds how long Cancel waits for the owner, whatever ctx:
// the owner acts within milliseconds when it hears of the request, and
// within 5 s when it catches up.
const cancelWait = 15 * time.Second

// Cancel stops task id of session, wherever it runs: it records the
// request (by says who asks, reason is optional), tells the owner, and
// waits until the owner has acted and the task has ended, ctx ends, or
// 15 s pass. It returns the task as the journal then has it, and nil, or
// ErrFinished (it had ended; nothing was changed), ErrNotHere, ErrPending
// (recorded, not acted on yet), ErrOwnerGone (nothing recorded), or
// another error. A second request for
// the same task finds the first. It is safe for concurrent use.
func Cancel(ctx context.Context, store journal.Store, session, id, by, reason string) (journal.Task, error) {
	db, ok := store.(Store)
	if !ok {
		return journal.Task{}, fmt.Errorf("fleet: %T cannot record cancel requests", store)
	}
	t, err := db.Task(ctx, session, id)
	if err != nil {
		return t, err
	}
	if t.State.Finished() {
		return t, fmt.Errorf("%s %w: %s", id, ErrFinished, t.State)
	}
	p, err := db.PeerOf(ctx, session)
	if err != nil {
		return t, err
	}
	if hostGone(p.Host) {
		return t, fmt.Errorf("%s: %w (pid %d on %s)", id, ErrOwnerGone, p.PID, p.Hostname)
	}
	if _, _, err := db.RequestCancel(ctx, session, id, by, reason, time.Now()); err != nil {
		return t, err
	}
	if p.Bell != "" {
		journal.Ring(ctx, p.Bell) // nobody listening: the owner catches up
	}
	ctx, stop := context.WithTimeout(ctx, cancelWait)
	defer stop()
	return awaitCancel(ctx, db, session, id)
}

// awaitCancel waits until the owner handled the request and, if it
// stopped the task, until the task's end is recorded.
func awaitCancel(ctx context.Context, db Store, session, id string) (journal.Task, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		q, err := db.CancelRequest(ctx, session, id)
		if err != nil {
			return journal.Task{}, err
		}
		t, err := db.Task(ctx, session, id)
		if err != nil {
			return t, err
		}
		switch {
		case q.Handled.IsZero():
		case q.Outcome == journal.OutcomeCanceled && t.State.Finished():
			return t, nil
		case q.Outcome == journal.OutcomeFinished:
			return t, fmt.Errorf("%s %w: %s", id, ErrFinished, t.State)
		case q.Outcome == journal.OutcomeNotHere:
			return t, fmt.Errorf("%s: %w", id, ErrNotHere)
		case q.Outcome != journal.OutcomeCanceled:
			return t, fmt.Errorf("%s: its offstage could not stop it: %s", id, q.Outcome)
		}
		select {
		case <-ctx.Done():
			if !q.Handled.IsZero() {
				return t, fmt.Errorf("%s was told to stop and has not ended yet (it may be stopping: a shell gets a few seconds' grace)", id)
			}
			return t, fmt.Errorf("%s: %w", id, ErrPending)
		case <-tick.C:
		}
	}
}
