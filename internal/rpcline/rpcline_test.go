package rpcline_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/internal/rpcline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// filter runs input through a Reader and returns what reached the SDK
// and what was answered.
func filter(input []byte, opts rpcline.Options) (passed, replies []byte) {
	var out bytes.Buffer
	r, _ := rpcline.New(bytes.NewReader(input), &out, opts)
	passed, _ = io.ReadAll(r)
	return passed, out.Bytes()
}

const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`

// The lines of issue 19 that ended an MCP session: each is answered, with
// the code and id a client can match, and nothing of it reaches the SDK.
func TestReaderAnswersWhatTheSDKCannotTake(t *testing.T) {
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	deepArg := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}}}`
	for _, tc := range []struct {
		line, want string // want: the reply, as a substring
	}{
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or an integer, not an object"}}`},
		{`{"jsonrpc":"2.0","id":[1],"method":"ping"}`, `"id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or an integer, not an array"}`},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `"id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or an integer, not null`},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, `"id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or an integer, not a boolean"}`},
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, `"id":1.5,"error":{"code":-32600,"message":"Invalid Request: id 1.5 is not an integer`},
		{`{"jsonrpc":"2.0","id":1e300,"method":"ping"}`, `"id":1e300,"error":{"code":-32600`},
		// Past a float64's range, an id echoed is a line no client decodes.
		{`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, `"id":null,"error":{"code":-32600,"message":"Invalid Request: id 1e400 is not an integer`},
		{`{"jsonrpc":"2.0","id":-1e400,"method":"ping"}`, `"id":null,"error":{"code":-32600`},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, `"id":9007199254740993,"error":{"code":-32600,"message":"Invalid Request: id 9007199254740993 is out of range`},
		// Decoded, these ids would come back as U+FFFD: a client would
		// never match the answer (an outsider's finding).
		{`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`, `"id":"\ud800","error":{"code":-32600,"message":"Invalid Request: the id is not valid Unicode`},
		{`{"jsonrpc":"2.0","id":"a\udc00b","method":"ping"}`, `"error":{"code":-32600,"message":"Invalid Request: the id is not valid Unicode`},
		// Echoed, bytes that are not UTF-8 would make the reply no JSON
		// text (an outsider's finding).
		{"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}", `"id":null,"error":{"code":-32600,"message":"Invalid Request: the id is not valid Unicode`},
		{"[{\"jsonrpc\":\"2.0\",\"id\":\"\xfe1\",\"method\":\"ping\"}]", `[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batches are not supported`},
		{`[]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: an empty batch`},
		{`[1,2,3]`, `[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batches are not supported; send each JSON-RPC message on a line of its own"}},{"jsonrpc":"2.0","id":null,`},
		{`[{}]`, `[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batches are not supported`},
		{`[` + ping + `,{"jsonrpc":"2.0","method":"notifications/initialized"}]`, `[{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: batches are not supported`},
		{deep, `"id":null,"error":{"code":-32600,"message":"Invalid Request: the message nests deeper than 128 levels`},
		{deepArg, `"id":7,"error":{"code":-32600,"message":"Invalid Request: the message nests deeper than 128 levels`},
		// JSON but for a raw control character in a string: its caller
		// gets the answer under its id rather than waiting for ever.
		{`{"jsonrpc":"2.0","id":20,"method":"session/prompt","params":{"text":"a` + "\x01" + `b"}}`, `"id":20,"error":{"code":-32700,"message":"Parse error: the line is not JSON`},
		{`{"JSONRPC":"2.0","id":2,"method":"ping"}`, `"id":2,"error":{"code":-32600,"message":"Invalid Request: the message lacks \"jsonrpc\":\"2.0\""}`},
		{`{"jsonrpc":"2.0","id":2,"method":7}`, `"id":2,"error":{"code":-32600,"message":"Invalid Request: the method must be a non-empty string"}`},
		{`{"jsonrpc":"2.0","id":2,"method":"ping","params":5}`, `"id":2,"error":{"code":-32600,"message":"Invalid Request: params must be an object or an array"}`},
		{`{"jsonrpc":"2.0","id":2}`, `"id":2,"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC 2.0 message: it has no method, result or error"}`},
		{`"x"`, `"id":null,"error":{"code":-32600,"message":"Invalid Request: a JSON-RPC message is a JSON object`},
		{`garbage`, `"id":null,"error":{"code":-32700,"message":"Parse error: the line is not JSON`},
	} {
		passed, replies := filter([]byte(tc.line+"\n"), rpcline.Options{MaxLine: 1 << 20})
		if len(passed) != 0 {
			t.Errorf("%.60s: passed on %.80q", tc.line, passed)
		}
		if !strings.Contains(string(replies), tc.want) || bytes.Count(replies, []byte("\n")) != 1 {
			t.Errorf("%.60s: replied %s\nwant %s", tc.line, replies, tc.want)
		}
	}
}

