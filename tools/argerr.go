package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/offstage/offstage/internal/text"
)

// Argument errors are worded for the model, in JSON's terms: the
// parameter by its name and the type it takes ("port must be an integer,
// not a string"). encoding/json's own errors speak Go ("cannot unmarshal
// string into Go struct field bashInput.port of type int"), and the schema
// validator's speak JSON Pointer ("validating /properties/port: type: 2 has
// type \"string\", want \"integer\""); a model reads neither well.

// paramError words the first top-level argument that the schema's
// properties refuse: one it does not know, or one of the wrong JSON type.
// It returns nil when every argument is known and of its type; the
// validator then checks the rest (ranges, required, nested values).
func paramError(tool string, schema *jsonschema.Schema, obj map[string]any) error {
	if schema == nil || schema.Properties == nil {
		return nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same argument is named first every time
	for _, k := range keys {
		prop, ok := schema.Properties[k]
		if !ok {
			return unknownParam(tool, schema, k)
		}
		want := jsonTypeOf(prop)
		if want != "" && !isJSONType(obj[k], want) {
			return fail("%s must be %s, not %s.", shorten(k, 60), typePhrase(want), valuePhrase(obj[k], want))
		}
		if err := itemError(k, prop, obj[k]); err != nil {
			return err
		}
	}
	return nil
}

// itemError checks the items of list, the value of array parameter k, as
// paramError checks parameters: the schema library's own message for an
// item of the wrong type (a null) names a Go internal, "<invalid
// reflect.Value>".
func itemError(k string, prop *jsonschema.Schema, list any) error {
	items, ok := list.([]any)
	if !ok || prop.Items == nil {
		return nil
	}
	want := jsonTypeOf(prop.Items)
	if want == "" {
		return nil
	}
	for i, v := range items {
		if !isJSONType(v, want) {
			return fail("%s[%d] must be %s, not %s; send a list of them, such as %s.", shorten(k, 60), i, typePhrase(want), valuePhrase(v, want), exampleList(k, want))
		}
	}
	return nil
}

// exampleList is a list of what parameter k holds, for a sentence.
func exampleList(k, want string) string {
	switch {
	case k == "task_ids":
		return `["shell:1", "agent:2"]`
	case want == "string":
		return `["a", "b"]`
	case want == "integer", want == "number":
		return "[1, 2]"
	}
	return "[…]"
}

// unknownParam names a parameter the tool does not have, the one it was
// likely meant for, and the ones it has.
func unknownParam(tool string, schema *jsonschema.Schema, k string) error {
	names := make([]string, 0, len(schema.Properties))
	for name := range schema.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	hint := ""
	if len(k) <= 64 { // the distance is quadratic; a long key is no typo
		if near := text.Nearest(k, names); near != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", near)
		}
	}
	return fail("%s has no parameter %q%s; its parameters are %s.", tool, shorten(k, 60), hint, strings.Join(names, ", "))
}

// jsonTypeOf is the one JSON type a property takes, or "" for none or
// several.
func jsonTypeOf(s *jsonschema.Schema) string {
	if s.Type != "" {
		return s.Type
	}
	if len(s.Types) == 1 {
		return s.Types[0]
	}
	return ""
}

// isJSONType reports whether v, as encoding/json decodes into any, is of
// the JSON Schema type want.
func isJSONType(v any, want string) bool {
	switch x := v.(type) {
	case string:
		return want == "string"
	case bool:
		return want == "boolean"
	case float64:
		return want == "number" || want == "integer" && x == math.Trunc(x)
	case []any:
		return want == "array"
	case map[string]any:
		return want == "object"
	}
	return false // null is dropped before; a type not in JSON is refused
}

// typePhrase names a JSON Schema type for a sentence.
func typePhrase(t string) string {
	switch t {
	case "integer":
		return "an integer (a JSON number without a fraction)"
	case "number":
		return "a JSON number"
	case "string":
		return "a JSON string"
	case "boolean":
		return "true or false"
	case "array":
		return "a JSON array"
	case "object":
		return "a JSON object"
	}
	return "of type " + t
}

// valuePhrase names what was sent instead, with a hint when it is the
// right value in the wrong dress (a number or boolean in quotes).
func valuePhrase(v any, want string) string {
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if _, err := strconv.ParseFloat(s, 64); err == nil && (want == "number" || want == "integer") {
			return fmt.Sprintf("the string %q: send it without quotes", shorten(s, 40))
		}
		if (s == "true" || s == "false") && want == "boolean" {
			return fmt.Sprintf("the string %q: send it without quotes", s)
		}
		if want == "array" {
			return fmt.Sprintf("a string: send a list, such as [%q]", shorten(x, 40))
		}
		return "a string"
	case float64:
		if want == "integer" {
			return "the number " + strconv.FormatFloat(x, 'g', -1, 64)
		}
		return "a number"
	}
	return jsonKind(v)
}

// typeError words an error of decoding arguments (into any, or into a
// tool's input type) for the model, if it is one of a value of the wrong
// type or out of range (every such error of encoding/json is a
// *json.UnmarshalTypeError, whose text names Go types). It returns nil
// for any other error.
func typeError(err error) error { return typeErrorIn(nil, err) }

