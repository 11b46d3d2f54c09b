package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// This file serves MCP's Tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663, the 2026-07-28 schema): a client that declares the extension
// on a tools/call of bash or spawn_agent gets a task handle at once
// (resultType "task"), backed by the offstage task the call started, and
// follows it with tasks/get, answers a prompt with tasks/update and stops
// it with tasks/cancel. A client that does not declare it on the request
// sees no change. go-sdk v1.8.0 has no types for the extension, so they
// are written here; swapping in the SDK's later touches only this file.

// TasksExtension is the extension's identifier.
const TasksExtension = "io.modelcontextprotocol/tasks"

const (
	// taskPollInterval is the polling interval suggested to clients.
	taskPollInterval = time.Second
	// maxExtTasks bounds the task handles a session keeps; the oldest
	// finished ones are forgotten first.
	maxExtTasks = 1024
	// taskCapabilityKey is the request _meta key under which a client
	// declares its capabilities per request.
	taskCapabilityKey = "io.modelcontextprotocol/clientCapabilities"
)

// extTask is one task handle: an offstage task a client follows through
// the extension. Its fields are guarded by extTasks.mu.
type extTask struct {
	id       string // offstage's task id in the session, such as shell:3
	created  time.Time
	updated  time.Time
	status   string              // the last status reported
	prompt   string              // the prompt the current input request is for
	inputKey int                 // the current input request's number; 0: none yet
	answered int                 // the last input request number answered
	result   *mcp.CallToolResult // set once the task finished and was read
	finished time.Time           // when result was set
	err      *jsonrpc.Error      // the call itself failed (status failed)
}

// extTasks is a session's task handles.
type extTasks struct {
	prefix string // random, so a handle from another session (or a reconnect) never names a task here

	mu    sync.Mutex
	byID  map[string]*extTask // guarded by mu
	order []string            // guarded by mu: handles, oldest first
}

func newExtTasks() *extTasks {
	b := make([]byte, 8)
	rand.Read(b)
	return &extTasks{prefix: hex.EncodeToString(b), byID: make(map[string]*extTask)}
}

