package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/offstage/offstage/task"
)

// Tool is one tool a model can call: a name, a description that steers the
// model, the JSON Schema of its input and of its results, and the call
// itself.
//
// The schemas are plain, for every model API and MCP client: an optional
// field is one that is not required (never a union with "null", which
// OpenAI's strict mode and Gemini refuse), and a field that takes fixed
// values lists them as its enum (Enum).
type Tool struct {
	Name        string
	Description string
	// InputSchema is the schema the tool publishes. Call validates
	// arguments against the schema generated from the input type, which
	// Enum does not narrow: the tool itself says, in a sentence, which
	// values it takes.
	InputSchema *jsonschema.Schema
	// OutputSchema is the schema of the Text of every result that is not
	// an error (a result cut to fit the budget adds "truncated"); nil for
	// a tool whose output type is not a struct.
	OutputSchema *jsonschema.Schema
	// Title is a short human name, for permission prompts and lists.
	Title string
	// Safety says what a call can do; surfaces turn it into permission
	// requests (ACP) and hints (MCP annotations).
	Safety Safety
	// Idempotent: calling it again with the same arguments does nothing
	// more. OpenWorld: it reaches beyond offstage's own state (commands
	// may touch anything; a sub-agent calls a model).
	Idempotent, OpenWorld bool
	// StartsTasks: a call may start a task (bash, spawn_agent). A surface
	// that runs a turn's calls at once orders these with InCallOrder, so
	// their task ids follow the order of the calls.
	StartsTasks bool

	resolved  *jsonschema.Resolved
	decode    func(args json.RawMessage) error // decodes into the typed input, to check it
	call      func(ctx context.Context, v *task.View, args json.RawMessage) (any, error)
	budget    int
	asSent    bool     // DefineSchema's: ids are not normalized, the arguments are another program's
	needsView bool     // a Set's: Call refuses a nil view (a tool of Define's may not use it)
	shared    *schemas // the schemas newTool shares; nil for DefineSchema's
	// inputJSON is jsonOf marshalled, shared like it; InputJSON checks
	// that InputSchema is still jsonOf.
	inputJSON json.RawMessage
	jsonOf    *jsonschema.Schema
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

// Consequential reports whether a call of this class runs or ends
// something (Execute or Destructive): the calls a surface asks its user
// about (ACP's permission requests, MCP's destructive hint).
func (s Safety) Consequential() bool { return s == Execute || s == Destructive }

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

// Enum publishes the values field takes as its enum in InputSchema (for
// an array, the values of its items), and returns t. InputSchema becomes
// a new schema: the one it replaces may be shared with other tools, and
// is left alone (tools built by Define share one schema per pair of types,
// and the schema with a given enum, too). It panics if the input has no
// such field, which is a programming error.
func (t *Tool) Enum(field string, values ...string) *Tool {
	base := t.InputSchema
	prop := base.Properties[field]
	if prop == nil {
		panic(fmt.Sprintf("tools: %s has no input field %q", t.Name, field))
	}
	if t.shared != nil {
		key := enumKey{base, field, strings.Join(values, "\x00")}
		t.shared.mu.Lock()
		defer t.shared.mu.Unlock()
		if p, ok := t.shared.published[key]; ok {
			t.InputSchema, t.inputJSON, t.jsonOf = p.schema, p.json, p.schema
			return t
		}
		defer func() {
			if t.shared.published == nil {
				t.shared.published = make(map[enumKey]publishedSchema)
			}
			raw, err := json.Marshal(t.InputSchema)
			if err != nil {
				panic(fmt.Sprintf("tools: marshal schema for %s: %v", t.Name, err))
			}
			t.inputJSON, t.jsonOf = raw, t.InputSchema
			t.shared.published[key] = publishedSchema{t.InputSchema, raw}
		}()
	}
	s := *base
	s.Properties = maps.Clone(base.Properties)
	p := *prop
	target := &p
	if p.Type == "array" && p.Items != nil {
		items := *p.Items
		p.Items = &items
		target = &items
	}
	target.Enum = make([]any, len(values))
	for i, v := range values {
		target.Enum[i] = v
	}
	s.Properties[field] = &p
	t.InputSchema = &s
	return t
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

// ErrNoTool is what Call returns on a nil *Tool: Set.Tool found no tool
// of the name it was given.
var ErrNoTool = errors.New("tools: no such tool (Set.Tool returned nil)")

// ErrNoView is what Call returns for a nil *task.View on a Set's tools,
// which act for a caller, whose view (Table.View) they need.
var ErrNoView = errors.New("tools: Call needs the caller's *task.View (Table.View), not nil")

// Call runs the tool for the caller whose view is v, with the raw JSON
// arguments the model sent. Bad arguments, unknown or foreign ids and
// other mistakes come back as a Result with IsError set; a Go error means
// the runtime itself failed (it cannot start a process, say). Call never
// panics on any input; on a nil *Tool (a name Set.Tool does not know) it
// returns ErrNoTool, and a Set's tool given a nil view ErrNoView.
func (t *Tool) Call(ctx context.Context, v *task.View, args json.RawMessage) (Result, error) {
	switch {
	case t == nil:
		return Result{}, ErrNoTool
	case v == nil && t.needsView:
		return Result{}, ErrNoView
	}
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
// nobody is asked about a call that could not run. A nil *Tool accepts
// nothing: Check says so, as an error result without a tool's budget.
func (t *Tool) Check(args json.RawMessage) (Result, bool) {
	if t == nil {
		out := ErrorOutput{Error: "There is no such tool."}
		text, _ := encode(out)
		return Result{Text: string(text), IsError: true, Data: out}, false
	}
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

// repeatedKey returns a key the arguments' object gives twice, if any.
// Arguments that are not an object, or not valid JSON, are left to the
// checks after it.
func repeatedKey(args json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(args))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return "", false
		}
		if seen[key] {
			return key, true
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return "", false
		}
	}
	return "", false
}

// checkArgs parses the arguments and validates them against the schema.
func (t *Tool) checkArgs(args json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		args, trimmed = json.RawMessage("{}"), json.RawMessage("{}")
	}
	if string(trimmed) == "{}" && t.shared != nil && t.resolved == t.shared.resolved && t.shared.emptyValid(t) {
		return emptyObject, nil
	}
	if key, ok := repeatedKey(args); ok {
		// JSON takes the last; a screen that asks the user to approve a
		// call may show the first. One value each, so both agree.
		return nil, fail("The argument %q is given more than once; send each argument once.", shorten(key, 100))
	}
	var value any
	if err := json.Unmarshal(args, &value); err != nil {
		if te := typeErrorIn(args, err); te != nil {
			return nil, te
		}
		return nil, fail("The arguments are not valid JSON (%s); send one JSON object.", shorten(err.Error(), 200))
	}
	obj, ok := value.(map[string]any)
	if !ok {
		return nil, fail("The arguments must be a JSON object, not %s.", jsonKind(value))
	}
	if t.asSent {
		// Another program's tool (an MCP server's), which checks its own
		// arguments. Its schema is not run here: one that refers to itself
		// without end ({"$ref": "#/$defs/a"} in $defs.a) sends a checker into
		// recursion until the stack overflows, which would end the whole
		// agent, every session with it.
		var compact bytes.Buffer
		if err := json.Compact(&compact, args); err != nil {
			return nil, err
		}
		return compact.Bytes(), nil
	}
	normalizeIDs(obj)
	for k, v := range obj {
		if v == nil {
			delete(obj, k) // null is "not given": the schema has no null
		}
	}
	if err := paramError(t.Name, t.resolved.Schema(), obj); err != nil {
		return nil, err
	}
	if err := t.resolved.Validate(obj); err != nil {
		return nil, fail("The arguments do not match the %s schema: %s.", t.Name, shorten(strings.TrimSuffix(err.Error(), "."), 300))
	}
	if hasInexact(obj) {
		exactNumbers(obj, args)
	}
	fixed, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return fixed, nil
}

