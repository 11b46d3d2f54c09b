package acpserver

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/rpcline"
	"github.com/offstage/offstage/provider/scripted"
)

// testSession is a session's output side alone, writing to out.
func testSession(out *writes) *session {
	_, w := rpcline.New(strings.NewReader(""), out, rpcline.Options{MaxLine: 1 << 10})
	srv := &server{ctx: context.Background(), out: w, cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	return blankSession(srv, "s-1")
}

// TestChunksJoined: message or thought chunks added one after the other
// go out as one chunk of their joined text (up to coalesceBytes), each
// line as appendUpdate writes the SDK's update for it; the lines are
// held until they are flushed, and written at once.
func TestChunksJoined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // no time passes: no delayed flush
		var out writes
		s := testSession(&out)
		long := strings.Repeat("a", coalesceBytes-1)
		s.message("Nothing")
		s.message(" is \u2028")
		s.thought("hmm")
		s.thought("…")
		s.message(" running.")
		s.update(acp.UpdateUserMessageText("x"))
		s.message(long)
		s.message("b")
		s.message("c")
		s.thought("\xff")
		s.flush(context.Background())
		var want []byte
		for _, u := range []acp.SessionUpdate{
			acp.UpdateAgentMessageText("Nothing is \u2028"),
			acp.UpdateAgentThoughtText("hmm…"),
			acp.UpdateAgentMessageText(" running."),
			acp.UpdateUserMessageText("x"),
			acp.UpdateAgentMessageText(long + "b"),
			acp.UpdateAgentMessageText("c"),
			acp.UpdateAgentThoughtText("\xff"),
		} {
			want, _ = appendUpdate(want, "s-1", &u)
		}
		if d := cmp.Diff([]string{string(want)}, out.all()); d != "" {
			t.Errorf("writes (-want +got):\n%s", d)
		}
	})
}

// TestUpdatesGoOutWithinFlushDelay: an update added while the turn goes
// on (a tool call's card before the tool runs long, a model's stream)
// reaches the client flushDelay later at the latest, with those added
// meanwhile, without the turn's end.
func TestUpdatesGoOutWithinFlushDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out writes
		s := testSession(&out)
		s.update(acp.UpdateUserMessageText("x"))
		time.Sleep(flushDelay / 2)
		s.message("y")
		synctest.Wait()
		if got := out.all(); len(got) != 0 {
			t.Fatalf("written before flushDelay: %q", got)
		}
		time.Sleep(flushDelay / 2)
		synctest.Wait()
		var want []byte
		for _, u := range []acp.SessionUpdate{acp.UpdateUserMessageText("x"), acp.UpdateAgentMessageText("y")} {
			want, _ = appendUpdate(want, "s-1", &u)
		}
		if d := cmp.Diff([]string{string(want)}, out.all()); d != "" {
			t.Errorf("writes flushDelay after the first update (-want +got):\n%s", d)
		}
		close(s.done)
	})
}

// TestAFullBufferIsWrittenByItsAdder: past maxBuffered, the goroutine
// that adds an update writes what the session holds itself (at the
// client's pace), without waiting for the delayed flush.
func TestAFullBufferIsWrittenByItsAdder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // no time passes: no delayed flush
		var out writes
		s := testSession(&out)
		word := strings.Repeat("w", 1000)
		for range maxBuffered / len(word) {
			s.update(acp.UpdateUserMessageText(word))
		}
		if got := out.all(); len(got) != 1 || len(got[0]) < maxBuffered {
			t.Errorf("after %d bytes of updates, writes = %d, want one of them all", maxBuffered, len(got))
		}
		close(s.done)
	})
}

