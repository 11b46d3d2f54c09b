package mcpserver

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/offstage/offstage/task"
)

// deliverUnder runs a call under hold's ctx for key that delivers one
// finished result, and returns the result's id and the call's done.
func deliverUnder(t *testing.T, a *answers, v *task.View, key string) (string, func()) {
	t.Helper()
	id, err := v.Spawn(task.Spec{Kind: "shell", Label: "a result"}, func(context.Context, *task.Handle) (string, error) { return "ok", nil })
	if err != nil {
		t.Fatal(err)
	}
	finished, _ := v.Done(id)
	<-finished
	ctx, done := a.hold(t.Context(), map[string]any{requestMeta: key})
	if got, err := v.Wait(ctx, []string{id}, task.All); err != nil || len(got.Done) != 1 {
		t.Fatalf("Wait(%s) = %+v, %v", id, got, err)
	}
	return id, done
}

func delivered(t *testing.T, v *task.View, id string) bool {
	t.Helper()
	info, err := v.Info(id)
	if err != nil {
		t.Fatal(err)
	}
	return info.Delivered
}

// Over HTTP the POST's end may come before its call returns (the client
// went while the call waited), after it (the answer was written, or its
// write failed), or never reach a call the SDK refused; and a key the
// client wrote itself is none of the transport's.
func TestHTTPAnswersInEveryOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := task.New(t.Context(), task.Options{})
		defer tb.Close(context.Background())
		v := tb.View("")
		a := newHTTPAnswers()

		// Written after the call returned: delivered.
		key := a.register()
		id, done := deliverUnder(t, a, v, key)
		done()
		a.sent(key, true)
		if !delivered(t, v, id) {
			t.Errorf("written: %s undelivered", id)
		}

		// Its write failed after the call returned: taken back.
		key = a.register()
		id, done = deliverUnder(t, a, v, key)
		done()
		a.sent(key, false)
		if delivered(t, v, id) {
			t.Errorf("write failed: %s still delivered", id)
		}

		// The POST ended (the client went) before the call returned:
		// taken back when it returns.
		key = a.register()
		id, done = deliverUnder(t, a, v, key)
		a.sent(key, false)
		if !delivered(t, v, id) {
			t.Errorf("call still running: %s undelivered before it returned", id)
		}
		done()
		if delivered(t, v, id) {
			t.Errorf("lost before the call returned: %s still delivered", id)
		}
		if len(a.posts) != 0 || len(a.held) != 0 {
			t.Errorf("left behind: posts %v, held %v", a.posts, a.held)
		}

		// A call that delivered nothing leaves nothing, whichever of its
		// return and its POST's lost end comes first (an outsider's
		// finding: each left an entry for the session's life, and 4096
		// of them turned the tracking off).
		for _, lostFirst := range []bool{true, false} {
			key := a.register()
			_, done := a.hold(t.Context(), map[string]any{requestMeta: key})
			if lostFirst {
				a.sent(key, false)
				done()
			} else {
				done()
				a.sent(key, false)
			}
			if len(a.posts) != 0 || len(a.held) != 0 {
				t.Errorf("an empty call, its POST lost first %v: left posts %v, held %v", lostFirst, a.posts, a.held)
			}
		}

		// A key the client wrote itself, unstamped: counted at return.
		// The transport's keys are random: none can be named ahead.
		if k1, k2 := a.register(), a.register(); k1 == k2 || len(k1) < 32 {
			t.Errorf("keys %q and %q: want random ones", k1, k2)
		}
		a.posts = make(map[string]postState)
		id, done = deliverUnder(t, a, v, "h1")
		done()
		if !delivered(t, v, id) || len(a.held) != 0 {
			t.Errorf("a key of the client's: %s delivered %v, held %v", id, delivered(t, v, id), a.held)
		}

		// Bounded: past maxPosts calls in flight, no more are stamped;
		// the lost answer of a call that never began (the SDK refused
		// it) makes room for the next.
		never := a.register()
		a.sent(never, false)
		var last string
		for i := len(a.posts); i < maxPosts; i++ {
			if last = a.register(); last == "" {
				t.Fatalf("register refused at %d keys, want %d", i, maxPosts)
			}
		}
		if _, ok := a.posts[never]; !ok {
			t.Fatalf("the lost key was dropped before the bound")
		}
		if k := a.register(); k == "" {
			t.Errorf("register at %d keys, one lost: refused, want the lost one dropped", maxPosts)
		}
		if _, ok := a.posts[never]; ok {
			t.Errorf("the lost key was kept past the bound")
		}
		if k := a.register(); k != "" {
			t.Errorf("register at %d calls in flight = %q, want none", maxPosts, k)
		}
		a.sent(last, true)
		if a.register() == "" {
			t.Errorf("register refused once a call was told of")
		}
	})
}

// isResponse tells the answer on a POST's stream from what the SDK sends
// before it, whatever the id.
func TestIsResponse(t *testing.T) {
	for _, c := range []struct {
		event string
		want  bool
	}{
		{"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n", true},
		{"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":-3,\"error\":{\"code\":1}}\n\n", true},
		{`{"jsonrpc":"2.0","id":"a\",\"result\":x","result":{}}`, true},
		{`{"jsonrpc":"2.0","id":"a\\","result":{}}`, true},
		{"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"id\":1,\"result\":2}}\n\n", false},
		{"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"elicitation/create\",\"params\":{}}\n\n", false},
		{`{"jsonrpc":"2.0","id":"x\",\"result\":","method":"m"}`, false},
		{`{"jsonrpc":"2.0","id":"unterminated`, false},
		{"", false},
	} {
		if got := isResponse([]byte(c.event)); got != c.want {
			t.Errorf("isResponse(%q) = %v, want %v", c.event, got, c.want)
		}
	}
}

// blockingWriter takes each write only when release is closed.
type blockingWriter struct{ release chan struct{} }

func (w blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	return len(p), nil
}

// Regression: the relay can pass an answer on, and say so, before the
// supervisor's write of it returns; Passed cut the count to what was
// written then, and with no ack after it (the client died), the answer
// the client had read was taken back. A write under way counts.
func TestAnAckThatComesBeforeTheWriteReturnsCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRelayWriter(blockingWriter{release: make(chan struct{})})
		answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")
		wrote := make(chan struct{})
		go func() {
			r.Write(answer)
			close(wrote)
		}()
		synctest.Wait() // the write is under way
		r.Passed(int64(len(answer)) + 10)
		close(r.w.(blockingWriter).release)
		<-wrote
		var passed, told bool
		r.reached(int64(len(answer)), func(p bool) { passed, told = p, true })
		if !told || !passed {
			t.Errorf("the answer the relay said it passed on: told %v, passed %v; want passed", told, passed)
		}
		r.Passed(1 << 40) // past what was ever written: the relay's error, taken as far as true
		if r.passed != int64(len(answer)) {
			t.Errorf("passed = %d after a count past what was written, want %d", r.passed, len(answer))
		}
		r.Gone()
	})
}
