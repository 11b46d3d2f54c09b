package mcpserver_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/tools"
)

// httpSession serves a new Service over HTTP for the test's life and
// opens an initialised session on it, its client named name.
func httpSession(t *testing.T, cfg mcpserver.Config, name string) (*mcpserver.Service, *rawSession) {
	t.Helper()
	svc := newService(t, cfg)
	srv := httptest.NewServer(svc.HTTPHandler("s3cret", nil))
	t.Cleanup(srv.Close)
	s := &rawSession{t: t, url: srv.URL, token: "s3cret"}
	s.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+name+`","version":"1"}}`)
	s.notify("notifications/initialized")
	return svc, s
}

// TestHTTPAResultWhoseAnswerWasLostIsDeliveredAgain: a client whose
// connection drops while its task_wait waits (a timeout of its own, a
// network that failed) never reads the answer the wait then gives: the
// result it carried is undelivered again, and the next task_wait in the
// session delivers it. Before, over HTTP a result counted as delivered
// once task_wait returned, and one whose answer went nowhere was lost.
func TestHTTPAResultWhoseAnswerWasLostIsDeliveredAgain(t *testing.T) {
	_, s := httpSession(t, mcpserver.Config{}, "dropping")
	var started tools.BashOutput
	s.tool("bash", `{"command": "sleep 1; echo finished", "run_in_background": true}`, &started)

	// The wait whose connection drops before the shell ends.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url, strings.NewReader(`{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"task_wait","arguments":{"task_ids":["`+started.TaskID+`"],"timeout_seconds":30}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Mcp-Session-Id", s.id)
	if res, err := http.DefaultClient.Do(req); err == nil {
		buf := make([]byte, 1<<10)
		for {
			if _, err := res.Body.Read(buf); err != nil {
				break
			}
		}
		res.Body.Close()
	}
	time.Sleep(1500 * time.Millisecond) // the shell ended: the dropped wait returned with it

	var wait tools.WaitOutput
	s.tool("task_wait", `{"task_ids": ["`+started.TaskID+`"], "timeout_seconds": 5}`, &wait)
	if len(wait.Done) != 1 || wait.Done[0].ID != started.TaskID || !strings.Contains(wait.Done[0].Result, "finished") {
		t.Fatalf("the next task_wait = %+v, want %s's result, whose answer never reached the client", wait, started.TaskID)
	}
	// That answer went out: the result is delivered, once.
	var again tools.WaitOutput
	s.tool("task_wait", `{"task_ids": ["`+started.TaskID+`"], "timeout_seconds": 5}`, &again)
	if len(again.Done) != 0 || len(again.DeliveredBefore) != 1 || again.DeliveredBefore[0].ID != started.TaskID {
		t.Fatalf("a third task_wait = %+v, want %s delivered before", again, started.TaskID)
	}
}

// postFor posts body on session sid with its own connection, and reads
// the answer's stream until it holds stop (then closes the connection
// mid-stream, as a client that aborts its request once it has its
// answer) or until within passes (then the client gives up); "" stop
// reads it all.
func postFor(t *testing.T, url, sid, body, stop string, within time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Mcp-Session-Id", sid)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	var got strings.Builder
	buf := make([]byte, 4<<10)
	for {
		n, err := res.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil || stop != "" && strings.Contains(got.String(), stop) {
			return got.String()
		}
	}
}

// A client that aborts its request as soon as it has read the answer (a
// fetch aborted once its result is in) got the result again from its
// next wait in one round of ten (an outsider's finding): its going was
// judged after the SDK returned, not as the answer was written.
func TestHTTPAClientThatClosesOnItsAnswerGetsItOnce(t *testing.T) {
	_, s := httpSession(t, mcpserver.Config{}, "aborting")
	for i := range 20 {
		var x tools.BashOutput
		s.tool("bash", `{"command": "echo round `+strconv.Itoa(i)+`", "run_in_background": true}`, &x)
		got := postFor(t, s.url, s.id, `{"jsonrpc":"2.0","id":5000,"method":"tools/call","params":{"name":"task_wait","arguments":{"task_ids":["`+x.TaskID+`"],"timeout_seconds":5}}}`, `"id":5000`, 10*time.Second)
		if !strings.Contains(got, `\"done\":[{\"task_id\":\"`+x.TaskID) {
			t.Fatalf("round %d: task_wait = %q, want %s done", i, got, x.TaskID)
		}
		time.Sleep(20 * time.Millisecond) // its close reached the server
		var again tools.WaitOutput
		s.tool("task_wait", `{"task_ids": ["`+x.TaskID+`"], "timeout_seconds": 0}`, &again)
		if len(again.Done) != 0 {
			t.Fatalf("round %d: %s delivered again to a client that read it", i, x.TaskID)
		}
	}
}

