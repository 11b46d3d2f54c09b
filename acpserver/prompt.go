package acpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/internal/rpcline"
)

// session/prompt, the request a conversation repeats, is answered here
// rather than by the SDK's dispatch: the line guard hands it over
// (rpcline's Options.Take) and its params are decoded once, with the
// SDK's own types and Validate, as checkParams and then the SDK each did
// before; the SDK started a goroutine per request, whose stack grew while
// it decoded. What the SDK did around a prompt is done the same way: a
// new prompt in a session, or session/cancel, cancels the context of the
// one before; $/cancel_request cancels the prompt it names; the end of
// the connection cancels them all; the response is written as the SDK
// writes one (handleInbound).

// take is the line guard's Options.Take: it takes session/prompt.
func (srv *server) take(r rpcline.Request) (start func(), ok bool, err error) {
	if r.Method != acp.AgentMethodSessionPrompt {
		return nil, false, nil
	}
	p, err := decodePrompt(r.Params)
	if err != nil {
		return nil, true, err
	}
	return func() { srv.startPrompt(r.ID, p) }, true, nil
}

// decodePrompt decodes session/prompt's params as the SDK does, and
// refuses what checkParams refused before the SDK saw it, in its words.
func decodePrompt(params json.RawMessage) (acp.PromptRequest, error) {
	p, err := promptParams(params)
	if err != nil {
		return p, paramsError(acp.AgentMethodSessionPrompt, err)
	}
	return p, nil
}

