package main

import (
	"bufio"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// snapshotHas reads a dashboard's list stream (base is …/ui/) with the
// token until an event mentions want, or fails after 10s.
func snapshotHas(t *testing.T, base, token, want string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %sevents: %s", base, resp.Status)
	}
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), want) {
				found <- true
				return
			}
		}
		found <- false
	}()
	select {
	case ok := <-found:
		if !ok {
			t.Fatalf("the stream of %s ended without %q", base, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the stream of %s had no %q in 10s", base, want)
	}
}

// TestTheDashboardOnMCPAndAlone (issue 26, item 3): offstage mcp --http
// serves the dashboard at /ui behind its token, and offstage dashboard
// serves the same journal's tasks without a server of sessions.
func TestTheDashboardOnMCPAndAlone(t *testing.T) {
	const token = "dashboard-cli-token-61d0a7"
	state := t.TempDir()
	env := []string{"OFFSTAGE_MCP_TOKEN=" + token}
	_, _, endpoint, _ := startHTTP(t, env, "--no-journal=false", "--state-dir", state)
	base := strings.TrimSuffix(endpoint, "mcp") + "ui/"
	resp, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("/ui/ without the token: %d %s, want 401 and the login form", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tokenAuth(token)}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hello-dashboard"}}); err != nil {
		t.Fatal(err)
	}
	snapshotHas(t, base, token, "echo hello-dashboard")

	cmd, _ := offstage(t, env, "dashboard", "--state-dir", state, "--http", "127.0.0.1:0")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	serving := regexp.MustCompile(`serving .* on (http://\S+/ui/)`)
	sc := bufio.NewScanner(pipe)
	alone := ""
	for alone == "" && sc.Scan() {
		if m := serving.FindStringSubmatch(sc.Text()); m != nil {
			alone = m[1]
		}
	}
	if alone == "" {
		t.Fatal("offstage dashboard did not say where it serves")
	}
	snapshotHas(t, alone, token, "echo hello-dashboard")
}
