package tools_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// checkOutput fails t if text, a result that is not an error, does not
// fit the tool's output schema.
func checkOutput(t *testing.T, tl *tools.Tool, text string) {
	t.Helper()
	if tl.OutputSchema == nil {
		t.Fatalf("%s has no output schema", tl.Name)
	}
	resolved, err := tl.OutputSchema.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: output schema: %v", tl.Name, err)
	}
	var v any
	json.Unmarshal([]byte(text), &v)
	if err := resolved.Validate(v); err != nil {
		t.Errorf("%s: the result does not fit its output schema: %v\n%s", tl.Name, err, text)
	}
}

// TestSchemasArePlain (issue 23, item 14): the schemas had "null" unions
// (["null", "boolean"] for interactive, ["null", "array"] for keys and
// task_ids, ["null", "integer"] for since), which OpenAI's strict mode and
// Gemini refuse, no enum for task_wait's mode, and no output schema.
func TestSchemasArePlain(t *testing.T) {
	for _, noPush := range []bool{false, true} {
		for _, tl := range tools.New(tools.Config{NoPush: noPush}).Tools() {
			checkPlain(t, tl)
		}
	}
	set := tools.New(tools.Config{})
	mode := set.Tool("task_wait").InputSchema.Properties["mode"]
	if !slices.Equal(mode.Enum, []any{"any", "all"}) {
		t.Errorf("task_wait mode enum = %v, want [any all]", mode.Enum)
	}
	keys := set.Tool("task_input").InputSchema.Properties["keys"].Items.Enum
	if len(keys) != 26+14 || keys[0] != "ctrl-a" || keys[len(keys)-1] != "page-down" {
		t.Errorf("task_input keys enum = %v, want ctrl-a … page-down", keys)
	}
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "cat")
	for _, k := range keys { // each one the tool takes
		if msg := e.call(t, e.top, "task_input", `{"task_id": "`+id+`", "keys": ["`+k.(string)+`"]}`).Text; strings.Contains(msg, "There is no key") {
			t.Errorf("the enum lists %s, which task_input refuses: %s", k, msg)
		}
	}
}

// checkPlain fails t if tl's schemas have a type union anywhere, or it
// lacks an object output schema.
func checkPlain(t *testing.T, tl *tools.Tool) {
	t.Helper()
	if tl.OutputSchema == nil || tl.OutputSchema.Type != "object" {
		t.Errorf("%s: output schema %v, want an object", tl.Name, tl.OutputSchema)
	}
	for what, s := range map[string]*jsonschema.Schema{"input": tl.InputSchema, "output": tl.OutputSchema} {
		b, _ := json.Marshal(s)
		var v any
		json.Unmarshal(b, &v)
		walkTypes(v, func(typ any) {
			if _, ok := typ.(string); !ok {
				t.Errorf("%s: %s schema has the type %v, want one type, never null: %s", tl.Name, what, typ, b)
			}
		})
	}
}

// walkTypes calls fn with every "type" in a schema decoded as JSON.
func walkTypes(v any, fn func(any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "type" {
				fn(e)
				continue
			}
			walkTypes(e, fn)
		}
	case []any:
		for _, e := range x {
			walkTypes(e, fn)
		}
	}
}

// TestNullIsNotGiven: with no null in the schemas, a model that sends
// null for an optional field (as strict-mode clients do) is taken as not
// giving it, as before.
func TestNullIsNotGiven(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "echo hi", "interactive": null, "cwd": null}`, &out)
	if out.Status != "completed" || !strings.Contains(out.Output, "hi") {
		t.Errorf("bash with nulls = %+v", out)
	}
}

// TestEnumLeavesTheToolsOwnWords: the published enum does not replace
// the sentence the tool says about a value it does not take.
func TestEnumLeavesTheToolsOwnWords(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "sleep 100")
	if msg := e.refused(t, e.top, "task_wait", `{"task_ids": ["`+id+`"], "mode": "some"}`); !strings.Contains(msg, `mode must be "any" or "all"`) {
		t.Errorf("mode some = %q", msg)
	}
}

// TestDefineOutputSchema: a tool defined with a struct output publishes
// its plain schema (with the "truncated" a cut result adds); one defined
// with any publishes none.
func TestDefineOutputSchema(t *testing.T) {
	type in struct {
		N *int `json:"n,omitempty" jsonschema:"a number"`
	}
	type out struct {
		Items []string `json:"items,omitempty"`
		Count int      `json:"count"`
	}
	typed := tools.Define("typed", "d", 0, func(context.Context, *task.View, in) (out, error) { return out{Count: 1}, nil })
	checkPlain(t, typed)
	if s := typed.OutputSchema; s.Properties["truncated"] == nil || !slices.Equal(s.Required, []string{"count"}) {
		t.Errorf("output schema = %v", s)
	}
	untyped := tools.Define("untyped", "d", 0, func(context.Context, *task.View, in) (any, error) { return nil, nil })
	if untyped.OutputSchema != nil {
		t.Errorf("a tool with output any has the output schema %v", untyped.OutputSchema)
	}
}
