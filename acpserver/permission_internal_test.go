package acpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	acp "github.com/coder/acp-go-sdk"
	"github.com/offstage/offstage/agent"
)

// TestDialogsAreFIFO: permission requests open one at a time, in the
// order they asked; one whose context ends while it waits leaves the
// queue without taking a turn or losing anyone else's.
func TestDialogsAreFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d dialogs
		var mu sync.Mutex
		var order []int
		open := 0
		if err := d.acquire(t.Context(), func() { t.Error("the first request was queued") }); err != nil {
			t.Fatal(err)
		}
		gone, leave := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := 1; i <= 4; i++ {
			ctx := t.Context()
			if i == 2 {
				ctx = gone
			}
			wg.Go(func() {
				if err := d.acquire(ctx, func() {}); err != nil {
					if i != 2 {
						t.Errorf("request %d: %v", i, err)
					}
					return
				}
				mu.Lock()
				order = append(order, i)
				open++
				if open != 1 {
					t.Errorf("%d requests open at once", open)
				}
				open--
				mu.Unlock()
				d.release()
			})
			synctest.Wait() // queued before the next one asks
		}
		leave()
		synctest.Wait()
		d.release() // the first request is answered
		wg.Wait()
		if !slices.Equal(order, []int{1, 3, 4}) {
			t.Errorf("opened in order %v, want 1 3 4 (2 gave up)", order)
		}
		if d.busy || len(d.waiting) != 0 {
			t.Errorf("after all: busy %v, %d waiting", d.busy, len(d.waiting))
		}
	})
}

// TestSubTitle: a sub-agent's call is named after the sub-agent.
func TestSubTitle(t *testing.T) {
	c := agent.ToolCall{Agent: "agent:1", Profile: "general"}
	for title, want := range map[string]string{
		"Run: ls":                 "agent:1 (general) wants to run: ls",
		"Sub-agent general: look": "agent:1 (general) wants to start sub-agent general: look",
		"Cancel shell:3":          "agent:1 (general) wants to cancel shell:3",
		"Écrire un fichier":       "agent:1 (general) wants to écrire un fichier",
		"":                        "agent:1 (general) wants to ",
	} {
		if got := subTitle(c, title); got != want {
			t.Errorf("subTitle(%q) = %q, want %q", title, got, want)
		}
	}
}

// TestDialogsPassOnATurnTheCancelledMissed: a waiter cancelled just as
// the turn reaches it passes the turn on; nobody behind it is stranded.
func TestDialogsPassOnATurnTheCancelledMissed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 50 { // the waiter's select sees both at once and picks either
			var d dialogs
			d.acquire(t.Context(), func() {})
			gone, leave := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() {
				if d.acquire(gone, func() {}) == nil {
					d.release()
				}
			})
			synctest.Wait()
			third := make(chan struct{})
			wg.Go(func() {
				if err := d.acquire(t.Context(), func() {}); err != nil {
					t.Error(err)
				}
				close(third)
				d.release()
			})
			synctest.Wait()
			leave()
			d.release()
			<-third
			wg.Wait()
			if d.busy || len(d.waiting) != 0 {
				t.Fatalf("after all: busy %v, %d waiting", d.busy, len(d.waiting))
			}
		}
	})
}

// TestTheEditorsHeadersStayWithTheirServer (an attacker's trial): a
// redirect from the MCP server to another host must not carry the
// editor's key there.
func TestTheEditorsHeadersStayWithTheirServer(t *testing.T) {
	seen := make(chan string, 2)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- "other:" + r.Header.Get("Authorization")
	}))
	defer other.Close()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- "server:" + r.Header.Get("Authorization")
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	defer server.Close()
	c := headerClient(http.DefaultTransport.(*http.Transport), server.URL+"/mcp", []acp.HttpHeader{{Name: "Authorization", Value: "Bearer SECRET"}})
	resp, err := c.Get(server.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a, b := <-seen, <-seen; a != "server:Bearer SECRET" || b != "other:" {
		t.Errorf("the server saw %q, the other host %q", a, b)
	}
}
