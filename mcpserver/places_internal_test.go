package mcpserver

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestASessionlessAnswerFreesItsPlaceFirst pins a race CI lost in 4 runs
// of 10 (offstage mcp --http --max-sessions 1): the SDK's client asks
// server/discover, which makes no session, then initialize the moment it
// has the answer; the discover's place was given back only when its
// handler returned, so the initialize got 503. The place is free before
// the answer's first byte; a request that makes a session keeps its place.
func TestASessionlessAnswerFreesItsPlaceFirst(t *testing.T) {
	idle := &idleSessions{svc: &Service{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}, max: 1, byID: make(map[string]*idleSession)}
	open := func() int {
		idle.mu.Lock()
		defer idle.mu.Unlock()
		return idle.open
	}
	var during int
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no discover"}}`))
		during = open() // the client may have the answer now
		if !idle.reserve() {
			t.Error("a second client was refused while the first's sessionless answer was out")
		} else {
			idle.release()
		}
	})
	idle.serve(httptest.NewRecorder(), httptest.NewRequest("POST", "/mcp", nil), answer)
	if during != 0 || open() != 0 {
		t.Errorf("places held: %d once the answer began, %d after; want 0 and 0", during, open())
	}

	// A request that makes a session keeps its place, counted once.
	server := mcp.NewServer(&mcp.Implementation{Name: "stub"}, nil)
	makes := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Context().Value(newServerKey{}).(*newServer).server = server
		w.Header().Set("Mcp-Session-Id", "s1")
		w.Write([]byte(`{}`))
		during = open()
	})
	idle.serve(httptest.NewRecorder(), httptest.NewRequest("POST", "/mcp", nil), makes)
	if during != 1 || open() != 1 {
		t.Errorf("places held by a session: %d while it was made, %d after; want 1 and 1", during, open())
	}
	idle.mu.Lock()
	idle.dropLocked("s1", idle.byID["s1"])
	idle.mu.Unlock()
}
