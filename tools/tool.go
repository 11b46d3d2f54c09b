package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/offstage/offstage/task"
)

// Tool is one tool a model can call: a name, a description that steers the
// model, the JSON Schema of its input, and the call itself.
type Tool struct {
	Name        string
	Description string
	InputSchema *jsonschema.Schema
	// Title is a short human name, for permission prompts and lists.
	Title string
	// Safety says what a call can do; surfaces turn it into permission
	// requests (ACP) and hints (MCP annotations).
	Safety Safety
	// Idempotent: calling it again with the same arguments does nothing
	// more. OpenWorld: it reaches beyond offstage's own state (commands
	// may touch anything; a sub-agent calls a model).
	Idempotent, OpenWorld bool

	resolved *jsonschema.Resolved
	decode   func(args json.RawMessage) error // decodes into the typed input, to check it
	call     func(ctx context.Context, v *task.View, args json.RawMessage) (any, error)
	budget   int
	asSent   bool // DefineSchema's: ids are not normalized, the arguments are another program's
}

// Safety classes what calling a tool can do. Every surface uses the same
// classes: MCP clients get them as tool annotations, ACP clients as tool
// kinds and as permission requests for Execute and Destructive calls.
type Safety uint8

const (
	// ReadOnly tools look at the caller's own tasks and change nothing
	// else (a result they return is marked delivered, which is the
	// caller's own bookkeeping).
	ReadOnly Safety = iota
	// Mutating tools change state that can be changed back. None of
	// offstage's own tools is; it is there for tools embedders define.
	Mutating
	// Destructive tools end or remove something: task_cancel kills a
	// command and every process it started.
	Destructive
	// Execute tools run something that can do anything: a shell command,
	// input to a running program, a sub-agent with its own tools.
	Execute
)

var safetyNames = [...]string{"read_only", "mutating", "destructive", "execute"}

func (s Safety) String() string {
	if int(s) < len(safetyNames) {
		return safetyNames[s]
	}
	return fmt.Sprintf("Safety(%d)", uint8(s))
}

// Result is what a tool call gives back. Text is a compact JSON object for
// the model, never larger than the set's Config.ResultBudget; Data is the
// same object as a Go value, for UIs. IsError marks a call the model should
// fix: Text then holds {"error": "..."} with one sentence saying how.
type Result struct {
	Text    string
	IsError bool
	Data    any
}

// ErrorOutput is the Data of an error result.
type ErrorOutput struct {
	Error string `json:"error"`
}

// toolError is a failure the model caused and can fix: it becomes an error
// result, not a Go error.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

// fail returns a tool error with a sentence the model can act on.
func fail(format string, args ...any) error {
	return &toolError{msg: fmt.Sprintf(format, args...)}
}

// Call runs the tool for the caller whose view is v, with the raw JSON
// arguments the model sent. Bad arguments, unknown or foreign ids and
// other mistakes come back as a Result with IsError set; a Go error means
// the runtime itself failed (it cannot start a process, say). Call never
// panics on any input.
func (t *Tool) Call(ctx context.Context, v *task.View, args json.RawMessage) (Result, error) {
	args, err := t.checkArgs(args)
	if err == nil {
		var out any
		out, err = t.call(ctx, v, args)
		if err == nil {
			return t.result(out, false), nil
		}
	}
	if te := (*toolError)(nil); errors.As(err, &te) {
		return t.result(ErrorOutput{Error: te.msg}, true), nil
	}
	return Result{}, fmt.Errorf("tool %s: %w", t.Name, err)
}

// Check tells whether Call would accept args, without calling: the
// arguments are parsed, validated against the input schema and decoded
// into the tool's typed input (unknown fields refused), as Call does first.
// When they are not accepted it returns false and the error result Call
// would give. A surface checks before it asks a person about a call, so
// nobody is asked about a call that could not run.
func (t *Tool) Check(args json.RawMessage) (Result, bool) {
	fixed, err := t.checkArgs(args)
	if err == nil && t.decode != nil {
		err = t.decode(fixed)
	}
	if err == nil {
		return Result{}, true
	}
	msg := err.Error()
	if te := (*toolError)(nil); errors.As(err, &te) {
		msg = te.msg
	}
	return t.result(ErrorOutput{Error: msg}, true), false
}