func TestReaderPassesMessagesReencoded(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{ping, ping},
		{"  " + ping + "\r", ping},
		{`{"method":"ping","id":"a<b","jsonrpc":"2.0","params":{ "x" : [1, 2] },"extra":1}`, `{"jsonrpc":"2.0","id":"a<b","method":"ping","params":{"x":[1,2]}}`},
		{`{"jsonrpc":"2.0","id":null,"method":"notifications/initialized","params":null}`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{`{"jsonrpc":"2.0","id":3,"id":4,"method":"ping"}`, `{"jsonrpc":"2.0","id":4,"method":"ping"}`},
		{`{"jsonrpc":"2.0","id":-5,"result":null}`, `{"jsonrpc":"2.0","id":-5,"result":null}`},
		{`{"jsonrpc":"2.0","id":"s","error":{"code":-32601,"message":"no","data":{"a":1},"x":2}}`, `{"jsonrpc":"2.0","id":"s","error":{"code":-32601,"message":"no","data":{"a":1}}}`},
	} {
		passed, replies := filter([]byte(tc.line+"\n"), rpcline.Options{MaxLine: 1 << 20})
		if string(passed) != tc.want+"\n" || len(replies) != 0 {
			t.Errorf("%s: passed %s, replied %s; want %s passed", tc.line, passed, replies, tc.want)
		}
	}
}

// A batch of millions of members gets one answer, not millions.
func TestReaderAnswersAHugeBatchOnce(t *testing.T) {
	line := "[" + strings.Repeat("1,", 4<<20) + "1]"
	passed, replies := filter([]byte(line+"\n"), rpcline.Options{MaxLine: 16 << 20})
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batches are not supported; send each JSON-RPC message on a line of its own (this batch has more than 64 messages to answer; none was run)"}}` + "\n"
	if len(passed) != 0 || string(replies) != want {
		t.Errorf("passed %.100q, replied %.300s", passed, replies)
	}
}

// A malformed response from the peer is dropped, never answered: two
// guards must not answer each other for ever.
func TestReaderNeverAnswersAResponse(t *testing.T) {
	var why []string
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":"bad"}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1.5}}`,
	} {
		passed, replies := filter([]byte(line+"\n"), rpcline.Options{MaxLine: 1 << 20, Dropped: func(s string) { why = append(why, s) }})
		if len(passed)+len(replies) != 0 {
			t.Errorf("%s: passed %s, replied %s", line, passed, replies)
		}
	}
	if len(why) != 4 {
		t.Errorf("Dropped told %q, want 4 reasons", why)
	}
}

func TestReaderDropsOverlongLines(t *testing.T) {
	huge := `{"jsonrpc":"2.0","id":2,"method":"x","params":["` + strings.Repeat("a", 2<<20) + `"]}`
	passed, replies := filter([]byte(huge+"\n"+ping+"\n"), rpcline.Options{MaxLine: 1 << 20})
	if string(passed) != ping+"\n" || !strings.Contains(string(replies), `"code":-32600,"message":"Invalid Request: a message longer than 1048576 bytes was dropped`) {
		t.Errorf("passed %.100q, replied %s", passed, replies)
	}
}

