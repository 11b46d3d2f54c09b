package rpcline

import (
	"encoding/json"
)

// maxKey and maxID bound what the scan of an overlong line keeps: a
// top-level key longer than maxKey bytes (as written) is none the guard
// looks for, and an id longer than maxID bytes is not echoed.
const (
	maxKey = 64
	maxID  = 1 << 10
)

// idScan reads an overlong line as it streams past, keeping only what an
// answer needs: whether the top-level object has a "method" and, if it has
// an "id", its value as written (the last one, as parse counts
// duplicates). Its memory is bounded (maxKey + maxID bytes) however long
// the line, so a request's id is recovered wherever in the line it stands
// (the Go and most SDKs write it near the start, others after the params).
// It does not validate the line: a line that breaks off leaves what was
// seen until then.
type idScan struct {
	state   scanState
	depth   int  // nesting, the top-level object being 1
	str     bool // inside a string
	esc     bool // after a backslash inside a string
	tok     []byte
	over    bool   // tok outgrew its bound
	key     string // the top-level key whose value comes next
	id      []byte // the last top-level id, as written (nil: none usable)
	method  bool   // a top-level "method" was seen
	started bool   // the first non-blank byte was read
}

type scanState uint8

const (
	scanKey   scanState = iota // at depth 1, expecting a key or '}'
	scanColon                  // after a key, expecting ':'
	scanValue                  // expecting a value
	scanInVal                  // inside a top-level scalar or string value
	scanNext                   // after a value, expecting ',' or '}'
	scanDone                   // the line is not an object, or its object ended
)

func (s *idScan) write(p []byte) {
	for _, c := range p {
		if s.state == scanDone {
			return
		}
		s.step(c)
	}
}

func (s *idScan) step(c byte) {
	if !s.started {
		if isSpace(c) {
			return
		}
		s.started = true
		if c != '{' {
			s.state = scanDone
			return
		}
		s.depth, s.state = 1, scanKey
		return
	}
	if s.depth > 1 { // inside a nested value: only its end matters
		switch {
		case s.str:
			s.str, s.esc = s.inString(c)
		case c == '"':
			s.str = true
		case c == '{' || c == '[':
			s.depth++
		case c == '}' || c == ']':
			s.depth--
			if s.depth == 1 {
				s.state = scanNext
			}
		}
		return
	}
	switch s.state {
	case scanKey:
		switch {
		case s.str:
			s.keep(c)
			if s.str, s.esc = s.inString(c); !s.str {
				s.key = ""
				var k string
				if !s.over && json.Unmarshal(s.tok, &k) == nil {
					s.key = k
				}
				if s.key == "method" {
					s.method = true
				}
				s.state = scanColon
			}
		case c == '"':
			s.str, s.tok, s.over = true, s.tok[:0], false
			s.keep(c)
		case c == '}':
			s.state = scanDone
		}
	case scanColon:
		if c == ':' {
			s.state = scanValue
		}
	case scanValue:
		switch {
		case isSpace(c):
		case c == '{' || c == '[':
			s.depth++
			if s.key == "id" {
				s.id = nil // not a usable id
			}
		default:
			s.tok, s.over = s.tok[:0], false
			s.keep(c)
			s.str = c == '"'
			s.state = scanInVal
		}
	case scanInVal:
		if s.str {
			s.keep(c)
			if s.str, s.esc = s.inString(c); !s.str {
				s.endValue()
				s.state = scanNext
			}
			return
		}
		if c == ',' || c == '}' || isSpace(c) {
			s.endValue()
			s.state = scanNext
			s.next(c)
			return
		}
		s.keep(c)
	case scanNext:
		s.next(c)
	}
}

// next takes a byte after a top-level value.
func (s *idScan) next(c byte) {
	switch c {
	case ',':
		s.state = scanKey
	case '}':
		s.state = scanDone
	}
}

// endValue ends a top-level scalar or string value.
func (s *idScan) endValue() {
	if s.key != "id" {
		return
	}
	s.id = nil
	if !s.over {
		s.id = append([]byte(nil), s.tok...)
	}
}

// inString takes a byte inside a string; it reports whether the string
// goes on and whether the next byte is escaped.
func (s *idScan) inString(c byte) (str, esc bool) {
	switch {
	case s.esc:
		return true, false
	case c == '\\':
		return true, true
	case c == '"':
		return false, false
	}
	return true, false
}

func (s *idScan) keep(c byte) {
	limit := maxID
	if s.state == scanKey {
		limit = maxKey
	}
	if len(s.tok) >= limit {
		s.over = true
		return
	}
	s.tok = append(s.tok, c)
}

// replyID returns the id to answer with: the line's id if it is a request
// (a top-level method) with a usable id, nil otherwise.
func (s *idScan) replyID() (json.RawMessage, string) {
	if !s.method || s.id == nil || !json.Valid(s.id) {
		return nil, ""
	}
	key, err := idKey(s.id)
	if err != nil {
		return nil, ""
	}
	return s.id, key
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