// TestAClosedSessionHoldsBoundedUpdates: once a session is closed with a
// write stuck (a client that reads nothing holds the token), updates its
// goroutines still add past maxBuffered are dropped, not held: nobody
// would write them, and the buffer grew without bound.
func TestAClosedSessionHoldsBoundedUpdates(t *testing.T) {
	var out writes
	s := testSession(&out)
	s.out.token <- struct{}{} // the write under way, stuck
	close(s.done)
	word := strings.Repeat("w", 1000)
	for range 4 * maxBuffered / len(word) {
		s.update(acp.UpdateUserMessageText(word))
		s.message(word)
	}
	s.out.mu.Lock()
	held := len(s.out.buf) + len(s.out.joined)
	s.out.mu.Unlock()
	if held > maxBuffered+2*len(word)+512 {
		t.Errorf("a closed session with a stuck write holds %d bytes of updates, want at most about %d", held, maxBuffered)
	}
	if got := out.all(); len(got) != 0 {
		t.Errorf("written while the token was held: %d writes", len(got))
	}
}

// writes records each write.
type writes struct {
	mu   sync.Mutex
	each []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.each = append(w.each, string(p))
	return len(p), nil
}

func (w *writes) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.each
}

// TestGiveWaitsOnlyForATurnEnding: a prompt that comes while the turn
// before it is still writing its response waits for the Run loop to read
// it (it went the long way, session.prompt, one prompt in eight on two
// cores), at most handOverWait; while no prompted turn has just ended (an
// autonomous turn runs) it does not wait at all.
func TestGiveWaitsOnlyForATurnEnding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := testSession(new(writes))
		readAfter := func(d time.Duration) chan string {
			got := make(chan string, 1)
			go func() {
				time.Sleep(d)
				select {
				case line := <-s.input:
					got <- line
				case <-time.After(time.Second):
					got <- ""
				}
			}()
			return got
		}
		give := func(text string) (bool, time.Duration) {
			start := time.Now()
			ok := s.give(text)
			return ok, time.Since(start)
		}

		got := readAfter(time.Millisecond) // an autonomous turn's loop
		if ok, waited := give("a"); ok || waited != 0 {
			t.Errorf("give while no prompted turn ended = %v after %v; want false at once", ok, waited)
		}
		<-got

		s.between.Store(true) // a prompted turn ended: its goroutine is on its way back
		got = readAfter(time.Millisecond)
		if ok, waited := give("b"); !ok || waited != time.Millisecond {
			t.Errorf("give as a turn ends = %v after %v; want true after 1ms", ok, waited)
		}
		if line := <-got; line != "b" {
			t.Errorf("the loop read %q, want b", line)
		}

		got = readAfter(2 * handOverWait) // a client that reads nothing holds the write
		if ok, waited := give("c"); ok || waited != handOverWait {
			t.Errorf("give to a loop that comes late = %v after %v; want false after %v", ok, waited, handOverWait)
		}
		<-got
	})
}

// TestACancelledPromptNeverRuns: a prompt whose request was cancelled
// (by the prompt after it, say) while it waited on its goroutine never
// reaches the model, though the session is free and its Run loop waits
// for input: it once took the session and, one time in two, handed its
// text over (two prompts sent at once to a new session then ran in the
// wrong order, the stale one last: an outsider's finding).
func TestACancelledPromptNeverRuns(t *testing.T) {
	var out writes
	s := testSession(&out)
	s.srv.cfg.PromptWait = time.Hour
	model, err := scripted.Parse([]byte(`{"turns": []}`)) // a turn that runs fails: nothing is scripted
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.sess, err = agent.New(ctx, agent.Config{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	s.start(ctx)
	defer func() {
		s.stop(nil)
		s.sess.Close(ctx)
	}()
	stale, cancel := context.WithCancel(ctx)
	cancel()
	for i := range 40 {
		resp, err := s.prompt(stale, "stale")
		if err != nil || resp.StopReason != acp.StopReasonCancelled {
			t.Fatalf("prompt %d, cancelled before it ran: %+v, %v; want cancelled", i, resp, err)
		}
	}
	if h := s.sess.History(); len(h) != 0 {
		t.Errorf("the model's history holds %d messages, want none: %+v", len(h), h)
	}
}