// An overlong request is answered with its id, wherever in the line the
// id stands, so the caller's pending call gets its error; a line whose id
// cannot be used, or that is no request, is answered with null.
func TestReaderAnswersAnOverlongRequestWithItsID(t *testing.T) {
	big := `"` + strings.Repeat(`a\"{[`, 40<<10) + `"`
	nested := `{"x":[` + big + `,{"id":99}],"y":{"id":98}}`
	for _, tc := range []struct{ line, id string }{
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":` + nested + `}`, `2`},
		{`  {"jsonrpc":"2.0", "id" : "a\"b" ,"method":"tools/call","params":` + nested + `}`, `"a\"b"`},
		{`{"method":"tools/call","params":` + nested + `,"jsonrpc":"2.0","id":7}`, `7`},                              // TypeScript's order
		{`{"method":"tools/call","params":` + nested + `,"jsonrpc":"2.0","id":-7   }`, `-7`},                         // spaces after
		{`{"\u0069d":5,"method":"tools/call","params":` + nested + `}`, `5`},                                         // an escaped key
		{`{"id":1,"id":3,"method":"x","params":` + nested + `}`, `3`},                                                // the last counts
		{`{"jsonrpc":"2.0","id":2,"method":"x","params":` + nested, `2`},                                             // cut short
		{`{"jsonrpc":"2.0","method":"notifications/x","params":` + nested + `}`, `null`},                             // no id
		{`{"jsonrpc":"2.0","id":2,"params":` + nested + `}`, `null`},                                                 // no method
		{`{"jsonrpc":"2.0","id":2,"result":` + nested + `}`, `null`},                                                 // a response
		{`{"jsonrpc":"2.0","id":1.5,"method":"x","params":` + nested + `}`, `null`},                                  // an unusable id
		{`{"jsonrpc":"2.0","id":{"n":1},"method":"x","params":` + nested + `}`, `null`},                              // an object id
		{`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 2<<10) + `","method":"x","params":` + nested + `}`, `null`}, // too long to keep
		{`[{"jsonrpc":"2.0","id":2,"method":"x","params":` + nested + `}]`, `null`},                                  // a batch
		{`{"jsonrpc":"2.0","method":"x","params":` + nested + `,"x":{"id":4}}`, `null`},                              // a nested id
	} {
		passed, replies := filter([]byte(tc.line+"\n"+ping+"\n"), rpcline.Options{MaxLine: 64 << 10})
		var r struct {
			ID    json.RawMessage    `json:"id"`
			Error struct{ Code int } `json:"error"`
		}
		if string(passed) != ping+"\n" || bytes.Count(replies, []byte("\n")) != 1 || json.Unmarshal(replies, &r) != nil || r.Error.Code != -32600 || string(r.ID) != tc.id {
			t.Errorf("%.60q…: passed %.100q, replied %.200s; want id %s", tc.line, passed, replies, tc.id)
		}
	}
}

// An overlong request whose id is in use by a request not answered yet
// is answered with null: its id would resolve the other.
func TestReaderAnswersAnOverlongRequestWithAnIDInUseWithNull(t *testing.T) {
	var out bytes.Buffer
	huge := `{"jsonrpc":"2.0","id":1,"method":"x","params":["` + strings.Repeat("a", 4<<10) + `"]}`
	r, _ := rpcline.New(strings.NewReader(ping+"\n"+huge+"\n"), &out, rpcline.Options{MaxLine: 1 << 10})
	io.ReadAll(r)
	if !strings.HasPrefix(out.String(), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`) {
		t.Errorf("replied %s", out.String())
	}
}

// A request whose id is in use by one not yet answered is refused, with a
// null id: the reply must not resolve the first request.
func TestReaderRefusesAnIDInUse(t *testing.T) {
	var out bytes.Buffer
	r, w := rpcline.New(strings.NewReader(ping+"\n"+ping+"\n"), &out, rpcline.Options{MaxLine: 1 << 10})
	passed, _ := io.ReadAll(r)
	if string(passed) != ping+"\n" || !strings.Contains(out.String(), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: id 1 is in use by a request still being answered; use a new id"}}`) {
		t.Fatalf("passed %s, replied %s", passed, out.String())
	}
	w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
	out.Reset()
	r, _ = rpcline.New(strings.NewReader(ping+"\n"), &out, rpcline.Options{MaxLine: 1 << 10})
	if passed, _ := io.ReadAll(r); string(passed) != ping+"\n" {
		t.Errorf("a fresh stream passed %s", passed)
	}
}

// Issue 19: a request read just before the input ends is answered before
// the SDK sees the end (which makes it stop writing).
func TestEndOfInputWaitsForReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		r, w := rpcline.New(strings.NewReader(ping+"\n"+`{"jsonrpc":"2.0","id":"b","method":"ping"}`+"\n"), &out, rpcline.Options{MaxLine: 1 << 10, Drain: time.Minute})
		eof := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(r)
			eof <- b
		}()
		synctest.Wait()
		select {
		case b := <-eof:
			t.Fatalf("end of input before the replies: read %s", b)
		default:
		}
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
		synctest.Wait()
		select {
		case b := <-eof:
			t.Fatalf("end of input before the second reply: read %s", b)
		default:
		}
		w.Write([]byte(`{"jsonrpc":"2.0","result":{},"id":"b"}` + "\n"))
		start := time.Now()
		<-eof
		if waited := time.Since(start); waited != 0 {
			t.Errorf("end of input came %s after the last reply", waited)
		}
		if want := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","result":{},"id":"b"}` + "\n"; out.String() != want {
			t.Errorf("output %s, want %s", out.String(), want)
		}
	})
}