// typeErrorIn is typeError for an error of decoding args, which it reads
// again to name the argument when encoding/json does not (a number too
// large for float64, met while decoding into any).
func typeErrorIn(args json.RawMessage, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return nil
	}
	what := "A value in the arguments"
	if te.Field != "" {
		what = shorten(te.Field, 60)
	} else if k, _ := hugeNumberAt(args); k == "task_id" || k == "task_ids" {
		// A task id may be sent as its number (3), but this one is no
		// integer id: it is past what JSON numbers hold.
		return fail("%s holds the number %s, which is no task id (out of range); an id is a kind, a colon and a number from 1, as shell:3 or agent:2 (or the number alone, 3); task_list shows yours.", k, shorten(strings.TrimPrefix(te.Value, "number "), 40))
	} else if k, inList := hugeNumberAt(args); inList {
		return fail("%s holds a number beyond what JSON numbers of ordinary size hold (±1.7e308): %s; send numbers within it.", shorten(k, 60), shorten(strings.TrimPrefix(te.Value, "number "), 40))
	} else if k != "" {
		what = shorten(k, 60)
	}
	got := te.Value
	if n, ok := strings.CutPrefix(got, "number "); ok {
		got = "the number " + shorten(n, 40)
	} else {
		got = jsonKindPhrase(got)
	}
	return fail("%s must be %s, not %s.", what, goTypePhrase(te.Type), got)
}

// goTypePhrase names, in JSON's terms, the values a Go type takes.
func goTypePhrase(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		hi := int64(1)<<(t.Bits()-1) - 1
		return fmt.Sprintf("an integer from %d to %d", -hi-1, hi)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprintf("an integer from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	case reflect.Float32, reflect.Float64:
		return "a JSON number of ordinary size (within ±1.7e308)"
	case reflect.String:
		return "a JSON string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return "another type"
}

// jsonKindPhrase names a JSON kind as encoding/json names it ("string",
// "array", "bool") for a sentence.
func jsonKindPhrase(kind string) string {
	switch kind {
	case "bool":
		return "a boolean"
	case "":
		return "that value"
	}
	return article(shorten(kind, 40))
}

// hugeNumberAt names the top-level argument of args holding a number
// beyond float64, itself or in an array (inList), or "".
func hugeNumberAt(args json.RawMessage) (key string, inList bool) {
	if args == nil {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var obj map[string]any
	if dec.Decode(&obj) != nil {
		return "", false
	}
	huge := func(v any) bool {
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Float64()
		return err != nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if huge(obj[k]) {
			return k, false
		}
		if list, ok := obj[k].([]any); ok && slices.ContainsFunc(list, huge) {
			return k, true
		}
	}
	return "", false
}

// withFieldDoc adds to te, the words typeError found for err, what the
// tool's input type in says of the argument err names (its description,
// the jsonschema tag): the range a Go type holds ("an integer from
// -9223372036854775808 to 9223372036854775807") is no guide to what the
// tool takes ("at most 100").
func withFieldDoc(te, err error, in reflect.Type) error {
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) || ute.Field == "" {
		return te
	}
	doc := fieldDoc(in, strings.Split(ute.Field, "."))
	if doc == "" {
		return te
	}
	doc = strings.TrimSuffix(doc, ".")
	if n, ok := strings.CutPrefix(ute.Value, "number "); ok && isIntKind(ute.Type) && wholeNumber(n) {
		// A whole number past what the field's Go type holds: that type's
		// range would read as what the tool takes, which the doc says.
		return fail("%s is out of range: the number %s (%s: %s.)", shorten(ute.Field, 60), shorten(n, 40), shorten(ute.Field, 60), doc)
	}
	return fail("%s (%s: %s.)", strings.TrimSuffix(te.Error(), "."), shorten(ute.Field, 60), doc)
}

// isIntKind reports whether t (or what it points to) is an integer type.
func isIntKind(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// wholeNumber reports whether a JSON number has no fraction: 1e20,
// 1.50e2, 10e-1 and 0e-5 have none, 1.5 and 1e-3 have one. It reads the
// text, so an exponent of any size costs nothing.
func wholeNumber(n string) bool {
	mant, exp, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(n, "-")), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return true // zero
	}
	zeros := len(digits) - len(strings.TrimRight(digits, "0"))
	e, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
	switch {
	case exp == "":
		e = 0
	case err != nil: // an exponent past int: its sign decides
		return !strings.HasPrefix(exp, "-")
	}
	return e-len(frac)+zeros >= 0
}

// fieldDoc is the jsonschema tag of the field path names (JSON names,
// from the outermost) in struct type t; "" where there is none.
func fieldDoc(t reflect.Type, path []string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || len(path) == 0 {
		return ""
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		if name != path[0] {
			continue
		}
		if len(path) > 1 {
			return fieldDoc(f.Type, path[1:])
		}
		return f.Tag.Get("jsonschema")
	}
	return ""
}