// wireTask is the extension's Task, with the fields of its detailed
// variants (DetailedTask) and the Result's discriminator.
type wireTask struct {
	mcp.ResultBase
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]any      `json:"inputRequests,omitempty"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
}

// ackResult is the empty acknowledgement of tasks/update and tasks/cancel.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

type taskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// declaresTasks reports whether a request's _meta declares the extension.
func declaresTasks(meta map[string]any) bool {
	caps, _ := meta[taskCapabilityKey].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	_, ok := exts[TasksExtension]
	return ok
}

// missingTasksCapability is the error for a task method sent without the
// extension declared on the request (as the specification's
// MissingRequiredClientCapability).
func missingTasksCapability() error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
		Message: "Missing required client capability: declare " + TasksExtension + " in params._meta[\"" + taskCapabilityKey + "\"].extensions", Data: data}
}

// noParams is the error for a task method sent without params.
func noParams() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params with a taskId are required"}
}

// serveTasks adds the extension to a session's server: the capability,
// the middleware that answers task-augmented tool calls, and the three
// methods.
func (c *conn) serveTasks() {
	c.ext = newExtTasks()
	c.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || call.Params == nil || !declaresTasks(call.Params.GetMeta()) ||
				(call.Params.Name != "bash" && call.Params.Name != "spawn_agent") {
				return next(ctx, method, req)
			}
			return c.callAsTask(ctx, call, next, method)
		}
	})
	must := func(err error) {
		if err != nil {
			panic(err) // only a standard method's name is refused, and these are not
		}
	}
	must(mcp.AddReceivingCustomMethod(c.server, "tasks/get", func(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*wireTask, error) {
		if p == nil {
			return nil, noParams()
		}
		c.start(ss)
		return c.getTask(ctx, p)
	}))
	must(mcp.AddReceivingCustomMethod(c.server, "tasks/update", func(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*ackResult, error) {
		if p == nil {
			return nil, noParams()
		}
		c.start(ss)
		return c.updateTask(ctx, p)
	}))
	must(mcp.AddReceivingCustomMethod(c.server, "tasks/cancel", func(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*ackResult, error) {
		if p == nil {
			return nil, noParams()
		}
		c.start(ss)
		return c.cancelTask(ctx, p)
	}))
}

// callAsTask runs a declared bash or spawn_agent call in the background
// and answers with its task handle. A call the tool refuses (bad
// arguments, too many tasks) is answered as it would be without the
// extension: a tool error, not a task.
func (c *conn) callAsTask(ctx context.Context, call *mcp.CallToolRequest, next mcp.MethodHandler, method string) (mcp.Result, error) {
	var args map[string]any
	if err := json.Unmarshal(call.Params.Arguments, &args); err != nil || args == nil {
		return next(ctx, method, call) // the tool says what is wrong with them
	}
	args["run_in_background"] = true
	raw, _ := json.Marshal(args)
	orig := call.Params.Arguments
	call.Params.Arguments = raw
	res, err := next(ctx, method, call)
	call.Params.Arguments = orig
	if err != nil {
		return nil, err
	}
	out, ok := res.(*mcp.CallToolResult)
	if !ok || out.IsError || len(out.Content) == 0 {
		return res, nil
	}
	text, _ := out.Content[0].(*mcp.TextContent)
	var started struct {
		TaskID string `json:"task_id"`
	}
	if text == nil || json.Unmarshal([]byte(text.Text), &started) != nil || started.TaskID == "" {
		return res, nil
	}
	now := time.Now()
	t := &extTask{id: started.TaskID, created: now, updated: now, status: "working"}
	handle := c.ext.add(t)
	c.ext.mu.Lock()
	defer c.ext.mu.Unlock()
	w := c.wireLocked(handle, t)
	w.ResultType = "task"
	w.StatusMessage = "Started as " + t.id + "; follow it with tasks/get."
	return w, nil
}

// add records a handle, forgetting the oldest finished one past the bound.
func (e *extTasks) add(t *extTask) string {
	handle := e.prefix + "-" + t.id
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byID[handle] = t
	e.order = append(e.order, handle)
	for len(e.order) > maxExtTasks {
		evicted := false
		for i, h := range e.order {
			if old := e.byID[h]; old != nil && old.result != nil {
				delete(e.byID, h)
				e.order = append(e.order[:i], e.order[i+1:]...)
				evicted = true
				break
			}
		}
		if !evicted { // all running: the table's own bound stops more
			break
		}
	}
	return handle
}

func (e *extTasks) get(handle string) (*extTask, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.byID[handle]; t != nil {
		return t, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("no task %q in this session: a task is reachable only from the session that made it, while it is retained", shorten(handle, 200))}
}

// lookup finds the handle a task method names, for a request that
// declares the extension, in this session.
func (c *conn) lookup(p *taskParams) (*extTask, error) {
	if !declaresTasks(p.GetMeta()) {
		return nil, missingTasksCapability()
	}
	if c.err != nil || c.view == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "this session has no tasks"}
	}
	return c.ext.get(p.TaskID)
}

// getTask serves tasks/get.
func (c *conn) getTask(ctx context.Context, p *taskParams) (*wireTask, error) {
	t, err := c.lookup(p)
	if err != nil {
		return nil, err
	}
	c.refresh(ctx, t)
	c.ext.mu.Lock()
	defer c.ext.mu.Unlock()
	w := c.wireLocked(p.TaskID, t)
	w.ResultType = "complete"
	return w, nil
}

// refresh brings a handle up to date with its offstage task: its status,
// a prompt it waits on, and its result once it finished (read once, then
// kept, so every later tasks/get gives the same).
func (c *conn) refresh(ctx context.Context, t *extTask) {
	c.ext.mu.Lock()
	done := t.result != nil || t.err != nil
	c.ext.mu.Unlock()
	if done {
		return
	}
	info, err := c.view.Info(t.id)
	if err != nil {
		c.ext.mu.Lock()
		t.err, t.status, t.updated = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: t.id + " is no longer retained; its result cannot be read"}, "failed", time.Now()
		c.ext.mu.Unlock()
		return
	}
	if info.State.Finished() {
		res := c.finalResult(ctx, t.id, info)
		c.ext.mu.Lock()
		defer c.ext.mu.Unlock()
		if t.result == nil {
			t.result, t.finished, t.updated = res, time.Now(), time.Now()
			t.status = "completed"
			if info.State == task.Canceled {
				t.status = "cancelled"
			}
		}
		return
	}
	prompt := ""
	if p, ok := tools.Shell(c.view, t.id); ok && p.InputOpen() {
		prompt, _ = p.WaitingForInput()
	}
	c.ext.mu.Lock()
	defer c.ext.mu.Unlock()
	status := "working"
	if prompt != "" {
		status = "input_required"
		if t.inputKey == t.answered || prompt != t.prompt {
			t.inputKey++ // a new request: keys are never reused
			t.prompt = prompt
		}
	}
	if status != t.status {
		t.status, t.updated = status, time.Now()
	}
}

// finalResult is a finished task's CallToolResult: its result as task_wait
// gives it (exit code, output, error), an error result for a task that
// failed or timed out. If the result already went elsewhere (the client
// called task_wait), task_inspect's view of it.
func (c *conn) finalResult(ctx context.Context, id string, info task.Info) *mcp.CallToolResult {
	out := ""
	if res, err := c.callTool(ctx, "task_wait", map[string]any{"task_ids": []string{id}}); err == nil && !res.IsError {
		var w tools.WaitOutput
		if json.Unmarshal([]byte(res.Text), &w) == nil {
			for _, d := range w.Done {
				if d.ID == id {
					b, _ := text.JSON(d)
					out = string(b)
				}
			}
		}
	}
	if out == "" {
		if res, err := c.callTool(ctx, "task_inspect", map[string]any{"task_id": id}); err == nil {
			out = res.Text
		}
	}
	if out == "" {
		out = fmt.Sprintf(`{"task_id":%q,"status":%q}`, id, info.State)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}},
		IsError: info.State == task.Failed || info.State == task.TimedOut}
}

// callTool calls one of the session's tools by name.
func (c *conn) callTool(ctx context.Context, name string, args map[string]any) (tools.Result, error) {
	for _, t := range c.tools {
		if t.Name == name {
			raw, _ := json.Marshal(args)
			return t.Call(ctx, c.view, raw)
		}
	}
	return tools.Result{}, fmt.Errorf("no tool %s", name)
}

// wireLocked renders a handle. c.ext.mu must be held.
func (c *conn) wireLocked(handle string, t *extTask) *wireTask {
	w := &wireTask{TaskID: handle, Status: t.status, CreatedAt: t.created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano)}
	switch t.status {
	case "working", "input_required":
		w.PollIntervalMs = taskPollInterval.Milliseconds()
		w.StatusMessage = t.id + " is running"
	case "completed", "cancelled":
		w.Result = t.result
		if t.status == "cancelled" {
			w.Result = nil
			w.StatusMessage = t.id + " was cancelled"
		}
	case "failed":
		w.Error = t.err
	}
	if !t.finished.IsZero() {
		// Kept while the table retains the task: its retention after the
		// result was read, counted from creation as the extension does.
		ttl := (t.finished.Sub(t.created) + c.retainFor()).Milliseconds()
		w.TTLMs = &ttl
	}
	if t.status == "input_required" {
		w.StatusMessage = t.id + " waits for input: " + shorten(t.prompt, 200)
		w.InputRequests = map[string]any{inputKey(t.inputKey): map[string]any{
			"method": "elicitation/create",
			"params": map[string]any{
				"mode":    "form",
				"message": fmt.Sprintf("%s seems to wait for input. Its last line: %s", t.id, shorten(t.prompt, 500)),
				"requestedSchema": map[string]any{
					"type": "object",
					"properties": map[string]any{"text": map[string]any{"type": "string",
						"description": "what to type; a newline is added"}},
					"required": []string{"text"},
				},
			},
		}}
	}
	return w
}

func inputKey(n int) string { return fmt.Sprintf("input-%d", n) }

func (c *conn) retainFor() time.Duration {
	if d := c.svc.cfg.Agent.Tasks.RetainFor; d > 0 {
		return d
	}
	return time.Hour // task.Options' default
}

// updateTask serves tasks/update: an accepted answer to the current
// input request is typed into the shell, with a newline. Keys not
// outstanding are ignored, as the extension asks.
func (c *conn) updateTask(ctx context.Context, p *taskParams) (*ackResult, error) {
	t, err := c.lookup(p)
	if err != nil {
		return nil, err
	}
	c.ext.mu.Lock()
	key, outstanding := inputKey(t.inputKey), t.status == "input_required" && t.inputKey > t.answered
	c.ext.mu.Unlock()
	raw, ok := p.InputResponses[key]
	if !outstanding || !ok {
		return &ackResult{ResultType: "complete"}, nil
	}
	var answer struct {
		Action  string `json:"action"`
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("inputResponses[%q] is not an elicitation result: %v", key, err)}
	}
	text := strings.TrimSuffix(answer.Content.Text, "\n")
	if answer.Action == "accept" && strings.ContainsAny(text, "\r\n") {
		// Typed as it is, a second line would answer a prompt the client
		// has not seen yet.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("inputResponses[%q]: the answer is typed as one line, and this one holds a line break; send one line per prompt", key)}
	}
	c.ext.mu.Lock()
	t.answered = t.inputKey
	c.ext.mu.Unlock()
	if answer.Action != "accept" {
		return &ackResult{ResultType: "complete"}, nil // declined: the task goes on waiting; the client may cancel it
	}
	text += "\n"
	res, err := c.callTool(ctx, "task_input", map[string]any{"task_id": t.id, "text": text})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the input was not written: " + res.Text}
	}
	return &ackResult{ResultType: "complete"}, nil
}

// cancelTask serves tasks/cancel as task_cancel: the task is stopped (its
// processes signalled and reaped) and then reads as cancelled; one that
// finished first keeps its end.
func (c *conn) cancelTask(ctx context.Context, p *taskParams) (*ackResult, error) {
	t, err := c.lookup(p)
	if err != nil {
		return nil, err
	}
	if _, err := c.callTool(ctx, "task_cancel", map[string]any{"task_id": t.id}); err != nil {
		return nil, err
	}
	return &ackResult{ResultType: "complete"}, nil
}
