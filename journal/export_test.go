package journal

import "context"

// CountEvents counts the state changes recorded for a task.
func (s *DB) CountEvents(ctx context.Context, session, id string) int {
	evs, _ := s.TaskEvents(ctx, session, id)
	return len(evs)
}

// PostgresMigrations are the PostgreSQL schema's migrations, to build a
// journal of an older version.
var PostgresMigrations = postgresMigrations
