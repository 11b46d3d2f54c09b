package acpserver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/task"
)

// Keeper keeps sessions across connections, for a process that outlives
// its clients (offstage serve). With Config.Keep, a connection that ends
// detaches its sessions instead of closing them: their tasks, shells and
// the editor's MCP servers go on, and no turn runs. A later connection's
// session/load of one attaches to it, live: its conversation is replayed
// from the session itself, and the results its model has not seen stay
// undelivered in its task table until the next prompt's turn takes them,
// once. session/close, or Keeper.Close, ends it. One connection at a time
// holds a session. Safe for concurrent use; make one with NewKeeper.
type Keeper struct {
	ctx context.Context // every kept session's life

	mu     sync.Mutex
	all    map[acp.SessionId]*kept // guarded by mu
	closed error                   // guarded by mu: Close's cause, once called
}

// kept is what of a session outlives a connection.
type kept struct {
	sess  *agent.Session
	mcp   []*mcpServer
	cur   atomic.Pointer[session] // the connection's session driving it; nil while detached
	quiet time.Time               // guarded by Keeper.mu: since when it has had no connection and no unfinished task (zero: not quiet)
	start time.Time               // guarded by Keeper.mu: when it was added
	left  time.Time               // guarded by Keeper.mu: when its last connection let it go (zero: never)
	ended error                   // guarded by Keeper.mu: CloseSession's cause, for a session a connection held then
}

// NewKeeper returns a Keeper whose sessions live as long as ctx (which
// should outlive every connection: Close ends them first, with its cause).
func NewKeeper(ctx context.Context) *Keeper {
	return &Keeper{ctx: ctx, all: make(map[acp.SessionId]*kept)}
}

// errKeeperClosed refuses a session once the keeper is closed.
var errKeeperClosed = errors.New("acpserver: the agent is stopping")

// permit is a kept session's permission check: the connection that holds
// it asks its client; with none, a call that needs asking is refused.
func (k *kept) permit(ctx context.Context, c agent.ToolCall) error {
	if s := k.cur.Load(); s != nil {
		return s.permit(ctx, c)
	}
	return errors.New("no editor is connected to ask for permission; the call was not run")
}

// add registers a new session, held by s.
func (k *Keeper) add(id acp.SessionId, kp *kept, s *session) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed != nil {
		return errKeeperClosed
	}
	kp.cur.Store(s)
	kp.start = time.Now()
	k.all[id] = kp
	return nil
}

// take hands the detached session id to a connection's new session s.
// ok is false when the keeper has no such session; err says why it
// cannot be taken (held by another connection, stopping).
func (k *Keeper) take(id acp.SessionId, s *session) (kp *kept, ok bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	kp, ok = k.all[id]
	switch {
	case !ok:
		return nil, false, nil
	case k.closed != nil:
		return nil, true, errKeeperClosed
	case kp.ended != nil:
		return nil, true, errors.New("it was closed (" + kp.ended.Error() + ")")
	case !kp.cur.CompareAndSwap(nil, s):
		return nil, true, errors.New("it is open on another connection; close that one first")
	}
	return kp, true, nil
}

// release detaches s from its kept session, which goes on without a
// connection; if the keeper was closed meanwhile, it ends now.
func (k *Keeper) release(id acp.SessionId, s *session) {
	k.mu.Lock()
	kp := k.all[id]
	if kp != nil && kp.cur.CompareAndSwap(s, nil) {
		kp.left = time.Now()
	}
	cause := k.closed
	if kp != nil && kp.ended != nil {
		cause = kp.ended
	}
	if cause != nil {
		delete(k.all, id)
	}
	k.mu.Unlock()
	if kp != nil && cause != nil {
		kp.sess.CloseCause(context.Background(), cause)
		closeMCP(kp.mcp)
	}
}

// forget removes a session that closed for good (session/close).
func (k *Keeper) forget(id acp.SessionId) {
	k.mu.Lock()
	delete(k.all, id)
	k.mu.Unlock()
}

