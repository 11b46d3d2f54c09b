package acpserver

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mapOutput is the reading toolOutput replaces: the result decoded into a
// map[string]any, errors ignored, as cards read it before.
func mapOutput(text string) toolOutput {
	var out map[string]any
	json.Unmarshal([]byte(text), &out)
	if out == nil {
		return toolOutput{}
	}
	o := toolOutput{raw: jsonText("object")}
	for i, k := range outputKeys {
		o.str[i], _ = out[k].(string)
	}
	o.errorOnly = out["error"] != nil && len(out) == 1
	o.exit, o.hasExit = out["exit_code"].(float64)
	return o
}

// sameOutput checks that readOutput reads text as the map did, and that
// its rawOutput is the same JSON value as the map's.
func sameOutput(t *testing.T, text string) {
	t.Helper()
	got, want := readOutput(text), mapOutput(text)
	if (got.raw != nil) != (want.raw != nil) {
		t.Fatalf("readOutput(%q): object %v, the map says %v", text, got.raw != nil, want.raw != nil)
	}
	if got.raw == nil {
		return
	}
	// The result goes out as the tool wrote it, compacted: the same JSON
	// as the map, but for numbers a float64 would round and keys given
	// twice, which a client reads as the map did (the last counts).
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(text)); err != nil {
		t.Fatalf("readOutput(%q) read an object from invalid JSON: %v", text, err)
	}
	if string(got.raw) != text && string(got.raw) != compact.String() || bytes.ContainsAny(got.raw, "\r\n") {
		t.Errorf("readOutput(%q).raw = %q, want the text, compacted if it has line breaks", text, got.raw)
	}
	got.raw, want.raw = nil, nil
	if d := cmp.Diff(want, got, cmp.AllowUnexported(toolOutput{})); d != "" {
		t.Errorf("readOutput(%q) differs from the map's reading (-map +scan):\n%s", text, d)
	}
}

// TestToolOutput: a tool's result is read as decoding it into a map read
// it, for the results tools give and for odd ones.
func TestToolOutput(t *testing.T) {
	for _, text := range toolOutputSeeds {
		sameOutput(t, text)
	}
	o := readOutput(`{"task_id":"sh-1","status":"running","output":"a\nb","exit_code":2,"note":"n"}`)
	if o.get("task_id") != "sh-1" || o.get("output") != "a\nb" || !o.hasExit || o.exit != 2 || o.errorOnly || o.raw == nil {
		t.Errorf("readOutput = %+v", o)
	}
	if o := readOutput(`{"error":"no such task"}`); !o.errorOnly || o.get("error") != "no such task" {
		t.Errorf("readOutput of an error = %+v", o)
	}
	if o := readOutput("{\n \"a\": 1\n}"); string(o.raw) != `{"a":1}` {
		t.Errorf("a result with line breaks: raw %q, want it compacted", o.raw)
	}
}

var toolOutputSeeds = []string{
	`{"tasks":[],"count":0,"note":"You have no background tasks."}`,
	`{"task_id":"sh-1","status":"completed","exit_code":0,"output":"hi\n"}`,
	`{"error":"x"}`, `{"error":null}`, `{"error":"x","error":null}`, `{"error":1,"error":"y"}`,
	`{"error":"x","note":"y"}`, `{"status":"a","status":3}`, `{"exit_code":"1"}`, `{"exit_code":1e400}`,
	`{"exit_code":-0.5e1}`, `{"\u0065rror":"x"}`, `{"err\u006fr":"x","task_id":"t"}`, `{}`, ` { } `, `null`, `[]`,
	`"text"`, `not json`, ``, `{"output":"\ud800"}`, "{\"output\":\"\xff\"}", `{"content":[{"type":"text"}]}`,
	`{"a":{"error":"nested"}}`, "\t{\"error\" : \"x\" }\n",
}

// FuzzToolOutput: any text a tool returns is read as decoding it into a
// map read it.
func FuzzToolOutput(f *testing.F) {
	for _, s := range toolOutputSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) { sameOutput(t, text) })
}
