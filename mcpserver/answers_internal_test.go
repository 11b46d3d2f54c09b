package mcpserver

import (
	"context"
	"strconv"
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

		// A key the client wrote itself, unstamped: counted at return.
		id, done = deliverUnder(t, a, v, "h999")
		done()
		if !delivered(t, v, id) || len(a.held) != 0 {
			t.Errorf("a key of the client's: %s delivered %v, held %v", id, delivered(t, v, id), a.held)
		}

		// Bounded: past maxPosts keys in flight, no more are stamped.
		for i := len(a.posts); i < maxPosts; i++ {
			if a.register() == "" {
				t.Fatalf("register refused at %d keys, want %d", i, maxPosts)
			}
		}
		if k := a.register(); k != "" {
			t.Errorf("register at %d keys = %q, want none", maxPosts, k)
		}
		a.sent("h"+strconv.FormatUint(a.serial, 10), true)
		if a.register() == "" {
			t.Errorf("register refused once a key was told of")
		}
	})
}
