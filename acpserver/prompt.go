package acpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"sync"
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

// take is the line guard's Options.Take: it takes session/prompt, and
// session/new and session/close (answerNewSession, startClose), which it
// decodes as checkParams and the SDK did.
func (srv *server) take(r rpcline.Request) (start func(), ok bool, err error) {
	switch r.Method {
	case acp.AgentMethodSessionPrompt:
		p, err := decodePrompt(r.Params)
		if err != nil {
			return nil, true, err
		}
		return func() { srv.startPrompt(r.ID, r.Key, p) }, true, nil
	case acp.AgentMethodSessionNew:
		p, err := newSessionParams(r.Params)
		if err != nil {
			return nil, true, paramsError(r.Method, err)
		}
		return func() { srv.startNewSession(r.ID, r.Key, p) }, true, nil
	case acp.AgentMethodSessionClose:
		p, err := closeSessionParams(r.Params)
		if err != nil {
			return nil, true, paramsError(r.Method, err)
		}
		return func() { srv.startClose(r.ID, r.Key, p.SessionId) }, true, nil
	}
	return nil, false, nil
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
// Run from the reading goroutine, and the turn's goroutine, when the turn
// ends, writes the response with the turn's last updates
// (session.handOver, session.turnEnd): one hand-off between goroutines
// per prompt, where the session's writer made two and a goroutine of its
// own for the request four. Otherwise the prompt waits on a
// goroutine of its own (session.prompt), as the SDK's requests did.
func (srv *server) startPrompt(id json.RawMessage, key string, p acp.PromptRequest) {
	a := srv.newAnswer(id, key, p.SessionId)
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
		ctx := a.context()
		go func() { a.respond(s.prompt(ctx, text)) }()
	}
}

// answer is a prompt's request being answered: the response it is owed,
// and what cancelling it stops. As the SDK's requests, it is cancelled by
// $/cancel_request naming its id, by session/cancel and by its session's
// next prompt; the end of the connection's input ends its context (a
// turn it handed over ends with its session, closed then).
//
// A prompt handed over (session.handOver) has no context: cancelling it
// cancels its turn, until its turn's end releases it. One answered on a
// goroutine of its own (session.prompt) has one, made then (context):
// a context per prompt, and a function registered on it to cancel the
// turn, cost more than the rest of taking the prompt.
type answer struct {
	srv *server
	id  json.RawMessage
	key string // the request's key to the line guard's Writer (rpcline's Request.Key)
	sid acp.SessionId

	// mu orders cancel against handOver and release: the turn is
	// cancelled with mu held (CancelTurn returns at once), so that the
	// session's next turn, which may start once release has run, is never
	// the one cancelled.
	mu        sync.Mutex
	cancelled bool               // guarded by mu
	stopCtx   context.CancelFunc // guarded by mu: ends the context made by context, if any
	turn      *session           // guarded by mu: the session running the turn it handed over, until released
}

// newAnswer registers a prompt's request to session sid, cancelling the
// session's prompt before it, as the SDK does.
func (srv *server) newAnswer(id json.RawMessage, key string, sid acp.SessionId) *answer {
	a := &answer{srv: srv, id: id, key: key, sid: sid}
	srv.mu.Lock()
	prev := srv.prompts[sid]
	srv.prompts[sid] = a
	srv.mu.Unlock()
	if prev != nil {
		prev.cancel()
	}
	return a
}

// cancel cancels the request: its context, and the turn it handed over.
func (a *answer) cancel() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cancelled = true
	if a.stopCtx != nil {
		a.stopCtx()
	}
	if a.turn != nil {
		a.turn.sess.CancelTurn()
	}
}

// context returns the request's context, for a prompt answered on a
// goroutine of its own: it ends with the connection's input, and when the
// request is cancelled (already, or later).
func (a *answer) context() context.Context {
	ctx, stop := context.WithCancel(a.srv.reqCtx)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopCtx = stop
	if a.cancelled {
		stop()
	}
	return ctx
}

// ended reports whether the request was cancelled, or the connection's
// input ended.
func (a *answer) ended() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cancelled || a.srv.reqCtx.Err() != nil
}

// released ends the request's hold on its turn: cancelling it no longer
// cancels a turn.
func (a *answer) released() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.turn = nil
}

// done forgets the request: it is answered.
func (a *answer) done() {
	srv := a.srv
	srv.mu.Lock()
	if srv.prompts[a.sid] == a {
		delete(srv.prompts, a.sid)
	}
	srv.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopCtx != nil {
		a.stopCtx()
	}
}

// respond forgets the request and writes its response.
func (a *answer) respond(resp acp.PromptResponse, err error) {
	a.done()
	a.srv.respond(a.id, resp, err)
}

// cancelPrompt cancels the prompt that session sid runs, if any
// (session/cancel, as the SDK does before it calls Cancel).
func (srv *server) cancelPrompt(sid acp.SessionId) {
	srv.mu.Lock()
	a := srv.prompts[sid]
	delete(srv.prompts, sid)
	srv.mu.Unlock()
	if a != nil {
		a.cancel()
	}
}

// cancelRequest is $/cancel_request for the prompts and session/new
// answered here (the SDK, which sees it too, cancels its own requests):
// it cancels the one whose id is params' requestId.
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
	var found *answer
	for _, a := range srv.prompts {
		if cancelKey(a.id) == key {
			found = a
		}
	}
	open := srv.opens[key]
	srv.mu.Unlock()
	if found != nil {
		found.cancel()
	}
	if open != nil {
		open()
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

// respondLine writes p, the response to the request the guard handed
// over whose key (rpcline's Request.Key) is key, and perhaps the lines
// that must follow it.
func (srv *server) respondLine(key string, p []byte) {
	if _, err := srv.out.WriteAnswer(p, 0, key); err != nil {
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
