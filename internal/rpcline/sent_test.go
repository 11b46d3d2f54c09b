package rpcline_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/internal/rpcline"
)

// stampTools stamps tools/call requests, as mcpserver does.
func stampTools(method string) string {
	if method == "tools/call" {
		return "x/request"
	}
	return ""
}

// The stamp carries the request's own key (each Reader numbers its
// requests from 1), replaces what a peer wrote under its name (spelled
// with an escape, or twice), keeps the rest, and leaves alone what it
// cannot stamp.
func TestStampWritesTheRequestsKeyIntoMeta(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a"}}`, `{"_meta":{"x/request":"1"},"name":"a"}`},
		{`{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"a","_meta":{"progressToken":1,"x/request":"s1"}}}`, `{"_meta":{"progressToken":1,"x/request":"1"},"name":"a"}`},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"_meta":{"x/request":"n1"},"\u005fmeta":{"x\/request":"n2"},"name":"<a>"}}`, `{"_meta":{"x/request":"1"},"name":"<a>"}`},
		{`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":"odd"}}`, `{"_meta":"odd"}`},
		{`{"jsonrpc":"2.0","id":10,"method":"tools/call"}`, ``},
		{`{"jsonrpc":"2.0","id":11,"method":"ping","params":{}}`, `{}`},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{}}`, `{}`},
	} {
		passed, replies := filter([]byte(tc.line+"\n"), rpcline.Options{MaxLine: 1 << 10, Stamp: stampTools})
		if len(replies) != 0 {
			t.Errorf("%s: answered %s", tc.line, replies)
			continue
		}
		var m struct{ Params json.RawMessage }
		if err := json.Unmarshal(passed, &m); err != nil {
			t.Fatalf("%s: passed %s: %v", tc.line, passed, err)
		}
		if string(m.Params) != tc.want {
			t.Errorf("%s: params %s, want %s", tc.line, m.Params, tc.want)
		}
	}
}

// sends records what Options.Sent is told.
type sends struct {
	mu   sync.Mutex
	told []string
}

func (s *sends) sent(key string, written bool, end int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if written {
		s.told = append(s.told, fmt.Sprintf("%s written to %d", key, end))
	} else {
		s.told = append(s.told, key+" lost")
	}
}

func (s *sends) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.told, ", ")
}

// A response written whole is told as written, with where it ends in the
// output (every message written before it counts); one whose write failed
// (the client closed its end: a broken pipe) as lost; a message that
// answers no request passed on, not at all.
func TestSentTellsWhetherTheAnswerWasWritten(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	var s sends
	in := strings.NewReader(ping + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n")
	r, w := rpcline.New(in, pw, rpcline.Options{MaxLine: 1 << 10, Sent: s.sent})
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\n"))
	w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
	w.Write([]byte(`{"jsonrpc":"2.0","id":5,"result":{}}` + "\n")) // answers nothing passed on
	buf := make([]byte, 1<<10)
	pr.Read(buf)
	pr.Close()
	if _, err := w.Write([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n")); err == nil {
		t.Fatal("write to a closed pipe succeeded")
	}
	end := len(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`+"\n") + len(`{"jsonrpc":"2.0","id":1,"result":{}}`+"\n")
	if got, want := s.String(), fmt.Sprintf("1 written to %d, 2 lost", end); got != want {
		t.Errorf("Sent told %q, want %q", got, want)
	}
}

// A response to a request the guard abandoned at the end of input is
// dropped, and told as lost.
func TestSentTellsAnAbandonedAnswerLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		var s sends
		r, w := rpcline.New(strings.NewReader(ping+"\n"), &out, rpcline.Options{MaxLine: 1 << 10, Drain: time.Second, Sent: s.sent})
		io.ReadAll(r)
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
		if got, want := s.String(), "1 lost"; got != want {
			t.Errorf("Sent told %q, want %q", got, want)
		}
	})
}

// An answer whose write was under way when the end of input gave up on
// the requests (it skips the answers being written) is still told of
// once its write ends: a server that took that as lost would deliver its
// results twice.
func TestSentTellsAnAnswerWrittenAcrossTheEndOfInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &stuckWriter{release: make(chan struct{})}
		var s sends
		r, w := rpcline.New(strings.NewReader(ping+"\n"), out, rpcline.Options{MaxLine: 1 << 10, Drain: time.Second, Sent: s.sent})
		read := make(chan struct{})
		go func() {
			io.ReadAll(r)
			close(read)
		}()
		synctest.Wait()
		written := make(chan struct{})
		go func() {
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")) // stuck
			close(written)
		}()
		<-read // the drain gave up after its grace
		close(out.release)
		<-written
		if got, want := s.String(), "1 written to 37"; got != want {
			t.Errorf("Sent told %q, want %q", got, want)
		}
	})
}

// A peer may send an id again once the answer to the first request with
// it is being written; each request keeps a key of its own, so each
// answer is told of as its own (an outsider's finding: keyed by the id,
// the second request's results were committed by the first answer's
// write, and the first's taken back though its answer went out: one
// result delivered twice).
func TestSentTellsAnIDUsedAgainApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inR, inW := io.Pipe()
		out := &stuckWriter{release: make(chan struct{})}
		var s sends
		r, w := rpcline.New(inR, out, rpcline.Options{MaxLine: 1 << 10, Stamp: stampTools, Sent: s.sent})
		lines := make(chan string, 2)
		go func() {
			buf := make([]byte, 1<<10)
			for {
				n, err := r.Read(buf)
				if err != nil {
					close(lines)
					return
				}
				lines <- string(buf[:n])
			}
		}()
		call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}` + "\n"
		io.WriteString(inW, call)
		first := <-lines
		answered := make(chan struct{})
		go func() {
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")) // stuck: the client reads nothing yet
			close(answered)
		}()
		synctest.Wait()
		io.WriteString(inW, call) // the same id, its first answer under way
		second := <-lines
		if !strings.Contains(first, `"x/request":"1"`) || !strings.Contains(second, `"x/request":"2"`) {
			t.Fatalf("stamped %s and %s, want keys 1 and 2", first, second)
		}
		close(out.release)
		<-answered
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
		inW.Close()
		synctest.Wait()
		if got, want := s.String(), "1 written to 37, 2 written to 74"; got != want {
			t.Errorf("Sent told %q, want %q", got, want)
		}
	})
}
