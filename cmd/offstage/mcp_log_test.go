package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPLogsWarningsByDefault (issue 23, item 16): offstage mcp's stderr
// showed the SDK's info lines (server session connected session_id="",
// which reads as a bug). By default it now logs warnings and errors, and
// the start-up lines a user needs (containment, where it serves);
// --log-level info shows the rest.
func TestMCPLogsWarningsByDefault(t *testing.T) {
	for _, c := range []struct {
		args    []string
		sdkLine bool
	}{
		{nil, false},
		{[]string{"--log-level", "info"}, true},
	} {
		cmd, mark := offstage(t, nil, append([]string{"mcp", "--no-journal"}, c.args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "task_list", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		cs.Close()
		noSurvivors(t, mark)
		out := stderr.String()
		for _, want := range []string{"msg=containment", `msg="serving MCP on stdio"`} {
			if !strings.Contains(out, want) {
				t.Errorf("offstage mcp %q: stderr lacks %s:\n%s", c.args, want, out)
			}
		}
		if got := strings.Contains(out, `msg="server session connected"`); got != c.sdkLine {
			t.Errorf("offstage mcp %q: the SDK's info lines shown = %v, want %v:\n%s", c.args, got, c.sdkLine, out)
		}
	}
}