// A wait whose client gave up and which then delivered nothing (it timed
// out) left its entry for the session's life (an outsider's finding):
// at 4096 of them the session stopped telling its answers, and lost
// results again.
func TestHTTPAbandonedWaitsLeaveNothingTracked(t *testing.T) {
	svc, s := httpSession(t, mcpserver.Config{}, "impatient")
	var y tools.BashOutput
	s.tool("bash", `{"command": "sleep 30", "run_in_background": true}`, &y)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			postFor(t, s.url, s.id, `{"jsonrpc":"2.0","id":`+strconv.Itoa(100+i)+`,"method":"tools/call","params":{"name":"task_wait","arguments":{"task_ids":["`+y.TaskID+`"],"timeout_seconds":1}}}`, "", 200*time.Millisecond)
		})
	}
	wg.Wait()
	waitFor(t, "the abandoned waits' entries are gone once they returned", func() bool {
		posts, held := svc.TrackedPosts()
		return posts == 0 && held == 0
	})
}

// FuzzHTTPToolsCall drives the real HTTP server with tools/call POSTs
// whose params are anything (what the handler stamps with its key, and
// what a client may have stamped there itself): each is answered or
// refused, never with a server error, and the session answers a ping
// after it.
func FuzzHTTPToolsCall(f *testing.F) {
	for _, p := range []string{
		`{"name":"task_list","arguments":{}}`,
		`{"name":"task_list","arguments":{},"_meta":{"dev.offstage/request":"h1"}}`,
		`{"name":"task_list","arguments":{},"_meta":{"dev.offstage/request":7,"progressToken":1}}`,
		`{"name":"task_wait","arguments":{"task_ids":["shell:9"],"timeout_seconds":0},"_meta":null}`,
		`{"name":"task_list","_meta":[1],"arguments":{}}`,
		`{"name":"task_list","_meta":{"dev.offstage/request":{}},"_meta":{}}`,
		`{"name":"\u0074ask_list","arguments":{"\u0061":1}}`,
		`[]`, `null`, `"x"`, `{`, ``,
	} {
		f.Add([]byte(p))
	}
	post := fuzzSession(f)
	f.Fuzz(func(t *testing.T, params []byte) {
		status, _ := post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+string(params)+`}`)
		if status >= 500 {
			t.Fatalf("tools/call %q: status %d", params, status)
		}
		pingAfter(t, post, params)
	})
}

// FuzzHTTPBody drives the real HTTP server with POST bodies that are
// anything: each is answered or refused, never with a server error; a
// batch, valid JSON or not, is refused whole, with errors alone (its
// requests never run);
// and the session answers a ping after it.
func FuzzHTTPBody(f *testing.F) {
	for _, b := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task_list","arguments":{}}}`,
		`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task_list","arguments":{}}}]`,
		`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},7]`,
		` [ ]`, `[`, `[{"jsonrpc":"2.0","id":2,"method":"ping"}] x`, `{"jsonrpc":"2.0","id":2,"method":"ping"}{}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, `{"jsonrpc":"2.0","id":[],"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`, "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
		`{"jsonrpc":"2.0","id":2,"result":{}}`, `{"jsonrpc":"2.0","method":"ping"}`, `null`, ``,
	} {
		f.Add([]byte(b))
	}
	post := fuzzSession(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		status, answer := post(t, string(body))
		if status >= 500 {
			t.Fatalf("%q: status %d: %s", body, status, answer)
		}
		if msg := bytes.TrimLeft(body, " \t\r\n"); len(msg) > 0 && msg[0] == '[' && bytes.Contains(answer, []byte(`"result"`)) {
			t.Fatalf("the batch %q ran: %s", body, answer)
		}
		pingAfter(t, post, body)
	})
}

// fuzzSession starts an HTTP server for a fuzz target, whose shell runs
// no command a mutation may write (the stdio fuzz's), and returns post,
// which posts a body in a session of its own (opened at the first post)
// and returns the status and what came back.
func fuzzSession(f *testing.F) (post func(t *testing.T, body string) (int, []byte)) {
	svc := newService(f, mcpserver.Config{Agent: agent.Config{Tools: tools.Config{Process: proc.Config{
		Shell: []string{os.Args[0]}, Env: append(os.Environ(), testShellEnv+"=1"),
	}}}})
	srv := httptest.NewServer(svc.HTTPHandler("s3cret", nil))
	f.Cleanup(srv.Close)
	var sid string
	send := func(t *testing.T, sid, body string) (int, []byte, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer s3cret")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %q: %v", body, err)
		}
		defer res.Body.Close()
		answer, _ := io.ReadAll(res.Body)
		return res.StatusCode, answer, res.Header.Get("Mcp-Session-Id")
	}
	return func(t *testing.T, body string) (int, []byte) {
		if sid == "" {
			_, _, sid = send(t, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`)
			send(t, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		}
		status, answer, _ := send(t, sid, body)
		return status, answer
	}
}

// pingAfter fails t unless the session answers a ping after what was
// posted.
func pingAfter(t *testing.T, post func(*testing.T, string) (int, []byte), after []byte) {
	t.Helper()
	status, answer := post(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if status != http.StatusOK || !strings.Contains(string(answer), `"id":3,"result"`) {
		t.Fatalf("ping after %q: status %d: %s", after, status, answer)
	}
}