// Close ends every session with cause (a task.EndError naming who
// stopped the agent): the detached ones here, each reaped (within 20 s,
// concurrently), the MCP servers closed; those a connection holds have
// their agent session closed with cause, and the rest when their
// connection ends. Later sessions are refused. Close may be called once.
func (k *Keeper) Close(cause error) error {
	k.mu.Lock()
	k.closed = cause
	var detached, held []*kept
	for id, kp := range k.all {
		if kp.cur.Load() == nil {
			detached = append(detached, kp)
			delete(k.all, id)
		} else {
			held = append(held, kp)
		}
	}
	k.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(detached)+len(held))
	for i, kp := range append(detached, held...) {
		wg.Go(func() {
			errs[i] = kp.sess.CloseCause(context.Background(), cause)
			if i < len(detached) {
				closeMCP(kp.mcp)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CloseIdle ends, with cause, the sessions that have had no connection
// and no unfinished task (queued or running) since at least idle before
// now, and starts the clock of those that just became so. Called now and
// then (offstage serve's idle policy), a session ends within idle and
// two calls' interval. It returns how many it ended.
func (k *Keeper) CloseIdle(now time.Time, idle time.Duration, cause error) int {
	k.mu.Lock()
	var ended []*kept
	for id, kp := range k.all {
		busy := kp.cur.Load() != nil || slices.ContainsFunc(kp.sess.Table().List(), func(i task.Info) bool { return !i.State.Finished() })
		switch {
		case busy:
			kp.quiet = time.Time{}
		case kp.quiet.IsZero():
			kp.quiet = now
		case now.Sub(kp.quiet) >= idle:
			delete(k.all, id)
			ended = append(ended, kp)
		}
	}
	k.mu.Unlock()
	for _, kp := range ended {
		kp.sess.CloseCause(context.Background(), cause)
		closeMCP(kp.mcp)
	}
	return len(ended)
}

// Kept is a session the keeper holds, as Sessions lists it.
type Kept struct {
	ID       string
	Attached bool      // a connection holds it
	Started  time.Time // when it was opened
	Left     time.Time // when its last connection let it go (zero: never)
	Tasks    []task.Info
}

// Sessions lists the sessions the keeper holds, attached or not (less
// those CloseSession closed), in no order.
func (k *Keeper) Sessions() []Kept {
	k.mu.Lock()
	out := make([]Kept, 0, len(k.all))
	sessions := make([]*agent.Session, 0, len(k.all))
	for id, kp := range k.all {
		if kp.ended == nil {
			out = append(out, Kept{ID: string(id), Attached: kp.cur.Load() != nil, Started: kp.start, Left: kp.left})
			sessions = append(sessions, kp.sess)
		}
	}
	k.mu.Unlock()
	for i, s := range sessions {
		out[i].Tasks = s.Table().List()
	}
	return out
}

// CloseSession ends the session id with cause (a task.EndError naming
// who closed it: offstage sessions close): its tasks end and its
// processes are reaped, within 20 s, and its MCP servers close. A session
// a connection holds is closed on that connection's side too: its turn
// stops and its later prompts are refused, saying it was closed, and its
// id is free there, so a session/load loads it from the journal. It
// blocks until that is done, and returns how many tasks were unfinished.
// ok is false when the keeper holds no session id.
func (k *Keeper) CloseSession(id string, cause error) (n int, ok bool, err error) {
	sid := acp.SessionId(id)
	k.mu.Lock()
	kp := k.all[sid]
	if kp == nil || kp.ended != nil {
		k.mu.Unlock()
		return 0, false, nil
	}
	kp.ended = cause // take refuses it from now on; a release lets it go
	held := kp.cur.Load()
	k.mu.Unlock()
	for _, i := range kp.sess.Table().List() {
		if !i.State.Finished() {
			n++
		}
	}
	if held != nil {
		// Its connection's side closes it (and the keeper forgets it), or,
		// if that connection was detaching meanwhile, release did.
		held.srv.closedUnder(sid, held, cause)
		return n, true, held.closeCause(cause)
	}
	k.mu.Lock()
	delete(k.all, sid)
	k.mu.Unlock()
	err = kp.sess.CloseCause(context.Background(), cause)
	closeMCP(kp.mcp)
	return n, true, err
}

// Len is how many sessions the keeper holds, attached or not.
func (k *Keeper) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.all)
}
