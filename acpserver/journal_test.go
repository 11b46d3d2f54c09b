package acpserver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
)

// TestLoadSessionTakesTheWholeID pins a leftover of the ACP review:
// session/load took the start of an id, as the CLI's --resume does, and
// the loaded session then went by that start, not by its id; a start
// that two ids share was a -32603 that blamed the journal. ACP ids are
// exact: each is an invalid-params error that names the id sent,
// quoted and bounded, and the whole id loads.
func TestLoadSessionTakesTheWholeID(t *testing.T) {
	ctx := context.Background()
	rec := acpserver.TestRecorder(t) // closed after the harness's own cleanup
	const first, second = "20260101-000000-aaaa01", "20260101-000000-bbbb02"
	for _, id := range []string{first, second} {
		var cfg agent.Config
		r, err := rec.Record(ctx, agent.SessionInfo{ID: id, Surface: "acp", Dir: t.TempDir()}, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.End()
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	h := start(t, `{"turns": [{"text": "Still here."}]}`, acpserver.Config{Surface: agent.Surface{Journal: rec}})
	long := "\x1b[2J" + strings.Repeat("x", 1000)
	for _, c := range []struct{ id, want string }{
		{"20260101-000000-aaaa", `unknown session "20260101-000000-aaaa"`},
		{"20260101-000000-", `unknown session "20260101-000000-"`},
		{long, `unknown session "\x1b[2J` + strings.Repeat("x", 75) + `…"`},
	} {
		_, err := h.conn.LoadSession(t.Context(), acp.LoadSessionRequest{Cwd: h.dir, SessionId: acp.SessionId(c.id), McpServers: []acp.McpServer{}})
		var re *acp.RequestError
		if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, c.want) || len(re.Message) > 300 {
			t.Errorf("session/load %.40q = %v, want an invalid-params error with %s", c.id, err, c.want)
		}
	}
	if _, err := h.conn.LoadSession(t.Context(), acp.LoadSessionRequest{Cwd: h.dir, SessionId: first, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load of the whole id: %v", err)
	}
	if got := h.prompt(t, first, "still there?"); got != acp.StopReasonEndTurn {
		t.Fatalf("prompt after load = %s", got)
	}
	if !has(h.lines(first), "message Still here.") {
		t.Errorf("the loaded session did not go on under its id:\n%s", strings.Join(h.lines(first), "\n"))
	}
}