// Past the grace, the guard answers the request itself, and the SDK's
// late reply is dropped: one reply per request.
func TestEndOfInputAbandonsAfterTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		r, w := rpcline.New(strings.NewReader(ping+"\n"), &out, rpcline.Options{MaxLine: 1 << 10, Drain: 5 * time.Second})
		start := time.Now()
		io.ReadAll(r)
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("end of input after %s, want the 5s grace", waited)
		}
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
		want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error: the input ended and this request was not answered within 5s of it; it was abandoned"}}` + "\n"
		if out.String() != want {
			t.Errorf("output %s, want %s", out.String(), want)
		}
	})
}

// An input that ends with an error, not io.EOF (offstage serve ending a
// relayed connection), is named in the abandoned request's answer.
func TestInputErrorIsNamedInTheAbandonedAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		in := io.MultiReader(strings.NewReader(ping+"\n"), iotest.ErrReader(errors.New("the supervisor ended the connection")))
		r, _ := rpcline.New(in, &out, rpcline.Options{MaxLine: 1 << 10, Drain: 5 * time.Second})
		io.ReadAll(r)
		want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error: the input ended (the supervisor ended the connection) and this request was not answered within 5s of it; it was abandoned"}}` + "\n"
		if out.String() != want {
			t.Errorf("output %s, want %s", out.String(), want)
		}
	})
}

func TestCloseStopsTheDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := rpcline.New(strings.NewReader(ping+"\n"), io.Discard, rpcline.Options{MaxLine: 1 << 10, Drain: time.Hour})
		done := make(chan struct{})
		go func() {
			io.ReadAll(r)
			close(done)
		}()
		synctest.Wait()
		r.Close()
		<-done
	})
}

// FuzzReader: whatever a peer sends, nothing panics, and each non-blank
// line has exactly one outcome: passed on as one well-formed JSON-RPC 2.0
// message the SDKs can take, answered with one JSON-RPC error (or an array
// of them for a batch), or, for a malformed response only, dropped.
// nested is a request whose params nest n levels below the envelope, so
// that the whole message nests n+1 deep; before is put in params first.
func nested(before string, n int) string {
	return `{"jsonrpc":"2.0","id":3,"method":"ping","params":{` + before + `"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}}`
}

