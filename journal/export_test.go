package journal

import "context"

// CountEvents counts the state changes recorded for a task.
func (s *DB) CountEvents(ctx context.Context, session, id string) int {
	var n int
	s.db.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM task_events WHERE session_id = ? AND id = ?`), session, id).Scan(&n)
	return n
}
