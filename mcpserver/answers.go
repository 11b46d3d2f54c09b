package mcpserver

import (
	"context"
	"sync"

	"github.com/offstage/offstage/task"
)

// requestMeta is the member of a tools/call's _meta under which the stdio
// transport writes the request's own key (rpcline.Options.Stamp): the
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
// answer carrying them was written whole (rpcline.Options.Sent): then
// they stay delivered, or are taken back, undelivered again, for a later
// wait, a resume or an attach. What the transport never tells of (the SDK
// writes nothing once its input has ended) is taken back when the session
// ends: by then every answer the SDK wrote was told. A nil *answers holds
// nothing: the transport cannot tell (HTTP: the SDK's streamable handler
// writes the answer and keeps what became of it to itself).
type answers struct {
	mu   sync.Mutex
	held map[string]*task.Receipt // guarded by mu: request key → the results its answer carries
}

func newAnswers() *answers { return &answers{held: make(map[string]*task.Receipt)} }

// hold returns the ctx a tool call runs under, which holds what it
// delivers, and done, to call once the call has returned and before its
// answer is written. Without a stamp (another transport, a call that did
// not come through the guard) it holds nothing.
func (a *answers) hold(ctx context.Context, meta map[string]any) (_ context.Context, done func()) {
	key, _ := meta[requestMeta].(string)
	if a == nil || key == "" {
		return ctx, func() {}
	}
	ctx, rc := task.WithReceipt(ctx)
	return ctx, func() {
		if len(rc.IDs()) == 0 {
			rc.Commit()
			return
		}
		a.mu.Lock()
		old := a.held[key]
		a.held[key] = rc
		a.mu.Unlock()
		if old != nil { // its answer was never told of: it was not written
			old.Return()
		}
	}
}

// sent is rpcline.Options.Sent: the answer to the request key was
// written whole, or not.
func (a *answers) sent(key string, written bool) {
	a.mu.Lock()
	rc := a.held[key]
	delete(a.held, key)
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
	a.mu.Unlock()
	var back []string
	for _, rc := range held {
		back = append(back, rc.Return()...)
	}
	return back
}