// checkArgs parses the arguments and validates them against the schema.
func (t *Tool) checkArgs(args json.RawMessage) (json.RawMessage, error) {
	if trimmed := bytes.TrimSpace(args); len(trimmed) == 0 || string(trimmed) == "null" {
		args = json.RawMessage("{}")
	}
	var value any
	if err := json.Unmarshal(args, &value); err != nil {
		return nil, fail("The arguments are not valid JSON (%s); send one JSON object.", shorten(err.Error(), 200))
	}
	obj, ok := value.(map[string]any)
	if !ok {
		return nil, fail("The arguments must be a JSON object, not %s.", jsonKind(value))
	}
	if !t.asSent {
		normalizeIDs(obj)
	}
	if err := t.resolved.Validate(obj); err != nil {
		return nil, fail("The arguments do not match the %s schema: %s.", t.Name, shorten(strings.TrimSuffix(err.Error(), "."), 300))
	}
	fixed, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return fixed, nil
}

// normalizeIDs turns task ids sent as JSON numbers (7) into strings ("7"),
// which the id resolution then accepts as bare numbers.
func normalizeIDs(obj map[string]any) {
	if n, ok := obj["task_id"].(float64); ok {
		obj["task_id"] = fmt.Sprint(n)
	}
	if ids, ok := obj["task_ids"].([]any); ok {
		for i, id := range ids {
			if n, ok := id.(float64); ok {
				ids[i] = fmt.Sprint(n)
			}
		}
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "something else"
}

// Fail returns an error that a tool defined with Define reports to the
// model as an error result with this sentence, instead of a Go error.
func Fail(format string, args ...any) error { return fail(format, args...) }

// Define makes a tool on the same mechanism as the built-in ones: In is a
// struct with json and jsonschema tags from which the input schema is
// generated; arguments are validated against it and decoded into In
// (unknown fields refused) before run is called with the caller's view.
// run returns the output object (marshalled compactly, within budget bytes;
// 0 means 16 KiB), an error from Fail for a mistake the model can fix, or
// any other error when the runtime itself failed. It panics if In has no
// valid schema, which is a programming error.
func Define[In any](name, description string, budget int, run func(context.Context, *task.View, In) (any, error)) *Tool {
	if budget <= 0 {
		budget = defaultBudget
	}
	return newTool(name, description, budget, run)
}

// DefineSchema makes a tool whose input schema is given rather than
// generated from a Go type: a tool another program serves (an MCP
// server's, say), whose schema arrives at run time. Arguments are
// validated against schema, as Define's are, and handed to run as the
// JSON object the model sent; run returns as Define's does (the output
// object, capped to budget bytes with a note saying so, 0 meaning 16 KiB;
// an error from Fail for a result the model should read as an error; any
// other error when the runtime failed). It returns an error, not a
// panic, when schema is not one it can validate with: the schema is
// data, not code.
func DefineSchema(name, description string, schema *jsonschema.Schema, budget int, run func(context.Context, *task.View, json.RawMessage) (any, error)) (*Tool, error) {
	if schema == nil {
		return nil, fmt.Errorf("tools: %s has no input schema", name)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("tools: the input schema of %s: %w", name, err)
	}
	if budget <= 0 {
		budget = defaultBudget
	}
	return &Tool{Name: name, Description: strings.TrimSpace(description), InputSchema: schema,
		resolved: resolved, budget: budget, call: run, asSent: true}, nil
}

// newTool binds a typed run function: arguments are decoded into In after
// validation, and the output is marshalled compactly.
func newTool[In any](name, description string, budget int, run func(context.Context, *task.View, In) (any, error)) *Tool {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tools: schema for %s: %v", name, err)) // a bug in this package
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tools: resolve schema for %s: %v", name, err))
	}
	decode := func(args json.RawMessage, in *In) error {
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(in); err != nil {
			return fail("The arguments do not fit %s: %s.", name, shorten(err.Error(), 200))
		}
		return nil
	}
	return &Tool{
		Name: name, Description: strings.TrimSpace(description), InputSchema: schema,
		resolved: resolved, budget: budget,
		decode: func(args json.RawMessage) error {
			var in In
			return decode(args, &in)
		},
		call: func(ctx context.Context, v *task.View, args json.RawMessage) (any, error) {
			var in In
			if err := decode(args, &in); err != nil {
				return nil, err
			}
			return run(ctx, v, in)
		},
	}
}

// result marshals out, making sure the text stays within the budget.
func (t *Tool) result(out any, isError bool) Result {
	text, err := json.Marshal(out)
	if err != nil {
		text, _ = json.Marshal(ErrorOutput{Error: "the result could not be encoded: " + err.Error()})
		isError = true
	}
	if len(text) > t.budget {
		out, text = fitBudget(out, t.budget)
	}
	return Result{Text: string(text), IsError: isError, Data: out}
}