// hasInexact reports whether v (decoded into any) holds a number of
// magnitude 2⁵³ or more: float64 may have rounded it (-2⁶³, a valid
// int64, read back as -9223372036854776000, which is not), so it is
// passed on as sent (exactNumbers).
func hasInexact(v any) bool {
	switch x := v.(type) {
	case float64:
		return math.Abs(x) >= 1<<53
	case map[string]any:
		for _, e := range x {
			if hasInexact(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(x, hasInexact)
	}
	return false
}

// exactNumbers puts back, in obj (args decoded into any, then checked
// and normalized), each number as args wrote it, where obj still holds
// a number at that place: the checks read float64, but the tool's input
// is decoded from what obj marshals to.
func exactNumbers(obj map[string]any, args json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var sent map[string]any
	if dec.Decode(&sent) != nil {
		return
	}
	var put func(v, as any) any
	put = func(v, as any) any {
		switch x := v.(type) {
		case float64:
			if n, ok := as.(json.Number); ok {
				return n
			}
		case map[string]any:
			if m, ok := as.(map[string]any); ok {
				for k, e := range x {
					x[k] = put(e, m[k])
				}
			}
		case []any:
			if l, ok := as.([]any); ok && len(l) == len(x) {
				for i, e := range x {
					x[i] = put(e, l[i])
				}
			}
		}
		return v
	}
	put(obj, sent)
}

// normalizeIDs turns task ids sent as JSON numbers (7) into strings ("7"),
// which the id resolution then accepts as bare numbers.
func normalizeIDs(obj map[string]any) {
	for _, k := range []string{"task_id", "until_port"} { // a port is a string too ("any")
		if n, ok := obj[k].(float64); ok {
			obj[k] = fmt.Sprint(n)
		}
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
// run returns the output (marshalled compactly, within budget bytes; 0
// means 16 KiB), an error from Fail for a mistake the model can fix, or
// any other error when the runtime itself failed. When Out is a struct
// (or a pointer to one), the output schema is generated from it, with no
// null in it: a slice, map or pointer field that may be nil must then be
// omitempty. Otherwise (any, say) the tool has no output schema. The
// tool's schemas are its own, the caller's to change (Enum); the tools of
// a Set share theirs with every Set, and must not be changed. It panics
// if In or Out has no valid schema, which is a programming error.
func Define[In, Out any](name, description string, budget int, run func(context.Context, *task.View, In) (Out, error)) *Tool {
	if budget <= 0 {
		budget = defaultBudget
	}
	t := newTool(name, description, budget, run)
	// The caller's to change (a Set's tools share theirs): its own copies.
	t.InputSchema, t.shared, t.inputJSON, t.jsonOf = t.InputSchema.CloneSchemas(), nil, nil, nil
	if t.OutputSchema != nil {
		t.OutputSchema = t.OutputSchema.CloneSchemas()
	}
	return t
}

// DefineShared is Define for a tool made again and again (per session)
// from the same types: its schemas are not its own but shared, read-only,
// with every tool of the same In and Out, as a Set's tools share theirs,
// and must not be changed. Enum still works: it derives a new schema,
// made and marshalled once per process for each field and list of values
// (kept for the process's life: use it for a few lists, not per request).
// Made with Define, agent's spawn_agent cloned its schemas and marshalled
// them again: ~100 KB and ~200 µs of every new session.
func DefineShared[In, Out any](name, description string, budget int, run func(context.Context, *task.View, In) (Out, error)) *Tool {
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

// schemas is what newTool derives from a tool's input and output types
// by reflection. It is the same for every Set, so it is built once per
// process and shared, read-only, by every tool of those types: a server
// with hundreds of sessions held hundreds of copies (81% of an idle MCP
// session's memory was tools.New rebuilding them).
type schemas struct {
	input     *jsonschema.Schema // published (Enum derives new ones, never changes it)
	inputJSON json.RawMessage    // input, marshalled
	output    *jsonschema.Schema // nil when the output is not a struct
	resolved  *jsonschema.Resolved
	published map[enumKey]publishedSchema // guarded by mu: input with an enum set
	mu        sync.Mutex

	// empty is whether {} passes checkArgs (0 not known yet, 1 yes, 2
	// no): the same for every tool of these types, so a call with no
	// arguments (task_list's) is not parsed, validated and marshalled
	// again each time, about a third of a direct turn's tool call.
	empty atomic.Int32
}

// emptyObject is the arguments {}, read-only: what checkArgs gives the
// typed tools (never DefineSchema's, whose run gets them) for no arguments.
var emptyObject = json.RawMessage("{}")

// emptyValid reports whether {} passes t's checks, checking the first
// time. t is one of the tools sharing s.
func (s *schemas) emptyValid(t *Tool) bool {
	switch s.empty.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	if paramError(t.Name, s.resolved.Schema(), map[string]any{}) != nil || s.resolved.Validate(map[string]any{}) != nil {
		s.empty.Store(2)
		return false
	}
	s.empty.Store(1)
	return true
}

// publishedSchema is a schema derived by Enum, and its JSON.
type publishedSchema struct {
	schema *jsonschema.Schema
	json   json.RawMessage
}

// enumKey names a schema derived by Enum.
type enumKey struct {
	base          *jsonschema.Schema
	field, values string
}

// schemaCache maps the pair of a tool's input and output types to their
// *schemas. It is the package's one piece of shared state: a cache of
// values that never change once stored.
var schemaCache sync.Map

// schemasFor returns the schemas of In and Out, building them the first
// time.
func schemasFor[In, Out any](name string) *schemas {
	key := [2]reflect.Type{reflect.TypeFor[In](), reflect.TypeFor[Out]()}
	if sc, ok := schemaCache.Load(key); ok {
		return sc.(*schemas)
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tools: schema for %s: %v", name, err)) // a bug in this package
	}
	plain(schema)
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tools: resolve schema for %s: %v", name, err))
	}
	var output *jsonschema.Schema
	if out := reflect.TypeFor[Out](); out.Kind() == reflect.Struct || out.Kind() == reflect.Pointer && out.Elem().Kind() == reflect.Struct {
		if output, err = jsonschema.For[Out](nil); err != nil {
			panic(fmt.Sprintf("tools: output schema for %s: %v", name, err))
		}
		plain(output)
		if output.Properties == nil {
			output.Properties = map[string]*jsonschema.Schema{}
		}
		output.Properties["truncated"] = &jsonschema.Schema{Type: "string", Description: "set when the result was cut to fit its budget"}
	}
	// The published schema is a copy, so that validation never sees what
	// Enum derives from it.
	sc := &schemas{input: schema.CloneSchemas(), output: output, resolved: resolved}
	if sc.inputJSON, err = json.Marshal(sc.input); err != nil {
		panic(fmt.Sprintf("tools: marshal schema for %s: %v", name, err))
	}
	actual, _ := schemaCache.LoadOrStore(key, sc)
	return actual.(*schemas)
}

// newTool binds a typed run function: arguments are decoded into In after
// validation, and the output is marshalled compactly.
func newTool[In, Out any](name, description string, budget int, run func(context.Context, *task.View, In) (Out, error)) *Tool {
	sc := schemasFor[In, Out](name)
	// {} leaves a struct as it is, and is what most calls of a tool with
	// no required parameter send: not run through a decoder (two per call).
	emptyIsZero := reflect.TypeFor[In]().Kind() == reflect.Struct
	decode := func(args json.RawMessage, in *In) error {
		if emptyIsZero && string(args) == "{}" {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(in); err != nil {
			if te := typeError(err); te != nil {
				return withFieldDoc(te, err, reflect.TypeFor[In]())
			}
			return fail("The arguments do not fit %s: %s.", name, shorten(err.Error(), 200))
		}
		return nil
	}
	return &Tool{
		Name: name, Description: strings.TrimSpace(description), InputSchema: sc.input, OutputSchema: sc.output,
		resolved: sc.resolved, budget: budget, shared: sc, inputJSON: sc.inputJSON, jsonOf: sc.input,
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

// result marshals out, making sure the text stays within the budget. A
// result too large even when cut is an error result (ask for less), as it
// no longer has the tool's output schema.
func (t *Tool) result(out any, isError bool) Result {
	text, err := encode(out)
	if err != nil {
		text, _ = encode(ErrorOutput{Error: "the result could not be encoded: " + err.Error()})
		isError = true
	}
	if len(text) > t.budget {
		var whole bool
		out, text, whole = fitBudget(out, t.budget, t.askLess())
		isError = isError || !whole
	}
	return Result{Text: string(text), IsError: isError, Data: out}
}

// InputJSON returns InputSchema marshalled. Tools of the same input type
// share one, built once per process; it must not be changed.
func (t *Tool) InputJSON() (json.RawMessage, error) {
	if t.inputJSON != nil && t.jsonOf == t.InputSchema {
		return t.inputJSON, nil
	}
	return json.Marshal(t.InputSchema)
}

// askLess is what a result too large to show says: ask for less, with
// the parameters the tool has (a model told to pass "a filter" to a tool
// that takes none is stuck).
func (t *Tool) askLess() string {
	var names []string
	if t.InputSchema != nil {
		for name := range t.InputSchema.Properties {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "Ask for less."
	}
	slices.Sort(names)
	return "Ask for less with its parameters (" + strings.Join(names, ", ") + ")."
}

// plain turns what jsonschema.For makes of pointers and slices, a union
// of a type and "null", into the type alone, everywhere in s: nil is
// marshalled as a missing field (omitempty), or is never sent.
func plain(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && slices.Contains(s.Types, "null") {
		typ := s.Types[0]
		if typ == "null" {
			typ = s.Types[1]
		}
		s.Type, s.Types = typ, nil
	}
	for _, p := range s.Properties {
		plain(p)
	}
	plain(s.Items)
	plain(s.AdditionalProperties)
}
