package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/offstage/offstage/task"
)

// CancelRequest is an operator's request, recorded in the journal, to
// stop a task wherever it runs. The record is the truth: the host that
// owns the task's session acts on every request of its sessions not yet
// handled, however it heard of it (see the package doc, "Operating a
// fleet"), and writes what it did (Outcome) and when (Handled).
type CancelRequest struct {
	Session   string
	ID        string
	By        string // who asked: "user@host" and how
	Reason    string // optional
	Requested time.Time
	Handled   time.Time // zero until the owner acted
	Outcome   string    // what the owner did: see the Outcome constants
}

// What the owning host did with a cancel request.
const (
	OutcomeCanceled = "canceled"         // the task was stopped
	OutcomeFinished = "already finished" // it had ended before the request
	OutcomeNotHere  = "not running here" // its session is not open in its host (ended, or resumed elsewhere)
)

// OperatorCancel is the cause of a task stopped by an operator's
// request: what the task's owner (its model) is told, and the task's
// recorded error. It is task.ErrCanceled (errors.Is).
type OperatorCancel struct {
	By     string
	Reason string
}

func (e *OperatorCancel) Error() string {
	s := "stopped by an operator (" + e.By + "), not by this session"
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// DashboardBy starts the By of a cancel asked for on the dashboard
// ("dashboard (127.0.0.1)"): a person watching the session, so the task
// ends by a user (task.ByUser) rather than an operator.
const DashboardBy = "dashboard"

// EndedBy names who ended the task (task.Ender): an operator, or a user
// when the request came from the dashboard.
func (e *OperatorCancel) EndedBy() (by, reason string) {
	by, reason = task.ByOperator, e.By
	if strings.HasPrefix(e.By, DashboardBy) {
		by = task.ByUser
	}
	if e.Reason != "" {
		reason += ": " + e.Reason
	}
	return by, reason
}

// Is makes an operator's cancel a cancellation.
func (e *OperatorCancel) Is(target error) bool { return target == task.ErrCanceled }

// notifyChannel is the PostgreSQL channel a cancel request is announced
// on; the payload is the id of the host that owns the task's session.
const notifyChannel = "offstage_cancel"

// RequestCancel records a request to stop task id of session, by by for
// reason, unless one is recorded already (then it returns that one and
// false). In PostgreSQL it also announces it (NOTIFY) to the host that
// owns the session, in the same transaction: the owner hears of it as it
// commits, never before. The caller checks the task is unfinished first;
// the owner checks again.
func (s *DB) RequestCancel(ctx context.Context, session, id, by, reason string, at time.Time) (CancelRequest, bool, error) {
	if s.noFleet {
		return CancelRequest{}, false, fmt.Errorf("journal %s predates cancel requests: open it to write (any offstage run, mcp or acp upgrades it)", s.where)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return CancelRequest{}, false, s.diagnose(err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO cancels (session_id, id, requested_at, requested_by, reason) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		session, id, at.UnixNano(), by, reason)
	if err != nil {
		return CancelRequest{}, false, s.diagnose(err)
	}
	n, _ := res.RowsAffected()
	if n == 1 && s.d == postgresDialect {
		if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, host_id) FROM sessions WHERE id = $2`, notifyChannel, session); err != nil {
			return CancelRequest{}, false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return CancelRequest{}, false, s.diagnose(err)
	}
	r, err := s.CancelRequest(ctx, session, id)
	return r, n == 1, err
}

const cancelColumns = `SELECT session_id, id, requested_at, requested_by, reason, handled_at, outcome FROM cancels c `

// CancelRequest returns the cancel request of a task (ErrNotFound if
// there is none).
func (s *DB) CancelRequest(ctx context.Context, session, id string) (CancelRequest, error) {
	if s.noFleet {
		return CancelRequest{}, fmt.Errorf("%w: cancel request of %s/%s", ErrNotFound, session, id)
	}
	rs, err := s.queryCancels(ctx, `WHERE session_id = ? AND id = ?`, session, id)
	if err != nil {
		return CancelRequest{}, err
	}
	if len(rs) == 0 {
		return CancelRequest{}, fmt.Errorf("%w: cancel request of %s/%s", ErrNotFound, session, id)
	}
	return rs[0], nil
}

// PendingCancels returns the requests not yet handled for tasks of the
// sessions host holds, oldest first.
func (s *DB) PendingCancels(ctx context.Context, host string) ([]CancelRequest, error) {
	return s.queryCancels(ctx, `WHERE handled_at IS NULL AND session_id IN (SELECT id FROM sessions WHERE host_id = ?) ORDER BY requested_at`, host)
}

// HandleCancel records what the owner did with a request, at once (not
// through a Journal's queue: the requester is waiting to hear it).
func (s *DB) HandleCancel(ctx context.Context, session, id, outcome string, at time.Time) error {
	_, err := s.execOne(ctx, `UPDATE cancels SET handled_at = ?, outcome = ? WHERE session_id = ? AND id = ? AND handled_at IS NULL`, at.UnixNano(), outcome, session, id)
	return err
}

func (s *DB) queryCancels(ctx context.Context, where string, args ...any) ([]CancelRequest, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(cancelColumns+where), args...)
	if err != nil {
		return nil, s.diagnose(err)
	}
	defer rows.Close()
	var out []CancelRequest
	for rows.Next() {
		var r CancelRequest
		var at int64
		var handled sql.NullInt64
		if err := rows.Scan(&r.Session, &r.ID, &at, &r.By, &r.Reason, &handled, &r.Outcome); err != nil {
			return nil, err
		}
		r.Requested, r.Handled = time.Unix(0, at), fromNanos(handled)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Peer is how a live host is reached: see HostPeer.
type Peer struct {
	Host
	Addr   string
	Secret string
	Bell   string
}

// PeerOf returns the host that holds session, with where it is reached.
func (s *DB) PeerOf(ctx context.Context, session string) (Peer, error) {
	x, err := s.sessionByID(ctx, session)
	if err != nil {
		return Peer{}, err
	}
	if s.noFleet {
		// An older file read as it is (its hosts may predate leases too):
		// the host is known by name only, and serves no peers.
		return Peer{Host: Host{ID: x.HostID, Hostname: x.Hostname}}, nil
	}
	h, err := s.host(ctx, x.HostID)
	if err != nil {
		return Peer{}, err
	}
	p := Peer{Host: h}
	err = s.db.QueryRowContext(ctx, s.d.rebind(`SELECT addr, secret, bell FROM hosts WHERE id = ?`), h.ID).Scan(&p.Addr, &p.Secret, &p.Bell)
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("%w: host %s", ErrNotFound, h.ID)
	}
	return p, err
}
