package task

// Recorder receives every event of a table, with what a durable record of
// the task needs, as it happens: in the order of the changes, under the
// table's lock. It must return quickly and must not call back into the
// table; a journal copies the change into a bounded queue and writes it
// elsewhere. Set it with Options.Recorder.
type Recorder interface {
	// Record receives a change. It is valid during the call only (the
	// table reuses it): copy what you keep.
	Record(*Change)
}

// Pacer is a Recorder that can ask spawning to slow to the pace at which
// it keeps records, instead of losing them in a burst. The table calls
// Pace at the start of every Spawn, before it takes its lock, in the
// spawner's goroutine: Pace may block (briefly: the journal waits at most
// a second) and may call the table. Record itself never waits.
type Pacer interface {
	Recorder
	Pace()
}

// Change is an event together with the task's details (its Kind is the
// Event's).
type Change struct {
	Event
	Label string
	// For EventFinished: the exit code the task reported (nil if none),
	// its result text (cut as Result.Text is) and its error, if any.
	ExitCode *int
	Result   string
	Err      string
	// For EventFinished: who ended the task and why (Info.EndedBy,
	// Info.EndReason).
	EndedBy, EndReason string
	// Usage is the task's usage (Info.Usage) as of this change.
	Usage Usage
}

func (tb *Table) recordLocked(t *task, e *Event) {
	c := &tb.change // one per table: the lock is held, and Record copies
	*c = Change{Event: *e, Label: t.label, Usage: t.usage}
	if e.Type == EventFinished {
		c.ExitCode, c.Result = t.exitCodeLocked(), t.text
		if t.err != nil {
			c.Err = t.err.Error()
		}
		c.EndedBy, c.EndReason = t.endedBy, t.endReason
	}
	tb.opts.Recorder.Record(c)
}
