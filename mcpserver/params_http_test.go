package mcpserver_test

import (
	"strings"
	"testing"
)

// TestHTTPParamsOfTheWrongTypeAreNamed: over HTTP as over stdio, a
// request whose params give a field the wrong JSON type is refused with a
// sentence naming the field and what to send. The SDK's own refusal says
// it in Go's type names and quotes the params back, a 1 MB argument
// included.
func TestHTTPParamsOfTheWrongTypeAreNamed(t *testing.T) {
	s := taskSession(t)
	big := strings.Repeat("x", 1<<20)
	for _, tc := range []struct{ method, params, want string }{
		{"tools/call", `{"name":42,"arguments":{"command":"` + big + `"}}`, `Invalid params: tools/call: name must be a string (a tool's name, such as "bash"), not the number 42`},
		{"tools/call", `{"name":"bash","arguments":"ls"}`, `arguments must be an object`},
		{"tasks/get", `{"taskId":7}`, `taskId must be a string`},
		{"resources/read", `{"uri":["a"]}`, `uri must be a string`},
		{"tools/list", `{"cursor":{}}`, `cursor must be a string`},
		{"tools/list", `[1]`, `params must be an object, not an array`},
		{"tools/call", "{\"name\":\"bash\",\"arguments\":{\"command\":\"rm \xc3\x28\"}}", `the arguments hold bytes that are not UTF-8`},
	} {
		r := s.request(tc.method, tc.params)
		if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, tc.want) || len(r.Error.Message) > 300 || strings.Contains(r.Error.Message, "Go ") || strings.Contains(r.Error.Message, "unmarshal") {
			t.Errorf("%s %.60s: %+v, want -32602 saying %q, short", tc.method, tc.params, r.Error, tc.want)
		}
	}
	// The session is unharmed: a good call still works.
	var out struct {
		Status string `json:"status"`
	}
	s.tool("bash", `{"command":"echo fine"}`, &out)
	if out.Status != "completed" {
		t.Errorf("bash after the refusals: %+v", out)
	}
}
