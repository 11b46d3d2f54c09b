package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

// noModel is a model the idle policy's sessions never call.
type noModel struct{}

func (noModel) Generate(context.Context, provider.Request, func(provider.Event)) (provider.Response, error) {
	return provider.Response{}, errors.New("not called")
}

// TestIdlePolicyClosesOnlySessionsWithNoClientAndNoWork: under the
// policy's clock (synctest), a session with no client and no unfinished
// task closes after --idle (within two checks); one with a client, or
// with a task running, does not, and the clock of the busy one starts
// when its task ends (issue 38 item 4's idle policy, under serve).
func TestIdlePolicyClosesOnlySessionsWithNoClientAndNoWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Hour
		sup := newSupervisor(nil, nil, idle, slog.New(slog.DiscardHandler), func(error) {})
		host := func(name string, attached bool) *hosted {
			s, err := agent.New(context.Background(), agent.Config{Model: noModel{}})
			if err != nil {
				t.Fatal(err)
			}
			h := &hosted{s: s, started: time.Now(), attached: attached}
			sup.sessions[name] = h
			return h
		}
		quiet, attached, busy := host("quiet", false), host("attached", true), host("busy", false)
		release := make(chan struct{})
		if _, err := busy.s.Table().View("").Spawn(task.Spec{Kind: "work"}, func(ctx context.Context, _ *task.Handle) (string, error) {
			<-release
			return "done", nil
		}); err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		looped := make(chan struct{})
		go func() { defer close(looped); sup.idleLoop(ctx) }()
		live := func() map[string]bool {
			synctest.Wait()
			sup.mu.Lock()
			defer sup.mu.Unlock()
			m := map[string]bool{}
			for k := range sup.sessions {
				m[k] = true
			}
			return m
		}

		time.Sleep(idle - time.Minute)
		if got := live(); !got["quiet"] || !got["attached"] || !got["busy"] {
			t.Fatalf("before --idle: live %v; want all three", got)
		}
		time.Sleep(3 * time.Minute)
		if got := live(); got["quiet"] || !got["attached"] || !got["busy"] {
			t.Fatalf("after --idle: live %v; want quiet closed, attached and busy kept", got)
		}
		if _, err := quiet.s.Turn(context.Background(), "hello", agent.Discard); !errors.Is(err, task.ErrClosed) && !errors.Is(err, agent.ErrClosed) {
			t.Errorf("a turn on the idle-closed session: %v; want it closed", err)
		}
		close(release) // the busy session's work ends: its idle clock starts
		time.Sleep(idle - time.Minute)
		if got := live(); !got["busy"] {
			t.Fatalf("%s after its work ended: live %v; want busy kept", idle-time.Minute, got)
		}
		time.Sleep(3 * time.Minute)
		if got := live(); got["busy"] || !got["attached"] {
			t.Fatalf("after --idle without work: live %v; want busy closed, attached kept", got)
		}
		stop()
		<-looped
		attached.s.Close(context.Background())
		busy.s.Close(context.Background())
		quiet.s.Close(context.Background())
	})
}

// TestServeInProcessStopsClean runs offstage serve in this process (so
// goleak sees its goroutines): a ping, a face it does not know, a header
// that is not JSON, a one-shot run over the wire, then serve stop; every
// goroutine it started is gone when it returns (TestMain's goleak).
func TestServeInProcessStopsClean(t *testing.T) {
	state := serveState(t)
	t.Setenv("XDG_STATE_HOME", state)
	done := make(chan error, 1)
	var stderr syncBuffer
	go func() { done <- serveCommand(context.Background(), nil, io.Discard, &stderr) }()
	sock := socketPath(filepath.Join(state, "offstage"))
	dial := func() net.Conn {
		deadline := time.Now().Add(20 * time.Second)
		for {
			c, err := net.Dial("unix", sock)
			if err == nil {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("offstage serve does not answer: %v\n%s", err, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	frames := func(c net.Conn, h serveHeader) (out string, exit int) {
		defer c.Close()
		json.NewEncoder(c).Encode(h)
		dec := json.NewDecoder(c)
		for {
			var f frame
			if err := dec.Decode(&f); err != nil {
				t.Fatalf("reading frames: %v (so far %q)", err, out)
			}
			out += string(f.Out) + string(f.Err)
			if f.Exit != nil {
				return out, *f.Exit
			}
		}
	}
	var p struct{ PID int }
	c := dial()
	json.NewEncoder(c).Encode(serveHeader{Face: "ping"})
	if err := json.NewDecoder(c).Decode(&p); err != nil || p.PID != os.Getpid() {
		t.Errorf("ping: %+v, %v", p, err)
	}
	c.Close()
	if out, code := frames(dial(), serveHeader{Face: "telnet"}); code != 2 || !strings.Contains(out, `no face "telnet"`) {
		t.Errorf("an unknown face: exit %d, %q", code, out)
	}
	c = dial()
	io.WriteString(c, "not json\n")
	if n, _ := c.Read(make([]byte, 1)); n != 0 {
		t.Errorf("a header that is not JSON got an answer")
	}
	c.Close()
	script := writeScript(t, `{"turns": [{"text": "hello from the supervisor"}]}`)
	out, code := frames(dial(), serveHeader{Face: "run", Args: []string{"--script", script, "hi"}, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}})
	if code != 0 || !strings.Contains(out, "hello from the supervisor") || !strings.Contains(out, "is hosted by offstage serve") {
		t.Errorf("a served one-shot run: exit %d:\n%s", code, out)
	}
	// An MCP session over the wire starts a shell, and its client goes:
	// the session detaches, and the stop ends it (goleak: nothing of the
	// MCP service per connection is left behind).
	mark := "inprocess-mcp-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	c = dial()
	json.NewEncoder(c).Encode(serveHeader{Face: "mcp", Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin", markEnv + "=" + mark}})
	io.WriteString(c, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 300","run_in_background":true}}}
`)
	replies := bufio.NewScanner(c)
	for replies.Scan() && !strings.Contains(replies.Text(), `"id":2`) {
	}
	if !strings.Contains(replies.Text(), "shell:1") {
		t.Errorf("bash over the served MCP face: %q, %v", replies.Text(), replies.Err())
	}
	waitSurvivors(t, mark, 1)
	c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st liveState
		c = dial()
		json.NewEncoder(c).Encode(serveHeader{Face: "sessions"})
		json.NewDecoder(c).Decode(&st)
		c.Close()
		if len(st.Sessions) == 1 && st.Sessions[0].Face == "mcp" && !st.Sessions[0].Attached {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MCP session did not detach: %+v\n%s", st, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(survivors(t, mark)) == 0 {
		t.Errorf("the MCP session's shell died with its client")
	}
	c = dial()
	json.NewEncoder(c).Encode(serveHeader{Face: "stop"})
	io.Copy(io.Discard, c) // closed when it has stopped
	c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("offstage serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("offstage serve did not stop:\n%s", stderr.String())
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is left: %v", err)
	}
	noSurvivors(t, mark)
}
