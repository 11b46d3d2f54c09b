package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// TestDefineSchema: a tool whose schema arrives as data (an MCP server's)
// passes the model's arguments on as sent, for that server to check (a
// task_id stays a number: it is not one of offstage's ids; a schema that
// refers to itself without end cannot crash the agent), caps its result
// with a note, and turns Fail into an error result.
func TestDefineSchema(t *testing.T) {
	var schema jsonschema.Schema
	if err := json.Unmarshal([]byte(`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		"properties": {"task_id": {"type": "integer"}, "size": {"type": "integer"}}, "required": ["task_id"]}`), &schema); err != nil {
		t.Fatal(err)
	}
	var got json.RawMessage
	tool, err := tools.DefineSchema("remote", "A remote tool.", &schema, 1024, func(_ context.Context, _ *task.View, args json.RawMessage) (any, error) {
		got = args
		var in struct {
			TaskID int `json:"task_id"`
			Size   int `json:"size"`
		}
		json.Unmarshal(args, &in)
		if in.TaskID < 0 {
			return nil, tools.Fail("the server says no")
		}
		return map[string]string{"content": strings.Repeat("x", in.Size)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res, ok := tool.Check(json.RawMessage(`[1]`)); ok || !strings.Contains(res.Text, "must be a JSON object") {
		t.Errorf("Check(an array) = %v, %s; want refused", ok, res.Text)
	}
	var loop jsonschema.Schema
	if err := json.Unmarshal([]byte(`{"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"a": {"$ref": "#/$defs/a"}}}`), &loop); err != nil {
		t.Fatal(err)
	}
	looping, err := tools.DefineSchema("loop", "", &loop, 0, func(context.Context, *task.View, json.RawMessage) (any, error) { return "ok", nil })
	if err == nil {
		if res, ok := looping.Check(json.RawMessage(`{"a": 1}`)); !ok { // a stack overflow would end the test binary
			t.Errorf("Check on a schema that refers to itself = %s", res.Text)
		}
	}
	if res, err := tool.Call(ctx, nil, json.RawMessage(`{"task_id": 7}`)); err != nil || res.IsError || string(got) != `{"task_id":7}` {
		t.Errorf("Call(task_id 7) = %+v, %v; run got %s, want {\"task_id\":7}", res, err, got)
	}
	if res, _ := tool.Call(ctx, nil, json.RawMessage(`{"task_id": 1, "size": 5000}`)); len(res.Text) > 1024 || !strings.Contains(res.Text, "more bytes") || !strings.Contains(res.Text, "cut to fit 1024 bytes") {
		t.Errorf("a 5000-byte result = %d bytes %s; want at most 1024, saying it was cut", len(res.Text), res.Text)
	}
	if res, err := tool.Call(ctx, nil, json.RawMessage(`{"task_id": -1}`)); err != nil || !res.IsError || res.Text != `{"error":"the server says no"}` {
		t.Errorf("Call that fails = %+v, %v; want the error result", res, err)
	}
	bad := jsonschema.Schema{Type: "object", Ref: "#/$defs/missing"}
	if _, err := tools.DefineSchema("broken", "", &bad, 0, nil); err == nil {
		t.Error("DefineSchema with an unresolvable $ref: no error")
	}
	if _, err := tools.DefineSchema("none", "", nil, 0, nil); err == nil {
		t.Error("DefineSchema without a schema: no error")
	}
}
