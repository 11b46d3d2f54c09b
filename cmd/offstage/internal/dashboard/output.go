package dashboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
)

// output streams one task: "begin" (the page starts its output afresh:
// after a reconnection too), "task" with its detail, then whenever it
// changes, "output" with each piece of its output, and "end" when its
// output ended, or "trouble" saying why it cannot be followed.
func (h *Handler) output(w http.ResponseWriter, r *http.Request) {
	t, code, err := h.lookup(r.Context(), r)
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	ctx, sub, s, done := h.openStream(w, r)
	defer done()
	ctx, cancel := context.WithCancel(ctx) // the follower's, ended before done
	defer cancel()
	if s.send("begin", map[string]string{}) != nil || s.send("task", h.detail(ctx, t)) != nil {
		return
	}
	follow := h.opts.Follow
	if follow == nil {
		follow = localFollow(h.opts.Store)
	}
	ended := make(chan error, 1)
	go func() {
		ended <- follow(ctx, t.Session, t.ID, &outputWriter{s: s})
	}()
	defer func() {
		cancel()
		if ended != nil {
			<-ended
		}
	}()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if s.ping() != nil {
				return
			}
		case err := <-ended:
			ended = nil // received: nothing to wait for
			if err != nil {
				if ctx.Err() == nil {
					s.send("trouble", map[string]string{"message": err.Error()})
				}
				continue
			}
			if ctx.Err() != nil {
				return
			}
			// The state the output ended in, before the end.
			if now, err := h.opts.Store.Task(ctx, t.Session, t.ID); err == nil {
				s.send("task", h.detail(ctx, now))
			}
			s.send("end", map[string]string{})
		case <-sub.wake:
			if !h.forward(ctx, s, sub, t) {
				return
			}
		}
	}
}

// forward sends the changes of task t the hub saw; false if the page is
// gone.
func (h *Handler) forward(ctx context.Context, s *stream, sub *sub, t journal.Task) bool {
	cs, dropped := sub.take()
	if dropped { // read it again
		if now, err := h.opts.Store.Task(ctx, t.Session, t.ID); err == nil {
			return s.send("task", h.detail(ctx, now)) == nil
		}
		return true
	}
	for _, c := range cs {
		if !c.note && c.Session == t.Session && c.ID == t.ID {
			if now, err := h.opts.Store.Task(ctx, t.Session, t.ID); err == nil {
				c.Task = now // with its result, which the list does not carry
			}
			if s.send("task", h.detail(ctx, c.Task)) != nil {
				return false
			}
		}
	}
	return true
}

// outputWriter sends what a FollowFunc writes as "output" events.
type outputWriter struct{ s *stream }

func (o *outputWriter) Write(p []byte) (int, error) {
	if err := o.s.send("output", map[string]string{"text": string(bytes.ToValidUTF8(p, []byte("\uFFFD")))}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Local following: the last tailBytes of the log, then what is added,
// read every followEvery, until the journal says the task ended and the
// log has no more.
const (
	tailBytes   = 64 << 10
	chunkBytes  = 32 << 10
	followEvery = 200 * time.Millisecond
	logWait     = 3 * time.Second // for a starting shell's log to be recorded
)

// localFollow follows a task's output log on this machine, if it lies
// where offstage writes logs (journal.OpenLog): the FollowFunc used
// without Options.Follow.
func localFollow(store journal.Store) FollowFunc {
	return func(ctx context.Context, session, id string, w io.Writer) error {
		t, err := store.Task(ctx, session, id)
		if err != nil {
			return err
		}
		// A shell's log is recorded just after its start: give it a moment.
		// A sub-agent has none to wait for.
		for wait := time.Now().Add(logWait); t.Kind == "shell" && t.LogPath == "" && !t.State.Finished() && time.Now().Before(wait); {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(followEvery):
			}
			if t, err = store.Task(ctx, session, id); err != nil {
				return err
			}
		}
		if t.LogPath == "" {
			if t.State.Finished() {
				return nil // nothing was logged: its result is all there is
			}
			return errors.New("this task has no output log in the journal (only shells have one, and not with --no-journal); its result shows when it ends")
		}
		f, err := journal.OpenLog(t)
		if err != nil {
			where := ""
			if t.Hostname != "" {
				where = " on " + t.Hostname
			}
			return fmt.Errorf("its output log cannot be read from here (%v): it is in %s%s, where the task ran", err, t.LogPath, where)
		}
		defer f.Close()
		var off int64
		if st, err := f.Stat(); err == nil && st.Size() > tailBytes {
			off = st.Size() - tailBytes
			fmt.Fprintf(w, "[… the first %d bytes are left out; the whole log is %s]\n", off, t.LogPath)
		}
		buf := make([]byte, chunkBytes)
		timer := time.NewTimer(0)
		defer timer.Stop()
		finished := t.State.Finished()
		var lastCheck time.Time
		for {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				// Whole lines where it can: an escape sequence cut in two
				// would be cleaned away.
				if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 && n == len(buf) {
					n = i + 1
				}
				off += int64(n)
				if _, err := io.WriteString(w, proc.Clean(buf[:n])); err != nil {
					return err
				}
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("reading its output log %s: %v", t.LogPath, err)
			}
			if finished {
				return nil // ended, and all of its log is read
			}
			if time.Since(lastCheck) >= 2*followEvery {
				lastCheck = time.Now()
				if now, err := store.Task(ctx, session, id); err == nil && now.State.Finished() {
					finished = true
					continue // read what came last, then end
				}
			}
			timer.Reset(followEvery)
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
		}
	}
}
