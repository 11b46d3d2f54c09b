package main

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scrape reads /metrics beside endpoint (…/mcp) with token ("" sends
// none) and returns its status and samples, by name and labels as the
// text format writes them: offstage_tasks_started_total{kind="shell"}.
func scrape(t *testing.T, endpoint, token string) (int, map[string]float64) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", strings.TrimSuffix(endpoint, "/mcp")+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		got[line[:i]] = v
	}
	return resp.StatusCode, got
}

// TestMetricsCountTasks (issue 26, item 4): /metrics needs the token, and
// its counters move as tasks start and end.
func TestMetricsCountTasks(t *testing.T) {
	const token = "metrics-test-token-5d2e9a"
	_, _, endpoint, _ := startHTTP(t, []string{"OFFSTAGE_MCP_TOKEN=" + token})
	if code, _ := scrape(t, endpoint, ""); code != http.StatusUnauthorized {
		t.Errorf("scraping without the token: %d, want 401", code)
	}
	if code, _ := scrape(t, endpoint, "wrong-token-wrong-token"); code != http.StatusUnauthorized {
		t.Errorf("scraping with a wrong token: %d, want 401", code)
	}
	_, before := scrape(t, endpoint, token)
	for _, name := range []string{`offstage_tasks_started_total{kind="shell"}`, `offstage_tasks_running{kind="shell"}`, `offstage_sessions_open`, `offstage_task_output_bytes_total`} {
		if v, ok := before[name]; !ok || v != 0 {
			t.Errorf("before any session, %s = %v (present %v), want 0", name, v, ok)
		}
	}

	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tokenAuth(token)}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []map[string]any{
		{"command": "echo one"},
		{"command": "echo two; echo three"},
		{"command": "exit 3"},
		{"command": "sleep 30", "run_in_background": true},
	} {
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: c}); err != nil {
			t.Fatalf("bash %v: %v", c, err)
		}
	}
	var after map[string]float64
	waitUntil(t, "the metrics count 4 started tasks", func() bool {
		_, after = scrape(t, endpoint, token)
		return after[`offstage_tasks_started_total{kind="shell"}`] == 4 && after[`offstage_tasks_finished_total{kind="shell",reason="self",state="failed"}`] == 1
	})
	for name, want := range map[string]float64{
		`offstage_tasks_finished_total{kind="shell",reason="self",state="completed"}`: 2,
		`offstage_tasks_finished_total{kind="shell",reason="self",state="failed"}`:    1,
		`offstage_tasks_running{kind="shell"}`:                                        1,
		`offstage_tasks_queued{kind="shell"}`:                                         0,
		`offstage_task_duration_seconds_count{kind="shell"}`:                          3,
		`offstage_task_output_bytes_total`:                                            float64(len("one\ntwo\nthree\n")),
		`offstage_sessions_open`:                                                      1,
	} {
		if after[name] != want {
			t.Errorf("after 4 tasks, %s = %v, want %v", name, after[name], want)
		}
	}
	for name := range after {
		if strings.Contains(name, "shell:") || strings.Contains(name, "session") && name != "offstage_sessions_open" {
			t.Errorf("a label carries an id: %s", name)
		}
	}
	cs.Close()
	// One scrape is no snapshot (the registry gathers each metric on its
	// own), so wait for each of them.
	waitUntil(t, "the session's end, and the background sleep stopped with it as canceled, are counted", func() bool {
		_, after = scrape(t, endpoint, token)
		return after[`offstage_sessions_open`] == 0 && after[`offstage_tasks_running{kind="shell"}`] == 0 &&
			after[`offstage_tasks_finished_total{kind="shell",reason="session",state="canceled"}`] == 1
	})
}
