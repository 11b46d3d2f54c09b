package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/provider/scripted"
)

// rpcReply is one JSON-RPC answer, result or error.
type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// request sends a request and returns its answer, an error included.
func (s *rawSession) request(method, params string) rpcReply {
	s.t.Helper()
	s.next++
	res := s.post(`{"jsonrpc":"2.0","id":` + strconv.Itoa(s.next) + `,"method":"` + method + `","params":` + params + `}`)
	defer res.Body.Close()
	if s.id == "" {
		s.id = res.Header.Get("Mcp-Session-Id")
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		var msg struct {
			ID int `json:"id"`
			rpcReply
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.ID == s.next {
			return msg.rpcReply
		}
	}
	s.t.Fatalf("%s: no reply (status %d)", method, res.StatusCode)
	return rpcReply{}
}

// withTasks is the _meta that declares the Tasks extension on a request.
const withTasks = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// wireTask is the extension's task as a client reads it.
type wireTask struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	InputRequests  json.RawMessage `json:"inputRequests"`
	Result         *struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	} `json:"result"`
}

func taskSession(t *testing.T) *rawSession {
	t.Helper()
	return taskSessionWith(t, mcpserver.Config{})
}

func taskSessionWith(t *testing.T, cfg mcpserver.Config) *rawSession {
	t.Helper()
	svc := newService(t, cfg)
	srv := httptest.NewServer(svc.HTTPHandler("s3cret", nil))
	t.Cleanup(srv.Close)
	s := &rawSession{t: t, url: srv.URL, token: "s3cret"}
	init := s.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"tasks","version":"1"}}`)
	if !strings.Contains(string(init), `"io.modelcontextprotocol/tasks"`) {
		t.Fatalf("the server does not advertise the Tasks extension: %s", init)
	}
	s.notify("notifications/initialized")
	return s
}

func (s *rawSession) getTask(id string) wireTask {
	s.t.Helper()
	r := s.request("tasks/get", `{"taskId":"`+id+`",`+withTasks+`}`)
	if r.Error != nil {
		s.t.Fatalf("tasks/get %s: %+v", id, *r.Error)
	}
	var w wireTask
	if err := json.Unmarshal(r.Result, &w); err != nil {
		s.t.Fatal(err)
	}
	if w.ResultType != "complete" {
		s.t.Errorf("tasks/get resultType = %q, want complete", w.ResultType)
	}
	return w
}

// TestToolsCallAsATask (issue 40 item 1): a client that declares the
// Tasks extension on a bash call gets a task at once, follows it with
// tasks/get (working, then completed with the tool's result, isError on
// a failed exit), and a client that does not declare it gets the plain
// result as before.
func TestToolsCallAsATask(t *testing.T) {
	s := taskSession(t)

	// Declared: a foreground command answers with a task at once.
	r := s.request("tools/call", `{"name":"bash","arguments":{"command":"sleep 0.5; echo done; exit 3"},`+withTasks+`}`)
	if r.Error != nil {
		t.Fatalf("tools/call: %+v", *r.Error)
	}
	var created wireTask
	json.Unmarshal(r.Result, &created)
	if created.ResultType != "task" || created.Status != "working" || created.TaskID == "" || created.CreatedAt == "" || created.PollIntervalMs <= 0 {
		t.Fatalf("tools/call as a task = %s", r.Result)
	}
	if !strings.Contains(string(r.Result), `"ttlMs":null`) {
		t.Errorf("a running task's ttlMs should be null (unlimited): %s", r.Result)
	}

	var done wireTask
	waitFor(t, "the task completes", func() bool {
		done = s.getTask(created.TaskID)
		return done.Status != "working"
	})
	if done.Status != "completed" || done.Result == nil || !done.Result.IsError || len(done.Result.Content) == 0 {
		t.Fatalf("finished task = %+v", done)
	}
	text := done.Result.Content[0].Text
	if !strings.Contains(text, `"exit_code":3`) || !strings.Contains(text, "done") {
		t.Errorf("the result lacks the exit code or the output: %s", text)
	}
	if done.TTLMs == nil || *done.TTLMs <= 0 {
		t.Errorf("a finished task's ttlMs = %v, want the retention", done.TTLMs)
	}
	again := s.getTask(created.TaskID)
	if again.Result == nil || again.Result.Content[0].Text != text {
		t.Errorf("a second tasks/get gives another result: %+v", again.Result)
	}

	// Not declared: the plain result, as before.
	r = s.request("tools/call", `{"name":"bash","arguments":{"command":"echo plain"}}`)
	if strings.Contains(string(r.Result), `"resultType":"task"`) || !strings.Contains(string(r.Result), "plain") {
		t.Errorf("an undeclared call got %s", r.Result)
	}

	// A tool error stays a tool error, not a task.
	r = s.request("tools/call", `{"name":"bash","arguments":{"command":" "},`+withTasks+`}`)
	if strings.Contains(string(r.Result), `"resultType":"task"`) || !strings.Contains(string(r.Result), `"isError":true`) {
		t.Errorf("a refused call got %s", r.Result)
	}
}

// TestTaskMethodsNeedTheExtensionAndTheSession: a task method without the
// extension declared is refused with -32021, and a task id of another
// session (or made up) is not found.
func TestTaskMethodsNeedTheExtensionAndTheSession(t *testing.T) {
	a, b := taskSession(t), taskSession(t)
	r := a.request("tools/call", `{"name":"bash","arguments":{"command":"sleep 30"},`+withTasks+`}`)
	var created wireTask
	json.Unmarshal(r.Result, &created)
	if created.TaskID == "" {
		t.Fatalf("no task: %s", r.Result)
	}
	for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		if r := a.request(method, `{"taskId":"`+created.TaskID+`"}`); r.Error == nil || r.Error.Code != -32021 || !strings.Contains(string(r.Error.Data), "io.modelcontextprotocol/tasks") {
			t.Errorf("%s without the extension = %+v, want -32021", method, r)
		}
		if r := b.request(method, `{"taskId":"`+created.TaskID+`","inputResponses":{},`+withTasks+`}`); r.Error == nil || !strings.Contains(r.Error.Message, "no task") {
			t.Errorf("%s from another session = %+v, want not found", method, r)
		}
	}
	if r := a.request("tasks/cancel", `{"taskId":"`+created.TaskID+`",`+withTasks+`}`); r.Error != nil {
		t.Fatalf("tasks/cancel: %+v", *r.Error)
	}
	var end wireTask
	waitFor(t, "the cancelled task reads cancelled", func() bool {
		end = a.getTask(created.TaskID)
		return end.Status != "working"
	})
	if end.Status != "cancelled" || end.Result != nil {
		t.Errorf("after tasks/cancel: %+v", end)
	}
}

// TestTaskInputRequired: a shell that stops on a question reads
// input_required with an elicitation request; tasks/update with the
// answer types it, and the task completes with what the answer caused.
func TestTaskInputRequired(t *testing.T) {
	s := taskSession(t)
	r := s.request("tools/call", `{"name":"bash","arguments":{"command":"printf 'Your name? '; read name; echo \"hello $name\"","interactive":true},`+withTasks+`}`)
	var created wireTask
	json.Unmarshal(r.Result, &created)
	if created.TaskID == "" {
		t.Fatalf("no task: %s", r.Result)
	}
	var asked wireTask
	waitFor(t, "the task asks for input", func() bool {
		asked = s.getTask(created.TaskID)
		return asked.Status == "input_required"
	})
	var requests map[string]struct {
		Method string `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	json.Unmarshal(asked.InputRequests, &requests)
	req, ok := requests["input-1"]
	if !ok || req.Method != "elicitation/create" || !strings.Contains(req.Params.Message, "Your name?") {
		t.Fatalf("inputRequests = %s", asked.InputRequests)
	}
	// Two lines would answer a prompt not yet seen: refused, still waiting.
	if r := s.request("tasks/update", `{"taskId":"`+created.TaskID+`","inputResponses":{"input-1":{"action":"accept","content":{"text":"Ada\necho more"}}},`+withTasks+`}`); r.Error == nil || !strings.Contains(r.Error.Message, "one line") {
		t.Errorf("a two-line answer = %+v, want refused", r)
	}
	// An answer to a key not outstanding is ignored; the right one is typed.
	s.request("tasks/update", `{"taskId":"`+created.TaskID+`","inputResponses":{"input-9":{"action":"accept","content":{"text":"nobody"}}},`+withTasks+`}`)
	if r := s.request("tasks/update", `{"taskId":"`+created.TaskID+`","inputResponses":{"input-1":{"action":"accept","content":{"text":"Ada"}}},`+withTasks+`}`); r.Error != nil {
		t.Fatalf("tasks/update: %+v", *r.Error)
	}
	var done wireTask
	waitFor(t, "the task completes", func() bool {
		done = s.getTask(created.TaskID)
		return done.Status == "completed"
	})
	if done.Result == nil || done.Result.IsError || !strings.Contains(done.Result.Content[0].Text, "hello Ada") || strings.Contains(done.Result.Content[0].Text, "nobody") {
		t.Errorf("result = %+v", done.Result)
	}
}

// TestSpawnAgentAsATask: a sub-agent started by a declared spawn_agent
// call is a task whose completed result carries its answer.
func TestSpawnAgentAsATask(t *testing.T) {
	model, err := scripted.Parse([]byte(`{"turns": [], "agents": {"general": [{"delay_ms": 200, "text": "the sub-agent's report"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := taskSessionWith(t, mcpserver.Config{Agent: agent.Config{Model: model}})
	r := s.request("tools/call", `{"name":"spawn_agent","arguments":{"profile":"general","prompt":"report"},`+withTasks+`}`)
	var created wireTask
	json.Unmarshal(r.Result, &created)
	if created.ResultType != "task" || !strings.Contains(created.TaskID, "agent:") {
		t.Fatalf("spawn_agent as a task = %s", r.Result)
	}
	var done wireTask
	waitFor(t, "the sub-agent completes", func() bool {
		done = s.getTask(created.TaskID)
		return done.Status != "working"
	})
	if done.Status != "completed" || done.Result == nil || done.Result.IsError || !strings.Contains(done.Result.Content[0].Text, "the sub-agent's report") {
		t.Errorf("finished = %+v %+v", done, done.Result)
	}
}
