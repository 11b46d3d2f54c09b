package rpcline

import "encoding/json"

// A message's envelope is read by a scan of its top-level members rather
// than by decoding it into a map: the map, and a copy of every value
// (params: the whole prompt), per line read. The scan is given valid JSON
// (the Reader checked it), and gives what json.Unmarshal into a
// map[string]json.RawMessage gives for the keys the guard reads: exact
// keys, the last of duplicates winning. A key written with an escape,
// which only decoding reads right ("\u006dethod" is "method"), sends the
// message to the map after all; FuzzEnvelope compares the two.

// envelopeKeys are the members the guard reads.
var envelopeKeys = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// envelope holds a message's members named in envelopeKeys, by index;
// nil when absent (a present value is never empty).
type envelope [len(envelopeKeys)]json.RawMessage

func (e *envelope) get(key string) (json.RawMessage, bool) {
	for i, k := range envelopeKeys {
		if k == key {
			return e[i], e[i] != nil
		}
	}
	return nil, false
}

// readEnvelope reads the envelope of obj, a valid JSON object; ok is false
// when obj is not an object.
func readEnvelope(obj []byte) (e envelope, ok bool) {
	if e, ok := scanEnvelope(obj); ok {
		return e, true
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(obj, &fields) != nil {
		return e, false
	}
	for i, k := range envelopeKeys {
		e[i] = fields[k]
	}
	return e, true
}

// scanEnvelope reads the envelope of obj (valid JSON) in place; ok is
// false when obj is not an object or a key has an escape.
func scanEnvelope(obj []byte) (e envelope, ok bool) {
	ok = Members(obj, func(key, value []byte) {
		for n, k := range envelopeKeys {
			if string(key) == k {
				e[n] = value
			}
		}
	})
	return e, ok
}

// Members calls fn with each member of obj, a valid JSON object, in
// order: its key as written between its quotes, and its value, both
// slices of obj (capped: appending copies). It reports false, and stops,
// when obj is not an object or a key has an escape (which only decoding
// reads right). For a server that reads a message's params in place
// (acpserver's session/prompt).
func Members(obj []byte, fn func(key, value []byte)) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) {
		if obj[i] != '"' {
			return false
		}
		end := skipString(obj, i) // the key
		key := obj[i+1 : end-1 : end-1]
		for _, c := range key {
			if c == '\\' {
				return false
			}
		}
		i = skipSpace(obj, end)
		i = skipSpace(obj, i+1) // the colon
		start := i
		i = skipValue(obj, i)
		fn(key, obj[start:i:i])
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return true
		}
		i = skipSpace(obj, i+1) // the comma
	}
	return true
}

// Elements calls fn with each element of arr, a valid JSON array, in
// order (a slice of arr, capped); it reports false when arr is not an
// array.
func Elements(arr []byte, fn func(value []byte)) bool {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return true
	}
	for i < len(arr) {
		start := i
		i = skipValue(arr, i)
		fn(arr[start:i:i])
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return true
		}
		i = skipSpace(arr, i+1) // the comma
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the value that starts at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}
