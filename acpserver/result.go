package acpserver

import (
	"encoding/json"
	"strconv"

	"github.com/offstage/offstage/internal/rpcline"
)

// toolOutput is what a card reads of a tool's result: a JSON object's
// top-level members that cards show, as json.Unmarshal into a
// map[string]any gives them (the last of duplicate keys counts; a member
// that is not a string reads as ""). It is read in place, in one scan
// (rpcline.Members), where decoding the whole result into a map, to
// read a few strings and encode the map again as rawOutput, cost more
// than the tool call; FuzzToolOutput holds the two to the same reading.
type toolOutput struct {
	raw  jsonText // the result, when it is a JSON object; nil otherwise
	str  [len(outputKeys)]string
	exit float64 // exit_code, when hasExit
	// hasExit: exit_code is a number; errorOnly: error is there, not
	// null, and the only key
	hasExit, errorOnly bool
}

// outputKeys are the string members cards read, by index in str.
var outputKeys = [...]string{"task_id", "status", "output", "error", "note", "answer", "content"}

// get returns the string member key ("" when absent or not a string).
func (o *toolOutput) get(key string) string {
	for i, k := range outputKeys {
		if k == key {
			return o.str[i]
		}
	}
	return ""
}

// readOutput reads a tool's result text.
func readOutput(text string) toolOutput {
	var o toolOutput
	raw, ok := asJSON([]byte(text))
	if !ok || raw[skipSpace(raw)] != '{' {
		return o // not an object: a map would not decode it
	}
	onlyErr, hasErr := true, false
	isObject := rpcline.Members(raw, func(key, value []byte) {
		switch string(key) {
		case "exit_code":
			o.exit, o.hasExit = number(value)
		case "error":
			hasErr = string(value) != "null"
		}
		onlyErr = onlyErr && string(key) == "error"
		for i, k := range outputKeys {
			if k == string(key) {
				o.str[i], _ = plainString(value)
			}
		}
	})
	if !isObject {
		return decodedOutput(raw) // an escaped key: only decoding reads it right
	}
	o.raw, o.errorOnly = raw, onlyErr && hasErr
	return o
}

func skipSpace(b []byte) int {
	i := 0
	for i < len(b)-1 && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// number reads a JSON number as json.Unmarshal into any does.
func number(v []byte) (float64, bool) {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// decodedOutput is readOutput by decoding raw (a JSON object, valid) into
// a map, for a result whose keys the scan cannot read.
func decodedOutput(raw jsonText) toolOutput {
	var out map[string]any
	json.Unmarshal(raw, &out) // as it was read before: a number out of range leaves the rest
	if out == nil {
		return toolOutput{}
	}
	o := toolOutput{raw: raw}
	for i, k := range outputKeys {
		o.str[i], _ = out[k].(string)
	}
	o.errorOnly = out["error"] != nil && len(out) == 1
	o.exit, o.hasExit = out["exit_code"].(float64)
	return o
}
