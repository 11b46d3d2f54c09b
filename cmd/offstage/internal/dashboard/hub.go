package dashboard

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/offstage/offstage/journal"
)

// hub watches a journal for the pages open: one goroutine, running only
// while a page subscribes, reads the unfinished tasks and the ones created
// lately every interval, and hands each subscriber the tasks that changed.
type hub struct {
	store    journal.Store
	interval time.Duration

	mu      sync.Mutex
	subs    map[*sub]struct{}
	running bool
	done    chan struct{} // closed when the watcher returns; nil while none runs
	closed  bool
}

// change is a task that changed, or (trouble set) what keeps the journal
// from being read.
type change struct {
	journal.Task
	prev    *journal.Task // as it was last read, if it was
	note    bool          // a note about the journal, not a task: trouble, or "" when it passed
	trouble string
}

// subQueue bounds the changes waiting for one page; past it they are
// dropped and the page is sent a fresh snapshot instead.
const subQueue = 1024

// recentWindow is how far back tasks are read by their creation, so a
// task whose records took this long to be written is still seen.
const recentWindow = 10 * time.Second

type sub struct {
	wake chan struct{} // capacity 1
	mu   sync.Mutex
	q    []change
	drop bool
}

func (s *sub) put(c change) {
	s.mu.Lock()
	if len(s.q) >= subQueue {
		s.drop = true
		s.q = s.q[:0]
	} else if !s.drop {
		s.q = append(s.q, c)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the changes waiting, or dropped: some were dropped, and
// the page must read the list again.
func (s *sub) take() (cs []change, dropped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, dropped = s.q, s.drop
	s.q, s.drop = nil, false
	return cs, dropped
}

func newHub(store journal.Store, interval time.Duration) *hub {
	return &hub{store: store, interval: interval, subs: make(map[*sub]struct{})}
}

func (h *hub) subscribe() *sub {
	s := &sub{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[s] = struct{}{}
	if !h.running && !h.closed {
		h.running = true
		h.done = make(chan struct{})
		go h.watch(h.done)
	}
	return s
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// close stops the watcher and waits for it.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	done := h.done
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

// watch reads the journal every interval until nobody subscribes or the
// hub closes.
func (h *hub) watch(done chan struct{}) {
	defer close(done)
	known := map[key]journal.Task{}
	troubled := false
	timer := time.NewTimer(0)
	defer timer.Stop()
	for range timer.C {
		h.mu.Lock()
		if len(h.subs) == 0 || h.closed {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		changed, next, err := h.poll(ctx, known)
		cancel()
		switch {
		case err != nil && !troubled:
			troubled = true
			h.broadcast([]change{{note: true, trouble: "the journal cannot be read now: " + err.Error() + "; the list shows what it last read, and goes on when the journal answers"}})
		case err == nil:
			if troubled {
				troubled = false
				h.broadcast([]change{{note: true}}) // cleared: the page hides its note
			}
			known = next
			h.broadcast(changed)
		}
		timer.Reset(h.interval)
	}
}

type key struct{ session, id string }

// poll reads what may have changed since known (the tasks unfinished, or
// created within recentWindow, at the last poll) and returns the changed
// tasks and the new known set, which is bounded by those tasks.
func (h *hub) poll(ctx context.Context, known map[key]journal.Task) ([]change, map[key]journal.Task, error) {
	next := make(map[key]journal.Task, len(known))
	var read []journal.Task
	for _, f := range []journal.TaskFilter{{State: journal.Running}, {State: journal.Queued}, {Since: time.Now().Add(-recentWindow)}} {
		ts, err := h.store.Tasks(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		read = append(read, ts...)
	}
	var changed []change
	for _, t := range read {
		k := key{t.Session, t.ID}
		if _, dup := next[k]; dup {
			continue
		}
		next[k] = t
		if old, ok := known[k]; !ok {
			changed = append(changed, change{Task: t})
		} else if differ(old, t) {
			changed = append(changed, change{Task: t, prev: &old})
		}
	}
	// Those that left both sets finished (or were orphaned): read them.
	for k, old := range known {
		if _, ok := next[k]; ok || old.State.Finished() {
			continue
		}
		t, err := h.store.Task(ctx, k.session, k.id)
		if err != nil {
			continue // gone from the journal: nothing to show
		}
		if differ(old, t) {
			changed = append(changed, change{Task: t, prev: &old})
		}
	}
	return changed, next, nil
}

// differ says whether a task changed in what the list shows.
func differ(a, b journal.Task) bool {
	exit := func(t journal.Task) int {
		if t.ExitCode == nil {
			return -1 << 31
		}
		return *t.ExitCode
	}
	return a.State != b.State || !a.Started.Equal(b.Started) || !a.Finished.Equal(b.Finished) || exit(a) != exit(b) ||
		a.LogPath != b.LogPath || a.Error != b.Error || a.Label != b.Label || a.Hostname != b.Hostname || a.Usage != b.Usage ||
		!slices.Equal(a.Ports, b.Ports) // recorded just after the task's start
}

func (h *hub) broadcast(cs []change) {
	if len(cs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		for _, c := range cs {
			s.put(c)
		}
	}
}
