package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/offstage/offstage/task"
)

// requestMeta is the member of a tools/call's _meta under which the
// transport writes the request's own key (stdio's guard,
// rpcline.Options.Stamp; the HTTP handler, stampPost): the
// SDK hides a request's id from its handler, and the handler must know
// which answer carries the results it delivered. The key is not the id,
// which a client may use again once the first answer is being written.
const requestMeta = "dev.offstage/request"

// stampToolCalls stamps the requests whose answers may carry results.
func stampToolCalls(method string) string {
	if method == "tools/call" {
		return requestMeta
	}
	return ""
}

// answers holds, by request key, the results tool calls delivered (a
// task_wait's, a foreground bash's) until the transport tells whether the
// answer carrying them was written whole (rpcline.Options.Sent over
// stdio, the POST's end over HTTP): then they stay delivered, or are
// taken back, undelivered again, for a later wait, a resume or an
// attach. What the transport never tells of (the SDK writes nothing once
// its input has ended) is taken back when the session ends: by then
// every answer the SDK wrote was told. A nil *answers holds nothing: the
// transport cannot tell (the SDK's own, an application's).
type answers struct {
	mu   sync.Mutex
	held map[string]*task.Receipt // guarded by mu: request key → the results its answer carries

	// posts is the HTTP transport's (nil over stdio, whose guard
	// overwrites whatever a peer wrote under requestMeta): the state of
	// each key it stamped on a tools/call POST, until both the call's
	// return and the POST's end were told. A key it did not stamp (a
	// peer's own) holds nothing; its keys are random, so that a peer
	// cannot name another POST's.
	posts map[string]postState // guarded by mu
	over  bool                 // guarded by mu: returnAll ran (the session ended)
	quiet chan struct{}        // guarded by mu: closed once no POST is in flight (calm), if asked for
}

// postState is where a stamped tools/call stands.
type postState uint8

const (
	postPending  postState = iota // neither its call's return nor its POST's end told
	postReturned                  // its call returned (what it delivered, if anything, is held); its POST not yet ended
	postLost                      // its POST ended, its answer unwritten, before its call returned (or began)
)

func newAnswers() *answers { return &answers{held: make(map[string]*task.Receipt)} }

// newHTTPAnswers is newAnswers for a transport that stamps its requests
// with register.
func newHTTPAnswers() *answers {
	return &answers{held: make(map[string]*task.Receipt), posts: make(map[string]postState)}
}

// maxPosts bounds the tools/call POSTs of a session tracked at once.
// Calls in flight hold their entries; so does the lost answer of a call
// the SDK refused without running it (an unknown tool, arguments that do
// not fit its schema), which register drops first when it needs room.
// Past the bound, a call counts what it delivers when it returns, as
// over a transport that cannot tell.
const maxPosts = 4096

// register returns a new key for a tools/call POST to stamp its request
// with, or "" when maxPosts calls are in flight.
func (a *answers) register() string {
	var b [16]byte
	rand.Read(b[:])
	key := hex.EncodeToString(b[:])
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.posts) >= maxPosts {
		for k, st := range a.posts {
			if st == postLost {
				delete(a.posts, k)
				break
			}
		}
		if len(a.posts) >= maxPosts {
			return ""
		}
	}
	a.posts[key] = postPending
	return key
}

// hold returns the ctx a tool call runs under, which holds what it
// delivers, and done, to call once the call has returned and before its
// answer is written. Without a stamp of the transport's (another
// transport, a call that did not come through the guard, a key a peer
// wrote itself over HTTP) it holds nothing.
func (a *answers) hold(ctx context.Context, meta map[string]any) (_ context.Context, done func()) {
	key, _ := meta[requestMeta].(string)
	if a == nil || key == "" || !a.stamped(key) {
		return ctx, func() {}
	}
	ctx, rc := task.WithReceipt(ctx)
	return ctx, func() {
		if len(rc.IDs()) == 0 {
			rc.Commit()
			a.returned(key)
			return
		}
		a.mu.Lock()
		if a.posts != nil {
			switch st, ok := a.posts[key]; {
			case !ok && !a.over: // its answer told of as written before it returned: cannot happen
				a.mu.Unlock()
				rc.Commit()
				return
			case !ok || st == postLost: // its POST ended without it, or the session did
				delete(a.posts, key)
				a.mu.Unlock()
				rc.Return()
				return
			}
			a.posts[key] = postReturned
		}
		old := a.held[key]
		a.held[key] = rc
		a.mu.Unlock()
		if old != nil { // its answer was never told of: it was not written
			old.Return()
		}
	}
}

// returned notes that the call stamped key returned delivering nothing.
func (a *answers) returned(key string) {
	if a.posts == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch st, ok := a.posts[key]; {
	case !ok:
	case st == postLost:
		delete(a.posts, key)
	default:
		a.posts[key] = postReturned
	}
}

// stamped says whether key is one the transport stamped.
func (a *answers) stamped(key string) bool {
	if a.posts == nil {
		return true // the guard overwrites any a peer wrote
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.posts[key]
	return ok
}

// sent is rpcline.Options.Sent, and what an HTTP POST tells as it ends:
// the answer to the request key was written whole, or not.
func (a *answers) sent(key string, written bool) {
	a.mu.Lock()
	rc := a.held[key]
	delete(a.held, key)
	if st, ok := a.posts[key]; ok {
		if st == postPending && !written {
			// The call has not returned (the POST ended as the client
			// went), or never ran: what it delivers later goes nowhere.
			a.posts[key] = postLost
		} else {
			delete(a.posts, key)
		}
	}
	if a.quiet != nil && a.inFlightLocked() == 0 {
		close(a.quiet)
		a.quiet = nil
	}
	a.mu.Unlock()
	switch {
	case rc == nil:
	case written:
		rc.Commit()
	default:
		rc.Return()
	}
}

// calm returns a channel closed once no tools/call POST the HTTP
// transport stamped is in flight (each POST's end told, sent); nil when
// none is.
func (a *answers) calm() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inFlightLocked() == 0 {
		return nil
	}
	if a.quiet == nil {
		a.quiet = make(chan struct{})
	}
	return a.quiet
}

// inFlightLocked counts the stamped POSTs whose end is not told yet.
func (a *answers) inFlightLocked() int {
	n := 0
	for _, st := range a.posts {
		if st != postLost {
			n++
		}
	}
	return n
}

// returnAll takes back what every answer not told of carried, and returns
// the ids of the results made undelivered. It is called once the session
// has ended, when no answer is being written any more.
func (a *answers) returnAll() []string {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	held := a.held
	a.held = make(map[string]*task.Receipt)
	if a.posts != nil {
		a.posts = make(map[string]postState)
	}
	a.over = true
	a.mu.Unlock()
	var back []string
	for _, rc := range held {
		back = append(back, rc.Return()...)
	}
	return back
}
