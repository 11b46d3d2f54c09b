package mcpserver

import (
	"context"
	"strconv"
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
	// overwrites whatever a peer wrote under requestMeta): the keys it
	// stamped on tools/call POSTs not yet told of (false), or told of as
	// lost while their call had not returned, or never began (true). A
	// key it did not stamp (a peer's own) holds nothing.
	posts  map[string]bool // guarded by mu
	serial uint64          // guarded by mu: the last key stamped
}

func newAnswers() *answers { return &answers{held: make(map[string]*task.Receipt)} }

// newHTTPAnswers is newAnswers for a transport that stamps its requests
// with register.
func newHTTPAnswers() *answers {
	return &answers{held: make(map[string]*task.Receipt), posts: make(map[string]bool)}
}

// maxPosts bounds the tools/call POSTs of a session tracked at once:
// past it, a call counts what it delivers when it returns, as over a
// transport that cannot tell. Calls in flight hold their entries, and so
// do lost answers of calls the SDK refused without running them (an
// unknown tool, arguments that do not fit its schema) until the session
// ends.
const maxPosts = 4096

// register returns a new key for a tools/call POST to stamp its request
// with, or "" when maxPosts are tracked already.
func (a *answers) register() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.posts) >= maxPosts {
		return ""
	}
	a.serial++
	key := "h" + strconv.FormatUint(a.serial, 10)
	a.posts[key] = false
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
			return
		}
		a.mu.Lock()
		if a.posts != nil && a.posts[key] { // its POST ended without it: lost
			delete(a.posts, key)
			a.mu.Unlock()
			rc.Return()
			return
		}
		old := a.held[key]
		a.held[key] = rc
		a.mu.Unlock()
		if old != nil { // its answer was never told of: it was not written
			old.Return()
		}
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
	if a.posts != nil {
		if rc == nil && !written {
			// The call has not returned (the POST ended as the client
			// went), or never ran: what it delivers later goes nowhere.
			a.posts[key] = true
		} else {
			delete(a.posts, key)
		}
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
		a.posts = make(map[string]bool)
	}
	a.mu.Unlock()
	var back []string
	for _, rc := range held {
		back = append(back, rc.Return()...)
	}
	return back
}