// TestDepthIsCountedAtTheLimitAndOutsideStrings pins the depth limit at
// its edge (128 levels pass, 129 are refused) and what the count skips:
// brackets inside strings, which an escaped quote does not end and an
// escaped backslash before a quote does.
func TestDepthIsCountedAtTheLimitAndOutsideStrings(t *testing.T) {
	manyOpen := strings.Repeat("[", 300) + strings.Repeat("{", 300)
	for _, tc := range []struct {
		name, line string
		pass       bool
	}{
		{"128 levels", nested("", 127), true},
		{"129 levels", nested("", 128), false},
		{"brackets in a string", nested(`"s":"`+manyOpen+`",`, 127), true},
		{"brackets after an escaped quote", nested(`"s":"\"`+manyOpen+`",`, 127), true},
		{"closing brackets in a string", nested(`"s":"]]]]]]]]}}}}",`, 128), false},
		{"an escaped backslash ends before the quote", nested(`"s":"\\",`, 128), false},
		{"an escaped backslash, then brackets in the next string", nested(`"s":"\\","t":"`+manyOpen+`",`, 127), true},
	} {
		passed, replies := filter([]byte(tc.line+"\n"), rpcline.Options{MaxLine: 1 << 20})
		refused := strings.Contains(string(replies), "nests deeper than 128 levels")
		if tc.pass && (len(passed) == 0 || len(replies) > 0) || !tc.pass && (len(passed) > 0 || !refused) {
			t.Errorf("%s: passed %.60q, replied %.200s; want it %s", tc.name, passed, replies, map[bool]string{true: "passed on", false: "refused for its depth"}[tc.pass])
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("garbage\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"))
	f.Add([]byte("[1,2\n{}\n\n\"x\"\n"))
	f.Add([]byte("\x00\xff\n{\"jsonrpc\":\"2.0\",\"result\":{}}\r\n[1]"))
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	const maxLine = 4 << 10
	f.Fuzz(func(t *testing.T, input []byte) {
		for _, line := range bytes.Split(input, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			passed, replies := filter(append(line, '\n'), rpcline.Options{MaxLine: maxLine, MaxDepth: 16})
			if !utf8.Valid(passed) || !utf8.Valid(replies) {
				t.Fatalf("%q: passed %q and replied %q: not UTF-8, so no JSON text", line, passed, replies)
			}
			switch {
			case len(passed) > 0 && len(replies) > 0:
				t.Fatalf("%q: both passed %q and replied %q", line, passed, replies)
			case len(passed) > 0:
				checkPassed(t, line, passed)
			case len(replies) > 0:
				checkReply(t, line, replies)
			case !isResponse(line):
				t.Fatalf("%q: neither passed on nor answered", line)
			}
			// Over the cap, the same line is answered once, with its id
			// when it is a request with a usable id.
			_, replies = filter(append(line, '\n'), rpcline.Options{MaxLine: 1})
			var r struct{ ID json.RawMessage }
			if bytes.Count(replies, []byte("\n")) != 1 || json.Unmarshal(replies, &r) != nil {
				t.Fatalf("%q over the cap: replied %q", line, replies)
			}
			if !json.Valid(line) { // the scan does not validate: any id it gives is usable
				if !isNullOr(r.ID, requestID(append(append([]byte(`{"method":"x","id":`), r.ID...), '}'))) {
					t.Fatalf("%q over the cap: replied %s", line, replies)
				}
			} else if want := requestID(line); !bytes.Equal(compact(r.ID), compact(want)) {
				t.Fatalf("%q over the cap: replied %s, want id %s", line, replies, want)
			}
		}
	})
}

// seeds are the lines of issue 19, and kin.
var seeds = []string{
	`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
	`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1e300,"method":"ping"}`,
	`[]`, `[1,2,3]`, `[{}]`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	strings.Repeat("[", 50) + strings.Repeat("]", 50),
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}`,
	`{"JSONRPC":"2.0","Id":1,"Method":"ping"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xfe1\",\"method\":\"ping\"}",
}

func checkPassed(t *testing.T, line, passed []byte) {
	t.Helper()
	if bytes.Count(passed, []byte("\n")) != 1 || passed[len(passed)-1] != '\n' {
		t.Fatalf("%q: passed %q, not one line", line, passed)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(passed, &m); err != nil {
		t.Fatalf("%q: passed %q: %v", line, passed, err)
	}
	for k := range m {
		if !strings.Contains(" jsonrpc id method params result error ", " "+k+" ") {
			t.Fatalf("%q: passed %q with key %q", line, passed, k)
		}
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		t.Fatalf("%q: passed %q", line, passed)
	}
	if id, ok := m["id"]; ok {
		var s string
		var n int64
		if json.Unmarshal(id, &s) != nil && (json.Unmarshal(id, &n) != nil || n > 1<<53 || n < -(1<<53) || strings.ContainsAny(string(id), ".eE")) {
			t.Fatalf("%q: passed an id the SDKs could mangle: %q", line, passed)
		}
	}
	var method string
	if raw, ok := m["method"]; ok && (json.Unmarshal(raw, &method) != nil || method == "") {
		t.Fatalf("%q: passed a bad method: %q", line, passed)
	}
	if _, ok := m["method"]; !ok && m["id"] == nil {
		t.Fatalf("%q: passed a response without an id: %q", line, passed)
	}
	if d := nesting(passed); d > 16 {
		t.Fatalf("%q: passed %d levels deep: %q", line, d, passed)
	}
}

func checkReply(t *testing.T, line, replies []byte) {
	t.Helper()
	if bytes.Count(replies, []byte("\n")) != 1 {
		t.Fatalf("%q: replied %q, not one line", line, replies)
	}
	var one struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var all []json.RawMessage
	if json.Unmarshal(replies, &all) != nil {
		all = []json.RawMessage{replies}
	}
	for _, r := range all {
		if err := json.Unmarshal(r, &one); err != nil || one.JSONRPC != "2.0" || one.ID == nil || (one.Error.Code != -32600 && one.Error.Code != -32700) || one.Error.Message == "" {
			t.Fatalf("%q: replied %q", line, replies)
		}
	}
}

// requestID returns the id of a request with a usable id (a string or an
// integer within ±2^53), null for any other line.
func requestID(line []byte) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return json.RawMessage("null")
	}
	id, hasID := m["id"]
	_, method := m["method"]
	if !hasID || !method || len(id) > 1<<10 {
		return json.RawMessage("null")
	}
	var s string
	var n int64
	if json.Unmarshal(id, &s) != nil && (json.Unmarshal(id, &n) != nil || n > 1<<53 || n < -(1<<53) || strings.ContainsAny(string(id), ".eE") || string(id) == "-0") {
		return json.RawMessage("null")
	}
	if id[0] == '"' && replaced(id, s) {
		return json.RawMessage("null") // not whole Unicode: refused
	}
	return id
}

// replaced reports whether the JSON string id, decoded as s, had bytes
// that are not UTF-8 or a lone surrogate escape (decoding made U+FFFD of
// them, where id wrote none).
func replaced(id json.RawMessage, s string) bool {
	lower := strings.ToLower(string(id))
	return !utf8.Valid(id) || strings.ContainsRune(s, utf8.RuneError) && !strings.Contains(lower, "\\ufffd") && !strings.ContainsRune(lower, utf8.RuneError)
}

func isNullOr(id, want json.RawMessage) bool {
	return string(id) == "null" || bytes.Equal(compact(id), compact(want))
}

func compact(v json.RawMessage) []byte {
	var b bytes.Buffer
	json.Compact(&b, v)
	return b.Bytes()
}

// isResponse reports whether line is an object with no method and a
// result or an error: the only kind of line the guard may drop unanswered.
func isResponse(line []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return false
	}
	_, method := m["method"]
	_, result := m["result"]
	_, e := m["error"]
	return !method && (result || e)
}

func nesting(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	d, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			d++
			deepest = max(deepest, d)
		case json.Delim('}'), json.Delim(']'):
			d--
		}
	}
}

// TestCheckAnswersInWords: a request Check refuses is answered with its
// error (invalid params by default, or the *Error's own code), is not
// passed on and does not hold its id; a notification it refuses is
// dropped and reported; what it accepts passes.
func TestCheckAnswersInWords(t *testing.T) {
	var dropped []string
	opts := rpcline.Options{MaxLine: 1 << 20, Dropped: func(why string) { dropped = append(dropped, why) },
		Check: func(method string, params json.RawMessage) error {
			switch {
			case method == "nope":
				return &rpcline.Error{Code: -32601, Message: "Method not found: nope is not served"}
			case string(params) == `{"x":"1"}`:
				return errors.New("x must be an integer, not a string")
			}
			return nil
		}}
	input := `{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":"1"}}
{"jsonrpc":"2.0","id":2,"method":"nope"}
{"jsonrpc":"2.0","method":"m","params":{"x":"1"}}
{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1}}
`
	passed, replies := filter([]byte(input), opts)
	if want := `{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1}}` + "\n"; string(passed) != want {
		t.Errorf("passed on %q, want only the last (id 1 free again)", passed)
	}
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params: x must be an integer, not a string"}}
{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not found: nope is not served"}}
`
	if string(replies) != want {
		t.Errorf("replies:\n%s\nwant:\n%s", replies, want)
	}
	if len(dropped) != 1 || !strings.Contains(dropped[0], "x must be an integer") {
		t.Errorf("Dropped heard %q, want the refused notification", dropped)
	}
}

