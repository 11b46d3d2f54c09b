package acpserver

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/internal/rpcline"
)

// The SDK decodes a request's params itself and, when they do not fit,
// answers "Invalid params" with Go's decoding error in data only
// ("cannot unmarshal string into Go struct field Alias.protocolVersion of
// type acp.ProtocolVersion"), or takes what it cannot place for another
// variant (an MCP server without its args becomes an HTTP one with no
// URL). checkParams runs first, in the line guard (rpcline's Check): it
// decodes as the SDK will and, when that fails or would go wrong, answers
// in message what is wrong and what to send. The SDK then never sees the
// request.

// served are the methods offstage answers, each with an example of its
// params that an error message shows; notOffered the ones the agent
// answers itself, saying why it does not offer them. Any other method
// gets "Method not found" naming it.
var (
	served = []struct{ method, example string }{
		{acp.AgentMethodInitialize, `{"protocolVersion": 1, "clientCapabilities": {}}`},
		{acp.AgentMethodAuthenticate, `{"methodId": "…"}`},
		{acp.AgentMethodSessionNew, `{"cwd": "/absolute/project/dir", "mcpServers": []}`},
		{acp.AgentMethodSessionLoad, `{"sessionId": "…", "cwd": "/absolute/project/dir", "mcpServers": []}`},
		{acp.AgentMethodSessionList, `{} or {"cwd": "/absolute/project/dir"}`},
		{acp.AgentMethodSessionPrompt, `{"sessionId": "…", "prompt": [{"type": "text", "text": "…"}]}`},
		{acp.AgentMethodSessionCancel, `{"sessionId": "…"}`},
		{acp.AgentMethodSessionClose, `{"sessionId": "…"}`},
	}
	notOfferedMethods = []string{acp.AgentMethodSessionResume, acp.AgentMethodSessionSetMode, acp.AgentMethodSessionSetConfigOption}
)

// checkParams refuses a request (or drops a notification) whose params
// the SDK would reject or misread, with a sentence saying what to send.
func checkParams(method string, params json.RawMessage) error {
	i := slices.IndexFunc(served, func(m struct{ method, example string }) bool { return m.method == method })
	switch {
	case strings.HasPrefix(method, "$/"), slices.Contains(notOfferedMethods, method):
		return nil // the protocol's own ($/cancel_request), or the agent's to refuse
	case i < 0:
		return &rpcline.Error{Code: -32601, Message: fmt.Sprintf("Method not found: offstage serves no method %q; it serves %s", method, servedMethods())}
	}
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	var err error
	switch method {
	case acp.AgentMethodInitialize:
		err = decodeAs[acp.InitializeRequest](params)
	case acp.AgentMethodAuthenticate:
		err = decodeAs[acp.AuthenticateRequest](params)
	case acp.AgentMethodSessionNew: // taken by srv.take; here for completeness
		_, err = newSessionParams(params)
	case acp.AgentMethodSessionLoad:
		err = decodeAs[acp.LoadSessionRequest](params)
		if err == nil {
			err = cmp.Or(needSessionID(params), checkMcpServers(params))
		}
	case acp.AgentMethodSessionList:
		err = decodeAs[acp.ListSessionsRequest](params)
	case acp.AgentMethodSessionPrompt: // taken by srv.take; here for completeness
		_, err = promptParams(params)
	case acp.AgentMethodSessionCancel:
		err = cmp.Or(decodeAs[acp.CancelNotification](params), needSessionID(params))
	case acp.AgentMethodSessionClose: // taken by srv.take; here for completeness
		_, err = closeSessionParams(params)
	}
	if err == nil {
		return nil
	}
	return paramsError(method, err)
}

// paramsError is the invalid-params error of a served method whose
// params do not fit: what is wrong, and an example of what to send.
func paramsError(method string, err error) error {
	i := slices.IndexFunc(served, func(m struct{ method, example string }) bool { return m.method == method })
	return &rpcline.Error{Code: -32602, Message: fmt.Sprintf("Invalid params: %s; %s takes params such as %s", err, method, served[i].example)}
}

// servedMethods lists the methods offstage serves, for "Method not
// found".
func servedMethods() string {
	names := make([]string, len(served))
	for i, m := range served {
		names[i] = m.method
	}
	return strings.Join(names, ", ")
}

// decodeAs decodes params as the SDK does (its type's decoding, then its
// Validate) and says in words what does not fit.
func decodeAs[T any](params json.RawMessage) error {
	_, err := decoded[T](params)
	return err
}

// decoded is decodeAs, and what it decoded.
func decoded[T any](params json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(params, &v); err != nil {
		return v, describeDecodeError(err)
	}
	if val, ok := any(&v).(interface{ Validate() error }); ok {
		if err := val.Validate(); err != nil {
			return v, err // "cwd is required": already words
		}
	}
	return v, nil
}