// promptParams decodes session/prompt's params: the SDK's decoding and
// Validate, and a sessionId that is there.
func promptParams(params json.RawMessage) (acp.PromptRequest, error) {
	if p, ok := plainPrompt(params); ok {
		return p, nil
	}
	var p acp.PromptRequest
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if err := json.Unmarshal(params, &p); err != nil {
		if e := checkPrompt(params); e != nil {
			return p, e // says which block
		}
		return p, describeDecodeError(err)
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	// An absent or null sessionId decodes as "", but one given twice, the
	// second null, keeps the first: needSessionID reads it as absent.
	if p.SessionId == "" || bytes.Contains(params, []byte("null")) && needSessionID(params) != nil {
		return p, errSessionID
	}
	return p, nil
}

// plainPrompt reads the params every prompt of a conversation has,
// {"sessionId": "…", "prompt": [{"type": "text", "text": "…"}, …]},
// in place (rpcline.Members), as the SDK decodes them: its ContentBlock
// decodes each block into a map, then again into its variant. ok is
// false for anything else (another key, a key twice, another block, an
// escaped key, a sessionId that is empty or not a string, an error to
// say), which promptParams decodes as the SDK does; FuzzPromptParams
// holds the two to the same result. params is valid JSON.
func plainPrompt(params json.RawMessage) (p acp.PromptRequest, ok bool) {
	var sawID, sawPrompt bool
	good := true
	isObject := rpcline.Members(params, func(key, value []byte) {
		switch {
		case !good:
		case string(key) == "sessionId" && !sawID:
			sawID = true
			var id string
			id, good = plainString(value)
			p.SessionId = acp.SessionId(id)
		case string(key) == "prompt" && !sawPrompt:
			sawPrompt = true
			p.Prompt, good = plainBlocks(value)
		default:
			good = false
		}
	})
	return p, isObject && good && sawID && sawPrompt && p.SessionId != ""
}

// plainBlocks reads a prompt whose blocks are all {"type": "text",
// "text": "…"}, in either order.
func plainBlocks(arr []byte) ([]acp.ContentBlock, bool) {
	blocks := []acp.ContentBlock{}
	ok := true
	isArray := rpcline.Elements(arr, func(block []byte) {
		var sawType, sawText bool
		var text string
		ok = ok && rpcline.Members(block, func(key, value []byte) {
			switch {
			case !ok:
			case string(key) == "type" && !sawType:
				sawType, ok = true, string(value) == `"text"`
			case string(key) == "text" && !sawText:
				sawText = true
				text, ok = plainString(value)
			default:
				ok = false
			}
		}) && ok && sawType && sawText
		if ok {
			blocks = append(blocks, acp.ContentBlock{Text: &acp.ContentBlockText{Type: "text", Text: text}})
		}
	})
	return blocks, isArray && ok
}

// plainString decodes a JSON string (valid JSON), as encoding/json does.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// startPrompt answers a session/prompt the guard handed over. When the
// session is idle (no prompt, no autonomous turn: its Run loop waits for
// input) and the prompt is no slash command, the prompt goes straight to
// Run from the reading goroutine, and the session's sender, which writes
// the turn's updates, writes the response after them (session.handOver):
// two hand-offs between goroutines per prompt, where a goroutine of its
// own for the request made four. Otherwise the prompt waits on a
// goroutine of its own (session.prompt), as the SDK's requests did.
func (srv *server) startPrompt(id json.RawMessage, p acp.PromptRequest) {
	ctx, done := srv.promptContext(id, p.SessionId)
	a := &answer{srv: srv, id: id, ctx: ctx, done: done}
	s, err := srv.session(p.SessionId)
	var text string
	if err == nil {
		text, err = promptText(p.Prompt)
	}
	switch {
	case err != nil:
		a.respond(acp.PromptResponse{}, err)
	case s.handOver(text, a):
	default:
		go func() { a.respond(s.prompt(ctx, text)) }()
	}
}

// answer is the response a prompt's request is owed.
type answer struct {
	srv  *server
	id   json.RawMessage
	ctx  context.Context // the request's
	done func()          // forgets ctx (promptContext)

	// For a prompt handed over (session.handOver): stop stops the
	// AfterFunc that cancels the turn when ctx ends, and fired is closed
	// once that function has run, if it ran.
	stop  func() bool
	fired chan struct{}
}

// respond forgets the request's context and writes its response.
func (a *answer) respond(resp acp.PromptResponse, err error) {
	a.done()
	a.srv.respond(a.id, resp, err)
}

// promptContext returns the context of a prompt's request, as the SDK
// makes one: it ends with the connection, and is cancelled by
// $/cancel_request naming id, by session/cancel and by the session's next
// prompt (which cancels this one's, as the SDK does). done forgets it.
func (srv *server) promptContext(id json.RawMessage, sid acp.SessionId) (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(srv.reqCtx)
	inflight := &promptRequest{key: cancelKey(id), cancel: cancel}
	srv.mu.Lock()
	prev := srv.prompts[sid]
	srv.prompts[sid] = inflight
	srv.mu.Unlock()
	if prev != nil {
		prev.cancel()
	}
	return ctx, func() {
		srv.mu.Lock()
		if srv.prompts[sid] == inflight {
			delete(srv.prompts, sid)
		}
		srv.mu.Unlock()
		cancel()
	}
}

// promptRequest is a prompt being answered, as $/cancel_request and
// session/cancel find it.
type promptRequest struct {
	key    string // cancelKey of its id
	cancel context.CancelFunc
}

// cancelPrompt cancels the context of the prompt that session sid runs,
// if any (session/cancel, as the SDK does before it calls Cancel).
func (srv *server) cancelPrompt(sid acp.SessionId) {
	srv.mu.Lock()
	p := srv.prompts[sid]
	delete(srv.prompts, sid)
	srv.mu.Unlock()
	if p != nil {
		p.cancel()
	}
}

// cancelRequest is $/cancel_request for the prompts answered here (the
// SDK, which sees it too, cancels its own requests): it cancels the
// prompt whose id is params' requestId.
func (srv *server) cancelRequest(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	key := cancelKey(p.RequestID)
	if key == "" {
		return
	}
	srv.mu.Lock()
	var found *promptRequest
	for _, r := range srv.prompts {
		if r.key == key {
			found = r
		}
	}
	srv.mu.Unlock()
	if found != nil {
		found.cancel()
	}
}

// cancelKey is the key by which $/cancel_request's requestId names a
// request, as the SDK matches them: a string by its value, a number by
// its value (7, 7.0 and 70e-1 are one id); "" for anything else, or a
// number whose exponent is far past any id the guard lets through.
func cancelKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return ""
	case raw[0] == '"':
		s, ok := plainString(raw)
		if !ok {
			return ""
		}
		return "s" + s
	case plainInteger(raw):
		return "n" + string(raw) // every prompt's id: what big.Rat would say
	case raw[0] != '-' && (raw[0] < '0' || raw[0] > '9'):
		return ""
	}
	if _, exp, ok := strings.Cut(strings.ToLower(string(raw)), "e"); ok && len(strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")) > 3 {
		return "" // |exponent| ≥ 1000: big.Rat would spell it out
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return ""
	}
	r, ok := new(big.Rat).SetString(n.String())
	if !ok || !r.IsInt() {
		return "n" + n.String() // no request has it: the guard passes integers only
	}
	return "n" + r.Num().String()
}

// plainInteger reports whether a JSON number is an integer written
// plainly: digits, no leading zero, perhaps a minus but not "-0".
func plainInteger(n []byte) bool {
	digits := bytes.TrimPrefix(n, []byte("-"))
	if len(digits) == 0 || digits[0] == '0' && (len(digits) > 1 || len(digits) < len(n)) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// respond writes the response to request id (appendResponse).
func (srv *server) respond(id json.RawMessage, result any, err error) {
	if _, err := srv.out.Write(appendResponse(nil, id, result, err)); err != nil {
		srv.cfg.Logger.Debug("a response was not sent", "err", err)
	}
}

// requestError is the SDK's toReqErr.
func requestError(err error) *acp.RequestError {
	if re, ok := err.(*acp.RequestError); ok {
		return re
	}
	if errors.Is(err, context.Canceled) {
		return acp.NewRequestCancelled(map[string]any{"error": err.Error()})
	}
	return acp.NewInternalError(map[string]any{"error": err.Error()})
}