// TestTakeAnswersWithoutTheSDK: a request Take takes is not passed on;
// start runs once its id is tracked, so the same id is in use until the
// taker's response is written, and the end of input waits for that
// response; one Take refuses is answered as Check's refusal is, before
// its id is tracked; the rest pass on to Check and the SDK.
func TestTakeAnswersWithoutTheSDK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		var started []string
		opts := rpcline.Options{MaxLine: 1 << 10, Drain: time.Minute,
			Check: func(method string, params json.RawMessage) error {
				if method == "mine" {
					t.Errorf("Check was asked about a request Take took: %s", params)
				}
				return nil
			},
			Take: func(r rpcline.Request) (func(), bool, error) {
				switch {
				case r.Method != "mine":
					return nil, false, nil
				case string(r.Params) == `{"x":"1"}`:
					return nil, true, errors.New("x must be an integer, not a string")
				}
				return func() { started = append(started, string(r.ID)+" "+string(r.Params)) }, true, nil
			}}
		input := `{"jsonrpc":"2.0","id":1,"method":"mine","params":{"x":1}}
{"jsonrpc":"2.0","id":1,"method":"mine","params":{"x":2}}
{"jsonrpc":"2.0","id":1,"method":"mine","params":{"x":"1"}}
{"jsonrpc":"2.0","id":"b","method":"ping"}
`
		r, w := rpcline.New(strings.NewReader(input), &out, opts)
		eof := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(r)
			eof <- b
		}()
		synctest.Wait()
		w.Write([]byte(`{"jsonrpc":"2.0","id":"b","result":{}}` + "\n")) // the SDK's answer to ping
		synctest.Wait()
		select {
		case b := <-eof:
			t.Fatalf("end of input before the taken request was answered: read %s", b)
		default:
		}
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"took":1}}` + "\n"))
		if passed := <-eof; string(passed) != `{"jsonrpc":"2.0","id":"b","method":"ping"}`+"\n" {
			t.Errorf("passed on %s, want only ping", passed)
		}
		if want := []string{`1 {"x":1}`}; !slices.Equal(started, want) {
			t.Errorf("started %q, want %q", started, want)
		}
		want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: id 1 is in use by a request still being answered; use a new id"}}
{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params: x must be an integer, not a string"}}
{"jsonrpc":"2.0","id":"b","result":{}}
{"jsonrpc":"2.0","id":1,"result":{"took":1}}
`
		if out.String() != want {
			t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
		}
	})
}