// closeSessionParams decodes session/close's params as the SDK does, and
// refuses them without a sessionId.
func closeSessionParams(params json.RawMessage) (acp.CloseSessionRequest, error) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	p, err := decoded[acp.CloseSessionRequest](params)
	return p, cmp.Or(err, needSessionID(params))
}

// newSessionParams decodes session/new's params as the SDK does, and
// checks its MCP servers.
func newSessionParams(params json.RawMessage) (acp.NewSessionRequest, error) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	p, err := decoded[acp.NewSessionRequest](params)
	if err == nil {
		err = checkMcpServers(params)
	}
	return p, err
}

// describeDecodeError turns Go's decoding error into what a client can
// act on: which field, what it is, what it must be.
func describeDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("the params do not fit the method (%v)", err)
	}
	if te.Field == "" {
		return fmt.Errorf("params must be %s, not %s", expected(te.Type), article(te.Value))
	}
	return fmt.Errorf("%s must be %s, not %s", te.Field, expected(te.Type), article(te.Value))
}

// expected says in words what JSON a Go type takes.
func expected(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[acp.ProtocolVersion]():
		return fmt.Sprintf("an integer (the protocol version, %d)", acp.ProtocolVersionNumber)
	case reflect.TypeFor[acp.SessionId]():
		return "a string (the sessionId that session/new gave)"
	case reflect.TypeFor[[]acp.ContentBlock]():
		return `an array of content blocks, such as [{"type": "text", "text": "…"}]`
	case reflect.TypeFor[[]acp.McpServer]():
		return "an array of MCP servers ([] for none)"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return expected(t.Elem())
	}
	return "an object"
}

// article names a JSON kind as Go's decoder reports it ("string",
// "number 1.5") with its article.
func article(value string) string {
	switch {
	case strings.HasPrefix(value, "array"), strings.HasPrefix(value, "object"):
		return "an " + value
	case value == "":
		return "that"
	}
	return "a " + value
}

// needSessionID refuses params without a sessionId (the SDK takes a
// missing one as "").
func needSessionID(params json.RawMessage) error {
	var p struct {
		SessionID *string `json:"sessionId"`
	}
	if json.Unmarshal(params, &p) == nil && (p.SessionID == nil || *p.SessionID == "") {
		return errSessionID
	}
	return nil
}

var errSessionID = errors.New("sessionId is required: the id session/new gave")

// checkPrompt finds the prompt block that is not a content block.
func checkPrompt(params json.RawMessage) error {
	var p struct {
		Prompt []json.RawMessage `json:"prompt"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	for i, raw := range p.Prompt {
		var b acp.ContentBlock
		if err := json.Unmarshal(raw, &b); err != nil {
			return fmt.Errorf(`prompt[%d] is not a content block: send {"type": "text", "text": "…"}, or a resource or resource_link block`, i)
		}
	}
	return nil
}

// checkMcpServers refuses an MCP server the SDK would misread: its
// decoder takes any object it cannot place for an HTTP server, so a stdio
// server without its args becomes one with no URL.
func checkMcpServers(params json.RawMessage) error {
	var p struct {
		McpServers []map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return errors.New("mcpServers must be an array of objects ([] for none)")
	}
	for i, m := range p.McpServers {
		var kind string
		if raw, ok := m["type"]; ok && json.Unmarshal(raw, &kind) != nil {
			return fmt.Errorf("mcpServers[%d].type must be a string: \"http\" or \"sse\", or absent for a stdio server", i)
		}
		var need []string
		switch kind {
		case "", "stdio":
			need = []string{"name:string", "command:string", "args:array", "env:array"}
		case "http", "sse":
			need = []string{"name:string", "url:string", "headers:array"}
		default:
			return fmt.Errorf("mcpServers[%d] is of type %q, which offstage does not connect: it takes stdio servers (no type), \"http\" and \"sse\"", i, kind)
		}
		for _, n := range need {
			name, want, _ := strings.Cut(n, ":")
			raw, ok := m[name]
			switch {
			case !ok:
				return fmt.Errorf("mcpServers[%d] (%s) lacks %s, %s", i, orStdio(kind), name, fieldHint(name))
			case want == "string" && (len(raw) == 0 || raw[0] != '"'), want == "array" && (len(raw) == 0 || raw[0] != '['):
				return fmt.Errorf("mcpServers[%d].%s must be %s", i, name, fieldHint(name))
			}
		}
		if cmd := m["command"]; cmd != nil && string(cmd) == `""` {
			return fmt.Errorf("mcpServers[%d].command is empty: send the program to run", i)
		}
	}
	return nil
}

func orStdio(kind string) string {
	if kind == "" {
		return "stdio"
	}
	return kind
}

func fieldHint(name string) string {
	switch name {
	case "args":
		return "an array of strings ([] for none)"
	case "env":
		return `an array of {"name", "value"} objects ([] for none)`
	case "headers":
		return `an array of {"name", "value"} objects ([] for none)`
	}
	return "a string"
}
