package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/offstage/offstage/internal/rpcline"
)

// checkParams refuses, on stdio and over HTTP, a request whose params have a field of
// the wrong JSON type, with a sentence naming the field and what to send,
// and a tools/call whose arguments are not UTF-8.
// The SDK would refuse it too, but in Go's words ("cannot unmarshal
// number into Go struct field … of type string") and quoting the whole
// params back, a 5 MB argument included. Only the fields the SDK decodes
// into a fixed type are looked at; everything else is the SDK's to check.
func checkParams(method string, params json.RawMessage) error {
	var fields []paramField
	switch method {
	case "tools/call":
		fields = []paramField{{"name", '"', `a tool's name, such as "bash"`}, {"arguments", '{', `an object of the tool's arguments, such as {"command": "ls"}`}}
	case "tasks/get", "tasks/update", "tasks/cancel":
		fields = []paramField{{"taskId", '"', `the task's id, such as "shell:1"`}}
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		fields = []paramField{{"uri", '"', "the resource's URI"}}
	case "tools/list", "resources/list", "resources/templates/list", "prompts/list":
		fields = []paramField{{"cursor", '"', "the nextCursor of the page before"}}
	default:
		return nil
	}
	params = bytes.TrimSpace(params)
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	if params[0] != '{' {
		return invalidParams(method, "params must be an object, not %s", jsonKind(params))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return nil // the line guard found it valid JSON; leave the rest to the SDK
	}
	for _, f := range fields {
		v := bytes.TrimSpace(m[f.name])
		if len(v) == 0 || string(v) == "null" || v[0] == f.first {
			continue
		}
		return invalidParams(method, "%s must be %s (%s), not %s", f.name, kindName(f.first), f.example, jsonKind(v))
	}
	if method == "tools/call" && !utf8.Valid(m["arguments"]) {
		// Decoded, each such byte would become U+FFFD: a command would
		// run altered, naming another file (an outsider's finding).
		return invalidParams(method, "the arguments hold bytes that are not UTF-8, which JSON text is; the tool would get them altered (each read as U+FFFD), so it was not called: send UTF-8")
	}
	return nil
}

// paramField is a field of a method's params: its name, the first byte of
// the JSON type it takes ('"' a string, '{' an object), and an example.
type paramField struct {
	name    string
	first   byte
	example string
}

func invalidParams(method, format string, args ...any) error {
	return &rpcline.Error{Code: -32602, Message: "Invalid params: " + method + ": " + fmt.Sprintf(format, args...)}
}

func kindName(first byte) string {
	if first == '{' {
		return "an object"
	}
	return "a string"
}

// jsonKind names the JSON type of v, with a short number or literal
// shown, never a long value.
func jsonKind(v json.RawMessage) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "the boolean " + string(v)
	case 'n':
		return "null"
	}
	if len(v) > 24 {
		return "a number"
	}
	return "the number " + string(v)
}
