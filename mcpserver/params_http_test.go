package mcpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

// TestHTTPBatchesAreRefused: over HTTP as over stdio, a batch is
// answered with an error for each request in it, and none runs. The SDK
// ran them, outside the accounting that counts a result delivered only
// once its answer went out (an outsider lost a task_wait's result so:
// its client gone, the result counted as given) and outside the checks
// of each request's params (bytes that are not UTF-8 ran, as U+FFFD).
func TestHTTPBatchesAreRefused(t *testing.T) {
	s := taskSession(t)
	const why = "batches are not supported; send each JSON-RPC message in a POST of its own"
	res := s.post(`[{"jsonrpc":"2.0","id":71,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo ran > ran.txt"}}},` +
		`{"jsonrpc":"2.0","method":"notifications/progress"},` +
		"{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"tools/call\",\"params\":{\"name\":\"bash\",\"arguments\":{\"command\":\"echo \xff\"}}}]")
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var replies []struct {
		ID    json.RawMessage
		Error *struct {
			Code    int
			Message string
		}
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &replies) != nil || len(replies) != 2 {
		t.Fatalf("a batch of two requests and a notification: status %d: %s", res.StatusCode, body)
	}
	for i, want := range []string{"71", `"b"`} {
		if r := replies[i]; string(r.ID) != want || r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, why) {
			t.Errorf("reply %d: id %s, error %+v; want id %s, -32600 saying %q", i, r.ID, r.Error, want, why)
		}
	}
	// Nothing in it ran: no task, and the session goes on.
	var list struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	s.tool("task_list", `{}`, &list)
	if len(list.Tasks) != 0 {
		t.Errorf("the batch's calls ran: %d tasks", len(list.Tasks))
	}
	// A batch with no request gets one error, with a null id, and 400:
	// no response is owed.
	for _, batch := range []string{`[]`, `[{"jsonrpc":"2.0","method":"notifications/progress"}]`} {
		res := s.post(batch)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"id":null`) || !strings.Contains(string(body), "send each JSON-RPC message in a POST of its own") {
			t.Errorf("%s: status %d: %s", batch, res.StatusCode, body)
		}
	}
}

// TestHTTPIDsThatCannotComeBackAreRefused: over HTTP as over stdio, a
// request whose id is neither a string nor an integer within ±2^53 is
// refused with -32600, under its id as sent where a client can read it
// back. The SDK answered 1.5 as 1, and 10^29 as -2^63: no client could
// match those answers to its requests.
func TestHTTPIDsThatCannotComeBackAreRefused(t *testing.T) {
	s := taskSession(t)
	for _, tc := range []struct{ id, replyID string }{
		{"1.5", "1.5"},
		{"123456789012345678901234567890", "123456789012345678901234567890"},
		{"1e400", "null"},
		{"{}", "null"},
	} {
		res := s.post(`{"jsonrpc":"2.0","id":` + tc.id + `,"method":"ping"}`)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var r struct {
			ID    json.RawMessage
			Error *struct {
				Code    int
				Message string
			}
		}
		if json.Unmarshal(body, &r) != nil || string(r.ID) != tc.replyID || r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, "id") {
			t.Errorf("id %s: status %d: %s; want -32600 under id %s", tc.id, res.StatusCode, body, tc.replyID)
		}
	}
	// A usable id is answered under itself.
	if r := s.request("ping", `{}`); r.Error != nil {
		t.Errorf("ping after the refusals: %+v", r.Error)
	}
}

// TestHTTPABodyOfMoreThanOneValueIsAParseError: a body that is not one
// JSON value is a parse error, and nothing in it runs. The SDK ran its
// first value and dropped the rest: a batch with a byte after it ran
// past the batch's refusal, losing a task_wait's result (an outsider's
// finding), and a second message went unanswered.
func TestHTTPABodyOfMoreThanOneValueIsAParseError(t *testing.T) {
	s := taskSession(t)
	mark := filepath.Join(t.TempDir(), "ran")
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch ` + mark + `"}}}`
	for _, body := range []string{"[" + call + "] x", "[" + call + "][]", "[" + call + "]" + call, call + " x", `{"jsonrpc":"2.0","id":3,"method":"ping"}` + call} {
		res := s.post(body)
		answer, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(answer), `"code":-32700`) || !strings.Contains(string(answer), "one JSON-RPC message per POST") {
			t.Errorf("%.60s…: status %d: %s; want 400 and a parse error", body, res.StatusCode, answer)
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("a call in a body of more than one value ran")
	}
}
