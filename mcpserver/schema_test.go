package mcpserver_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/provider/scripted"
)

// nullType finds a "type" that is a list (["null", "boolean"]) or null.
var nullType = regexp.MustCompile(`"type":\s*(\[|"null")`)

// TestSchemasArePlainOverMCP (issue 23, item 14): tools/list published
// "null" unions that OpenAI's strict mode and Gemini refuse, mode without
// its enum, profile without one, and no output schema although every
// result carries structuredContent. Every tool now has plain schemas, the
// enums, and an output schema its structured results fit.
func TestSchemasArePlainOverMCP(t *testing.T) {
	model, err := scripted.Parse([]byte(`{"turns": [], "agents": {"general": [{"text": "done"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	cs := client(t, newService(t, mcpserver.Config{Agent: agent.Config{Model: model}}), nil)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]*jsonschema.Resolved{}
	for _, tl := range list.Tools {
		b, _ := json.Marshal(tl)
		if nullType.Match(b) {
			t.Errorf("%s: a type union or null in %s", tl.Name, b)
		}
		var s jsonschema.Schema
		raw, _ := json.Marshal(tl.OutputSchema)
		if err := json.Unmarshal(raw, &s); err != nil || s.Type != "object" {
			t.Errorf("%s: output schema %s, want an object (%v)", tl.Name, raw, err)
			continue
		}
		if outputs[tl.Name], err = s.Resolve(nil); err != nil {
			t.Errorf("%s: output schema: %v", tl.Name, err)
		}
		if strings.Contains(tl.Description, "by itself when") {
			t.Errorf("%s promises results by themselves over MCP:\n%s", tl.Name, tl.Description)
		}
	}
	for tool, want := range map[string]string{"task_wait": `"enum":["any","all"]`, "spawn_agent": `"enum":["general"`} {
		for _, tl := range list.Tools {
			if b, _ := json.Marshal(tl.InputSchema); tl.Name == tool && !strings.Contains(string(b), want) {
				t.Errorf("%s input schema lacks %s: %s", tool, want, b)
			}
		}
	}
	for _, c := range []struct{ tool, args string }{
		{"bash", `{"command": "echo hi"}`},
		{"bash", `{"command": "sleep 0.2", "run_in_background": true}`},
		{"task_list", `{}`},
		{"task_output", `{"task_id": "shell:1"}`},
		{"task_inspect", `{"task_id": "shell:2"}`},
		{"task_wait", `{"task_ids": ["shell:2"], "timeout_seconds": 10}`},
		{"task_cancel", `{"task_id": "shell:2"}`},
		{"spawn_agent", `{"profile": "general", "prompt": "go"}`},
	} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
		if err != nil || res.IsError || res.StructuredContent == nil {
			t.Errorf("%s(%s) = %+v, %v; want a structured result", c.tool, c.args, res, err)
			continue
		}
		var v any
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &v)
		if err := outputs[c.tool].Validate(v); err != nil {
			t.Errorf("%s: structuredContent does not fit the output schema: %v\n%s", c.tool, err, raw)
		}
	}
}
