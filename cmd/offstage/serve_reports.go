package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/offstage/offstage/internal/text"
)

// journalReports is where a supervisor's journal says what it cannot
// write (a disk that filled, a file damaged or gone): its log, and the
// stderr of every run attached to it, as a run in its own process says
// it on its own stderr. Before, the log alone was told, and every run
// hosted meanwhile ended with exit status 0 (an outsider's finding).
type journalReports struct {
	log io.Writer

	mu    sync.Mutex
	faces map[chan string]struct{} // guarded by mu: the attached runs' queues
}

func newJournalReports(log io.Writer) *journalReports {
	return &journalReports{log: log, faces: map[chan string]struct{}{}}
}

// faceReports bounds the reports queued for one run: one that does not
// read its stderr misses the rest (the log has them), and never holds
// the journal up.
const faceReports = 16

func (r *journalReports) Write(p []byte) (int, error) {
	r.log.Write(p)
	if !bytes.HasPrefix(p, []byte("offstage: journal: ")) {
		// About one session's task (its output log stopped), or the
		// logs' upkeep: not every run's (an outsider's run was told of
		// another session's log). A task's result says its log stopped.
		return len(p), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for q := range r.faces {
		select {
		case q <- string(p):
		default:
		}
	}
	return len(p), nil
}

// attach writes the reports to w from now on, until detach, which
// returns once those queued are written. A nil r attaches nothing.
func (r *journalReports) attach(w io.Writer) (detach func()) {
	if r == nil {
		return func() {}
	}
	q := make(chan string, faceReports)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for s := range q {
			io.WriteString(w, s)
		}
	}()
	r.mu.Lock()
	r.faces[q] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.faces, q)
		r.mu.Unlock()
		close(q)
		<-written
	}
}

// journalLost is what a hosted session's run says at its end of the
// records of the session its supervisor's journal lost, as a run in its
// own process says it of its own: an error (exit status 1, and the last
// line says it), nil if none was lost. A journal that cannot write now,
// but lost nothing of the session yet, is said on stderr: what it holds
// of the session may yet be written, or lost.
func (sup *supervisor) journalLost(id string, stderr io.Writer) error {
	if sup.rec == nil {
		return nil
	}
	if sup.rec.Trouble() == nil {
		// Wait briefly for what the session queued last: a write that
		// fails from here on is counted below.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		sup.rec.Flush(ctx)
		cancel()
	}
	trouble := sup.rec.Trouble()
	lost := sup.rec.LostOf(id)
	switch {
	case lost > 0:
		why := trouble
		if why == nil {
			why = sup.rec.Stats().Err
		}
		return fmt.Errorf("the journal lost %s of session %s (%v): what it shows of it is incomplete (offstage serve's log says more)", text.Plural(lost, "record"), id, why)
	case trouble != nil:
		fmt.Fprintf(stderr, "offstage: the journal of offstage serve cannot write now (%v): what it holds of session %s may be incomplete.\n", trouble, id)
	}
	return nil
}

// sayTrouble says on a run's stderr, as it attaches, what keeps its
// supervisor's journal from writing, if anything does: what was reported
// before it attached.
func (sup *supervisor) sayTrouble(stderr io.Writer) {
	if sup.rec == nil {
		return
	}
	if err := sup.rec.Trouble(); err != nil {
		fmt.Fprintf(stderr, "offstage: the journal of offstage serve cannot write (%v): what it holds of this session may be incomplete.\n", err)
	}
}

// faceEnded is what a hosted session's run returns: err, or, when the
// journal lost records of the session (journalLost), that, said just
// before err if there is one.
func (sup *supervisor) faceEnded(id string, err error, stderr io.Writer) error {
	lost := sup.journalLost(id, stderr)
	switch {
	case lost == nil:
		return err
	case err == nil:
		return lost
	}
	fmt.Fprintln(stderr, "offstage:", lost)
	return err
}
