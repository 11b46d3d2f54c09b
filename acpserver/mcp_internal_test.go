package acpserver

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/tools"
)

// TestMCPToolNamesAndSafety: names become mcp__SERVER__TOOL with what
// model APIs refuse replaced, a name too long for them is refused, and
// only a read-only tool is left unasked.
func TestMCPToolNamesAndSafety(t *testing.T) {
	srv := &server{}
	s := &mcpServer{name: "my server.v2"}
	yes, no := true, false
	for _, tc := range []struct {
		tool      mcp.Tool
		name      string
		safety    tools.Safety
		title     string
		wantError string
	}{
		{mcp.Tool{Name: "read/file"}, "mcp__my_server_v2__read_file", tools.Destructive, "my server.v2: read/file", ""},
		{mcp.Tool{Name: "ls", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "List"}}, "mcp__my_server_v2__ls", tools.ReadOnly, "my server.v2: List", ""},
		{mcp.Tool{Name: "add", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}}, "mcp__my_server_v2__add", tools.Mutating, "my server.v2: add", ""},
		{mcp.Tool{Name: "rm", Title: "Remove", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, "mcp__my_server_v2__rm", tools.Destructive, "my server.v2: Remove", ""},
		{mcp.Tool{Name: strings.Repeat("x", 60)}, "", 0, "", "longer than 64 characters"},
		{mcp.Tool{Name: "bad", InputSchema: map[string]any{"$ref": "#/nowhere"}}, "", 0, "", "bad"},
	} {
		got, err := srv.mcpTool(s, &tc.tool)
		if tc.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%s: error %v, want one with %q", tc.tool.Name, err, tc.wantError)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.tool.Name, err)
			continue
		}
		if got.Name != tc.name || got.Safety != tc.safety || got.Title != tc.title || consequential(got) == (tc.safety == tools.ReadOnly) {
			t.Errorf("%s: name %s, safety %s, title %q, asked %v; want %s, %s, %q, asked unless read-only",
				tc.tool.Name, got.Name, got.Safety, got.Title, consequential(got), tc.name, tc.safety, tc.title)
		}
	}
}