// TestWriteEndingAnswersAfterTheLines: notifications and the response
// after them go out in one write, and the response counts as the
// request's answer (the end of input waits for it, no longer); once the
// request was abandoned, the notifications alone go out.
func TestWriteEndingAnswersAfterTheLines(t *testing.T) {
	const note = `{"jsonrpc":"2.0","method":"session/update","params":{}}` + "\n"
	const resp = `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	synctest.Test(t, func(t *testing.T) {
		var out writes
		r, w := rpcline.New(strings.NewReader(ping+"\n"), &out, rpcline.Options{MaxLine: 1 << 10, Drain: time.Minute})
		eof := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(r)
			eof <- b
		}()
		synctest.Wait()
		if n, err := w.WriteEnding([]byte(note+note+resp), 2*len(note)); n != 2*len(note)+len(resp) || err != nil {
			t.Errorf("WriteEnding = %d, %v", n, err)
		}
		start := time.Now()
		<-eof
		if waited := time.Since(start); waited != 0 {
			t.Errorf("end of input came %s after the response", waited)
		}
		if want := []string{note + note + resp}; !slices.Equal(out.each, want) {
			t.Errorf("writes %q, want %q", out.each, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var out writes
		r, w := rpcline.New(strings.NewReader(ping+"\n"), &out, rpcline.Options{MaxLine: 1 << 10, Drain: time.Second})
		io.ReadAll(r) // abandons ping after a second
		w.WriteEnding([]byte(note+resp), len(note))
		if len(out.each) != 2 || out.each[1] != note {
			t.Errorf("writes %q, want the abandon and the notification alone", out.each)
		}
	})
}

// TestWriteAnswerCountsByTheKeyTaken: a response written with the key
// Take was given counts as that request's answer, whatever its line says
// (the end of input waits for it, no longer), and is dropped, the lines
// before it written, once that request was abandoned.
func TestWriteAnswerCountsByTheKeyTaken(t *testing.T) {
	const note = `{"jsonrpc":"2.0","method":"session/update","params":{}}` + "\n"
	// The key alone counts: read for its id, this line (id "1", not 1)
	// would answer no request.
	const resp = `{"jsonrpc":"2.0","id":"1","result":{}}` + "\n"
	taking := func(key *string) rpcline.Options {
		return rpcline.Options{MaxLine: 1 << 10, Drain: time.Minute, Take: func(r rpcline.Request) (func(), bool, error) {
			return func() { *key = r.Key }, true, nil
		}}
	}
	synctest.Test(t, func(t *testing.T) {
		var out writes
		var key string
		r, w := rpcline.New(strings.NewReader(ping+"\n"), &out, taking(&key))
		eof := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(r)
			eof <- b
		}()
		synctest.Wait()
		if n, err := w.WriteAnswer([]byte(note+resp), len(note), key); n != len(note)+len(resp) || err != nil {
			t.Errorf("WriteAnswer = %d, %v", n, err)
		}
		start := time.Now()
		<-eof
		if waited := time.Since(start); waited != 0 {
			t.Errorf("end of input came %s after the response", waited)
		}
		if want := []string{note + resp}; !slices.Equal(out.each, want) {
			t.Errorf("writes %q, want %q", out.each, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var out writes
		var key string
		r, w := rpcline.New(strings.NewReader(ping+"\n"), &out, taking(&key))
		io.ReadAll(r) // abandons ping after a minute
		w.WriteAnswer([]byte(note+resp), len(note), key)
		if len(out.each) != 2 || out.each[1] != note {
			t.Errorf("writes %q, want the abandon and the notification alone", out.each)
		}
	})
}

// TestEndOfInputCutsAWriteStuckOnAClientThatReadsNothing: once the input
// has ended and the drain is over, an answer whose write is stuck on a
// client that reads nothing (the pipe is full) fails, and so does the
// next, so that the server's end, which waits for them, comes (an
// outsider's finding: offstage mcp never ended, nor its shells); where
// the output cannot be cut (no write deadlines), Cut says so.
func TestEndOfInputCutsAWriteStuckOnAClientThatReadsNothing(t *testing.T) {
	pr, pw, err := os.Pipe() // through the poller: it keeps write deadlines
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	in, feed := io.Pipe()
	r, w := rpcline.New(in, pw, rpcline.Options{MaxLine: 1 << 10, Drain: 50 * time.Millisecond})
	go feed.Write([]byte(ping + "\n"))
	if _, err := r.Read(make([]byte, 1<<10)); err != nil {
		t.Fatal(err)
	}
	big := `{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("a", 1<<20) + `"}}` + "\n" // more than the pipe holds
	wrote := make(chan error, 2)
	go func() {
		_, err := w.Write([]byte(big))
		wrote <- err
	}()
	time.Sleep(100 * time.Millisecond) // the pipe is full: the next write queues behind
	go func() {
		_, err := w.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}` + "\n"))
		wrote <- err
	}()
	feed.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(r)
		ended <- err
	}()
	for range 2 {
		select {
		case err := <-wrote:
			if err == nil {
				t.Error("a write stuck on a client that reads nothing succeeded")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a write stuck on a client that reads nothing was not cut")
		}
	}
	if err := <-ended; err != nil {
		t.Errorf("the input ended with %v", err)
	}
	_, plain := rpcline.New(strings.NewReader(""), io.Discard, rpcline.Options{MaxLine: 1 << 10})
	if plain.Cut() {
		t.Error("Cut says it cut an output that keeps no write deadlines")
	}
}

// writes records each write.
type writes struct{ each []string }

func (w *writes) Write(p []byte) (int, error) {
	w.each = append(w.each, string(p))
	return len(p), nil
}

// The output's reader gone for good (a client that died, its input ending
// with it): nobody would read an answer, so the end of input waits no
// grace, and the session can end, cancelling the calls in flight, whose
// results would otherwise be taken as given (a task_wait's marked
// delivered; an outsider's finding). It is seen at the end of input, or
// while the drain waits.
func TestEndOfInputWithTheReaderGone(t *testing.T) {
	for _, when := range []string{"before", "during"} {
		t.Run(when, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pr, pw, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer pw.Close()
				if when == "before" {
					pr.Close()
				}
				inR, inW := io.Pipe()
				r, w := rpcline.New(inR, pw, rpcline.Options{MaxLine: 1 << 10, Drain: time.Minute})
				eof := make(chan time.Duration)
				go func() {
					io.ReadAll(r)
					eof <- 0
				}()
				inW.Write([]byte(ping + "\n"))
				synctest.Wait()
				start := time.Now()
				inW.Close()
				synctest.Wait()
				if when == "during" {
					pr.Close()
				}
				<-eof
				if waited, most := time.Since(start), 100*time.Millisecond; waited > most {
					t.Errorf("end of input %s after the reader went; want at most %s", waited, most)
				}
				if n, err := w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")); err != nil || n == 0 {
					t.Errorf("the late reply: %d, %v; want it dropped as written", n, err)
				}
			})
		})
	}
}

// stuckWriter is an output whose reader reads nothing: a write blocks
// until release is closed.
type stuckWriter struct {
	bytes.Buffer
	release chan struct{}
}

func (s *stuckWriter) Write(p []byte) (int, error) {
	<-s.release
	return s.Buffer.Write(p)
}

// A write stuck on a client that reads nothing (a turn's updates filled
// the pipe) keeps neither the end of the input from the server past the
// grace and abandonWait, nor the abandoned request's answer from going
// out once the write ends (an outsider's finding: offstage acp never
// exited).
func TestEndOfInputPastAStuckWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &stuckWriter{release: make(chan struct{})}
		r, w := rpcline.New(strings.NewReader(ping+"\n"), out, rpcline.Options{MaxLine: 1 << 10, Drain: 5 * time.Second})
		go w.Write([]byte(`{"jsonrpc":"2.0","method":"update"}` + "\n")) // stuck
		start := time.Now()
		io.ReadAll(r)
		if waited := time.Since(start); waited != 6*time.Second {
			t.Errorf("end of input after %s, want the 5s grace and 1s for the stuck write", waited)
		}
		close(out.release)
		synctest.Wait()
		want := `{"jsonrpc":"2.0","method":"update"}` + "\n" + `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error: the input ended and this request was not answered within 5s of it; it was abandoned"}}` + "\n"
		if out.String() != want {
			t.Errorf("output %s, want %s", out.String(), want)
		}
	})
}
