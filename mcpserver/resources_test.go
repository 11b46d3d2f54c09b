package mcpserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/tools"
)

// TestLiveShellsAreListedResources (issue 23, item 15): resources/list was
// empty while shells ran (only the template said where outputs were). It
// now lists the session's live shells' outputs, and the client is told
// when that list changes; another session's list stays its own.
func TestLiveShellsAreListedResources(t *testing.T) {
	changed := make(chan struct{}, 100)
	svc := newService(t, mcpserver.Config{})
	cs := client(t, svc, &mcp.ClientOptions{ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
		changed <- struct{}{}
	}})
	other := client(t, svc, nil)
	if uris := listed(t, cs); len(uris) != 0 {
		t.Fatalf("resources before any shell = %v", uris)
	}
	call(t, cs, "bash", `{"command": "echo started; sleep 100", "run_in_background": true}`, nil)
	const uri = "offstage://task/shell:1/output"
	listChanged(t, changed)
	waitFor(t, "the shell listed", func() bool { uris := listed(t, cs); return len(uris) == 1 && uris[0] == uri })
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("ReadResource(%s) = %+v, %v", uri, res, err)
	}
	if uris := listed(t, other); len(uris) != 0 {
		t.Errorf("another session lists %v", uris)
	}
	call(t, cs, "task_cancel", `{"task_id": "shell:1"}`, nil)
	listChanged(t, changed)
	waitFor(t, "the finished shell unlisted", func() bool { return len(listed(t, cs)) == 0 })
	if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Errorf("a finished shell's output is no longer readable: %v", err)
	}
}

// listed returns the URIs resources/list gives.
func listed(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	return uris
}

func listChanged(t *testing.T, changed <-chan struct{}) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/resources/list_changed")
	}
}

// TestResourceUpdatesComeFromOutput (issue 35, item 3): each session
// looked for output growth on a ticker, whether or not anything ran, so
// two hundred idle sessions woke hundreds of times a second. Updates now
// follow the shells' output: with an interval of an hour, one still comes
// as soon as output arrives (a ticker would send none for an hour).
func TestResourceUpdatesComeFromOutput(t *testing.T) {
	svc, err := mcpserver.New(context.Background(), mcpserver.Config{UpdateInterval: time.Hour, Agent: agent.Config{Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	updates := make(chan string, 10)
	cs := client(t, svc, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updates <- req.Params.URI
	}})
	defer cs.Close()
	call(t, cs, "bash", `{"command": "read line; echo got $line; sleep 100", "run_in_background": true, "interactive": true}`, nil)
	const uri = "offstage://task/shell:1/output"
	pidOf(t, cs, "shell:1")
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	call(t, cs, "task_input", `{"task_id": "shell:1", "text": "go\n"}`, nil)
	select {
	case got := <-updates:
		if got != uri {
			t.Errorf("update for %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no resource update as output arrived, with an update interval of an hour")
	}
}

// TestAListIsTheTableAsItIsNow (a loaded CI run): resources/list was the
// list the session's event follower had last made, a hand-off behind the
// table, so a client that listed right after bash returned could get
// none while its shell ran. A list is now made from the table as well.
// Here the follower is behind by construction: what it listed is taken
// out again, and no event comes to make it list again.
func TestAListIsTheTableAsItIsNow(t *testing.T) {
	svc := newService(t, mcpserver.Config{})
	cs := client(t, svc, nil)
	call(t, cs, "bash", `{"command": "sleep 100", "run_in_background": true}`, nil)
	const uri = "offstage://task/shell:1/output"
	waitFor(t, "the shell listed", func() bool { uris := listed(t, cs); return len(uris) == 1 && uris[0] == uri })
	svc.Unlist()
	if uris := listed(t, cs); len(uris) != 1 || uris[0] != uri {
		t.Errorf("resources/list = %v while shell:1 runs, want %s", uris, uri)
	}
	call(t, cs, "task_cancel", `{"task_id": "shell:1"}`, nil)
}
