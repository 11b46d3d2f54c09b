package acpserver

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/rpcline"
	"github.com/offstage/offstage/task"
)

// The session/update notifications carry nearly everything the agent
// sends, several per prompt, and the SDK's encoding of one cost more than
// the turn itself: SessionUpdate.MarshalJSON (and ContentBlock's, and
// ToolCallContent's inside it) encodes the variant, decodes that into a
// map to add the discriminator and encodes the map again, and the
// notification and the message around it are checked and compacted twice
// more. appendUpdate writes the same JSON by hand, appending to the
// session's buffer (outbox.go): no reflection, no allocation. Strings are escaped
// byte for byte as encoding/json escapes them (appendString,
// FuzzAppendString); a value of a field typed any (rawInput, rawOutput,
// _meta) and the rare locations go through encoding/json, except a
// jsonText, which is written as it is. The key order differs from the
// SDK's (sorted): JSON does not care, and TestUpdateWireMatchesSDK and
// FuzzUpdateWire check that a client decodes the same update from both.
// An update of another kind (a plan, a diff, a terminal) goes through
// the SDK as before.

// maxKeptLine bounds the encoding buffer a session keeps between updates:
// one long tool output does not stay allocated for the session's life.
const maxKeptLine = 64 << 10

// updatePrefix begins every session/update line (rpcline's Writer knows a
// notification by it without decoding the line).
const updatePrefix = `{"jsonrpc":"2.0","method":"` + acp.ClientMethodSessionUpdate + `","params":{"sessionId":`

// appendUpdate appends a session/update notification line (with its
// newline) for u in session id to dst. It reports false, and leaves dst as
// it was, for an update it does not encode, which the SDK then sends.
func appendUpdate(dst []byte, id acp.SessionId, u *acp.SessionUpdate) ([]byte, bool) {
	start := len(dst)
	dst = append(dst, updatePrefix...)
	dst = appendString(dst, string(id))
	dst = append(dst, `,"update":`...)
	ok := false
	switch {
	case u.UserMessageChunk != nil:
		c := u.UserMessageChunk
		dst, ok = appendChunk(dst, c.Meta, c.Content, c.MessageId, "user_message_chunk")
	case u.AgentMessageChunk != nil:
		c := u.AgentMessageChunk
		dst, ok = appendChunk(dst, c.Meta, c.Content, c.MessageId, "agent_message_chunk")
	case u.AgentThoughtChunk != nil:
		c := u.AgentThoughtChunk
		dst, ok = appendChunk(dst, c.Meta, c.Content, c.MessageId, "agent_thought_chunk")
	case u.ToolCall != nil && len(u.ToolCall.Content) == 0:
		dst, ok = appendToolCall(dst, u.ToolCall)
	case u.ToolCallUpdate != nil:
		dst, ok = appendToolCallUpdate(dst, u.ToolCallUpdate)
	case u.AvailableCommandsUpdate != nil:
		dst, ok = appendCommands(dst, u.AvailableCommandsUpdate)
	}
	if !ok {
		return dst[:start], false
	}
	return append(dst, "}}\n"...), true
}

// appendChunk appends a message or thought chunk whose content is a text
// block; false if its content is not text alone.
func appendChunk(dst []byte, meta map[string]any, content acp.ContentBlock, msgID *string, kind string) ([]byte, bool) {
	text, ok := textOf(content)
	if !ok {
		return dst, false
	}
	dst = append(dst, '{')
	if dst, ok = appendMeta(dst, meta); !ok {
		return dst, false
	}
	dst = append(dst, `"content":`...)
	dst = appendText(dst, text)
	if msgID != nil {
		dst = append(dst, `,"messageId":`...)
		dst = appendString(dst, *msgID)
	}
	dst = append(dst, `,"sessionUpdate":"`...)
	dst = append(dst, kind...)
	return append(dst, `"}`...), true
}

// appendChunkLine appends the session/update line of an agent's message
// chunk, or of a thought chunk, holding text: what appendUpdate writes
// for acp.UpdateAgentMessageText(text) or acp.UpdateAgentThoughtText.
func appendChunkLine[S string | []byte](dst []byte, id acp.SessionId, thought bool, text S) []byte {
	dst = append(dst, updatePrefix...)
	dst = appendString(dst, string(id))
	dst = append(dst, `,"update":{"content":{"text":`...)
	dst = appendString(dst, text)
	if thought {
		return append(dst, `,"type":"text"},"sessionUpdate":"agent_thought_chunk"}}}`+"\n"...)
	}
	return append(dst, `,"type":"text"},"sessionUpdate":"agent_message_chunk"}}}`+"\n"...)
}

// textOf returns the text of a content block that is text alone. The SDK
// writes a text block as its text and type, and nothing else (it drops a
// text block's annotations and _meta); so does appendText, so that both
// write the same.
func textOf(b acp.ContentBlock) (string, bool) {
	if b.Text == nil || b.Image != nil || b.Audio != nil || b.ResourceLink != nil || b.Resource != nil {
		return "", false
	}
	return b.Text.Text, true
}

func appendText(dst []byte, text string) []byte {
	dst = append(dst, `{"text":`...)
	dst = appendString(dst, text)
	return append(dst, `,"type":"text"}`...)
}

// appendToolCall appends a tool call without content.
func appendToolCall(dst []byte, c *acp.SessionUpdateToolCall) ([]byte, bool) {
	var ok bool
	dst = append(dst, '{')
	if dst, ok = appendMeta(dst, c.Meta); !ok {
		return dst, false
	}
	if c.Kind != "" {
		dst = appendField(dst, "kind", string(c.Kind))
	}
	if len(c.Locations) > 0 {
		if dst, ok = appendMember(dst, "locations", c.Locations); !ok {
			return dst, false
		}
		dst = append(dst, ',')
	}
	if dst, ok = appendRaw(dst, c.RawInput, c.RawOutput); !ok {
		return dst, false
	}
	dst = append(dst, `"sessionUpdate":"tool_call",`...)
	if c.Status != "" {
		dst = appendField(dst, "status", string(c.Status))
	}
	dst = append(dst, `"title":`...)
	dst = appendString(dst, c.Title)
	dst = append(dst, `,"toolCallId":`...)
	dst = appendString(dst, string(c.ToolCallId))
	return append(dst, '}'), true
}

// appendToolCallUpdate appends a tool call's update; false if some of its
// content is not a text block (a diff, a terminal, an image).
func appendToolCallUpdate(dst []byte, u *acp.SessionToolCallUpdate) ([]byte, bool) {
	var ok bool
	dst = append(dst, '{')
	if dst, ok = appendMeta(dst, u.Meta); !ok {
		return dst, false
	}
	if len(u.Content) > 0 {
		dst = append(dst, `"content":[`...)
		for i, c := range u.Content {
			if c.Content == nil || c.Diff != nil || c.Terminal != nil {
				return dst, false
			}
			text, ok := textOf(c.Content.Content)
			if !ok {
				return dst, false
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			if dst, ok = appendMeta(dst, c.Content.Meta); !ok {
				return dst, false
			}
			dst = append(dst, `"content":`...)
			dst = appendText(dst, text)
			dst = append(dst, `,"type":"content"}`...)
		}
		dst = append(dst, "],"...)
	}
	if u.Kind != nil {
		dst = appendField(dst, "kind", string(*u.Kind))
	}
	if len(u.Locations) > 0 {
		if dst, ok = appendMember(dst, "locations", u.Locations); !ok {
			return dst, false
		}
		dst = append(dst, ',')
	}
	if dst, ok = appendRaw(dst, u.RawInput, u.RawOutput); !ok {
		return dst, false
	}
	dst = append(dst, `"sessionUpdate":"tool_call_update",`...)
	if u.Status != nil {
		dst = appendField(dst, "status", string(*u.Status))
	}
	if u.Title != nil {
		dst = appendField(dst, "title", *u.Title)
	}
	dst = append(dst, `"toolCallId":`...)
	dst = appendString(dst, string(u.ToolCallId))
	return append(dst, '}'), true
}

// appendCommands appends the slash commands a session offers (every
// session announces them once: through the SDK, which encodes each
// command's input three times over, that cost more than a prompt).
func appendCommands(dst []byte, c *acp.SessionAvailableCommandsUpdate) ([]byte, bool) {
	var ok bool
	dst = append(dst, '{')
	if dst, ok = appendMeta(dst, c.Meta); !ok {
		return dst, false
	}
	dst = append(dst, `"availableCommands":`...)
	if c.AvailableCommands == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, cmd := range c.AvailableCommands {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			if dst, ok = appendMeta(dst, cmd.Meta); !ok {
				return dst, false
			}
			dst = append(dst, `"description":`...)
			dst = appendString(dst, cmd.Description)
			if cmd.Input != nil {
				in := cmd.Input.Unstructured
				if in == nil {
					return dst, false // an input of no kind: the SDK's to refuse
				}
				dst = append(dst, `,"input":{`...)
				if dst, ok = appendMeta(dst, in.Meta); !ok {
					return dst, false
				}
				dst = append(dst, `"hint":`...)
				dst = appendString(dst, in.Hint)
				dst = append(dst, '}')
			}
			dst = append(dst, `,"name":`...)
			dst = appendString(dst, cmd.Name)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, `,"sessionUpdate":"available_commands_update"}`...), true
}

// appendMeta appends a _meta member and its comma, where meta is set.
func appendMeta(dst []byte, meta map[string]any) ([]byte, bool) {
	if meta == nil {
		return dst, true
	}
	dst, ok := appendMember(dst, "_meta", meta)
	return append(dst, ','), ok
}

// appendField appends the string member key and its comma.
func appendField(dst []byte, key, value string) []byte {
	dst = append(dst, '"')
	dst = append(dst, key...)
	dst = append(dst, `":`...)
	dst = appendString(dst, value)
	return append(dst, ',')
}

// appendRaw appends the rawInput and rawOutput members that are set, each
// followed by a comma (omitempty: an any that is nil is left out).
func appendRaw(dst []byte, in, out any) ([]byte, bool) {
	ok := true
	if in != nil {
		if dst, ok = appendMember(dst, "rawInput", in); !ok {
			return dst, false
		}
		dst = append(dst, ',')
	}
	if out != nil {
		if dst, ok = appendMember(dst, "rawOutput", out); !ok {
			return dst, false
		}
		dst = append(dst, ',')
	}
	return dst, true
}

// appendMember appends "key":v, v as appendValue writes it.
func appendMember(dst []byte, key string, v any) ([]byte, bool) {
	dst = append(dst, '"')
	dst = append(dst, key...)
	dst = append(dst, `":`...)
	return appendValue(dst, v)
}

// appendValue appends v: a string or a jsonText as it is, anything else
// as encoding/json writes it; false if it cannot be encoded.
func appendValue(dst []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return appendString(dst, v), true
	case jsonText:
		return append(dst, v...), true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, false
	}
	return append(dst, b...), true
}

// jsonText is a JSON value known to be valid and to hold no line break (a
// tool's result or a call's input, checked once by asJSON), which a
// session update carries as it is (rawInput, rawOutput) rather than
// decoded into maps and encoded again.
type jsonText []byte

// MarshalJSON makes a jsonText the value it holds for the SDK too.
func (r jsonText) MarshalJSON() ([]byte, error) { return r, nil }

// asJSON returns b as a jsonText if it is valid JSON, compacted if it has
// line breaks (whitespace between tokens: a string holds none raw); ok is
// false otherwise.
func asJSON(b []byte) (jsonText, bool) {
	if _, ok := rpcline.Valid(b); !ok {
		return nil, false
	}
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return jsonText(b), true
	}
	var c bytes.Buffer
	json.Compact(&c, b) // valid: it cannot fail
	return jsonText(c.Bytes()), true
}

// appendString appends s as a JSON string, byte for byte as encoding/json
// writes it (HTML characters, U+2028 and U+2029 escaped, invalid UTF-8
// as U+FFFD): a client reads the same text the SDK would have sent.
func appendString[S string | []byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		// A rune is at most utf8.UTFMax bytes: the conversion of so few
		// does not allocate (as encoding/json does it).
		c, size := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendResponse appends the response to request id (with its newline),
// as the SDK's handleInbound writes one: an error as its
// *acp.RequestError (any other error as an internal one), a result
// marshalled. A prompt's result, which every prompt has, is written by
// hand (appendPromptResult); anything else by encoding/json.
func appendResponse(dst []byte, id json.RawMessage, result any, err error) []byte {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	if err == nil {
		dst = append(dst, `,"result":`...)
		if r, ok := result.(acp.PromptResponse); ok {
			if b, ok := appendPromptResult(dst, &r); ok {
				return append(b, "}\n"...)
			}
		}
		b, merr := json.Marshal(result)
		if merr != nil {
			return appendResponse(dst[:start], id, nil, acp.NewInternalError(map[string]any{"error": merr.Error()}))
		}
		dst = append(dst, b...)
		return append(dst, "}\n"...)
	}
	b, merr := json.Marshal(requestError(err))
	if merr != nil { // cannot happen: an error is plain JSON
		b, _ = json.Marshal(acp.NewInternalError(map[string]any{"error": merr.Error()}))
	}
	dst = append(dst, `,"error":`...)
	dst = append(dst, b...)
	return append(dst, "}\n"...)
}

// appendPromptResponse appends the response to prompt id whose turn
// stopped for stop, having spent turn and session: what appendResponse
// writes for withUsage(acp.PromptResponse{StopReason: stop}, turn,
// session), without building the response (its _meta is a map).
func appendPromptResponse(dst []byte, id json.RawMessage, stop acp.StopReason, turn *task.Usage, session agent.Usage) []byte {
	u, meta := promptUsage(turn, session)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":`...)
	dst = appendResult(dst, &meta, stop, &u, nil)
	return append(dst, "}\n"...)
}

// appendPromptResult appends a prompt's response whose _meta, if any,
// holds the usage alone (UsageMeta); false for another _meta, which
// encoding/json writes.
func appendPromptResult(dst []byte, r *acp.PromptResponse) ([]byte, bool) {
	var meta *usageMeta
	if r.Meta != nil {
		u, ok := r.Meta[UsageMeta].(usageMeta)
		if !ok || len(r.Meta) != 1 {
			return dst, false
		}
		meta = &u
	}
	return appendResult(dst, meta, r.StopReason, r.Usage, r.UserMessageId), true
}

// appendResult appends a prompt's response as encoding/json writes an
// acp.PromptResponse, its _meta {UsageMeta: meta} (none when nil).
func appendResult(dst []byte, meta *usageMeta, stop acp.StopReason, u *acp.Usage, userMessageID *string) []byte {
	dst = append(dst, '{')
	if meta != nil {
		dst = append(dst, `"_meta":{"`+UsageMeta+`":{"autonomous":`...)
		dst = appendTaskUsage(dst, &meta.Autonomous)
		dst = append(dst, `,"session":`...)
		dst = appendTaskUsage(dst, &meta.Session)
		dst = append(dst, `,"turn":`...)
		dst = appendTaskUsage(dst, &meta.Turn)
		dst = append(dst, "}},"...)
	}
	dst = append(dst, `"stopReason":`...)
	dst = appendString(dst, string(stop))
	if u != nil {
		// The SDK's order (its struct's), so that the line is the SDK's
		// byte for byte.
		dst = append(dst, `,"usage":{`...)
		dst = appendOptionalInt(dst, `"cachedReadTokens":`, u.CachedReadTokens, ",")
		dst = appendOptionalInt(dst, `"cachedWriteTokens":`, u.CachedWriteTokens, ",")
		dst = append(dst, `"inputTokens":`...)
		dst = strconv.AppendInt(dst, int64(u.InputTokens), 10)
		dst = append(dst, `,"outputTokens":`...)
		dst = strconv.AppendInt(dst, int64(u.OutputTokens), 10)
		dst = appendOptionalInt(dst, `,"thoughtTokens":`, u.ThoughtTokens, "")
		dst = append(dst, `,"totalTokens":`...)
		dst = strconv.AppendInt(dst, int64(u.TotalTokens), 10)
		dst = append(dst, '}')
	}
	if userMessageID != nil {
		dst = append(dst, `,"userMessageId":`...)
		dst = appendString(dst, *userMessageID)
	}
	return append(dst, '}')
}

// appendOptionalInt appends key (a JSON key and its colon), *n and then
// after, when n is set (omitempty).
func appendOptionalInt(dst []byte, key string, n *int, after string) []byte {
	if n == nil {
		return dst
	}
	dst = append(dst, key...)
	dst = strconv.AppendInt(dst, int64(*n), 10)
	return append(dst, after...)
}

// appendTaskUsage appends a task.Usage as encoding/json writes it.
func appendTaskUsage(dst []byte, u *task.Usage) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, u.InputTokens, 10)
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, u.OutputTokens, 10)
	dst = append(dst, `,"cached_input_tokens":`...)
	dst = strconv.AppendInt(dst, u.CachedInputTokens, 10)
	dst = append(dst, `,"model_calls":`...)
	dst = strconv.AppendInt(dst, u.ModelCalls, 10)
	return append(dst, '}')
}

// A tool call's card is started and ended on every call the model makes:
// cardLine and its callers write those two updates straight from what
// they hold, as appendUpdate writes acp.StartToolCall(id, title,
// WithStartKind, WithStartStatus, WithStartRawInput) and
// acp.UpdateToolCall(id, WithUpdateStatus, WithUpdateContent of one text
// block, WithUpdateRawOutput), where the SDK's builders allocated the
// update, each part and option, and a pointer per field
// (TestCardLinesAreTheSDKs, FuzzCardLines).

// appendCardStart appends the tool_call update line of a call's card.
// The raw input is rawJSON when set, else rawText.
func appendCardStart(dst []byte, id acp.SessionId, call, title string, kind acp.ToolKind, status acp.ToolCallStatus, rawJSON jsonText, rawText string) []byte {
	dst = append(dst, updatePrefix...)
	dst = appendString(dst, string(id))
	dst = append(dst, `,"update":{`...)
	if kind != "" {
		dst = appendField(dst, "kind", string(kind))
	}
	dst = append(dst, `"rawInput":`...)
	dst = appendRawValue(dst, rawJSON, rawText)
	dst = append(dst, `,"sessionUpdate":"tool_call",`...)
	if status != "" {
		dst = appendField(dst, "status", string(status))
	}
	dst = append(dst, `"title":`...)
	dst = appendString(dst, title)
	dst = append(dst, `,"toolCallId":`...)
	dst = appendString(dst, call)
	return append(dst, "}}}\n"...)
}

// appendCardEnd appends the tool_call_update line that sets a card's
// status, its text and its raw output (rawJSON when set, else rawText).
func appendCardEnd(dst []byte, id acp.SessionId, call string, status acp.ToolCallStatus, text string, rawJSON jsonText, rawText string) []byte {
	dst = append(dst, updatePrefix...)
	dst = appendString(dst, string(id))
	dst = append(dst, `,"update":{"content":[{"content":`...)
	dst = appendText(dst, text)
	dst = append(dst, `,"type":"content"}],"rawOutput":`...)
	dst = appendRawValue(dst, rawJSON, rawText)
	dst = append(dst, `,"sessionUpdate":"tool_call_update",`...)
	dst = appendField(dst, "status", string(status))
	dst = append(dst, `"toolCallId":`...)
	dst = appendString(dst, call)
	return append(dst, "}}}\n"...)
}

// appendCardStatus appends the tool_call_update line that sets a card's
// status alone (in_progress, as its call starts to run).
func appendCardStatus(dst []byte, id acp.SessionId, call string, status acp.ToolCallStatus) []byte {
	dst = append(dst, updatePrefix...)
	dst = appendString(dst, string(id))
	dst = append(dst, `,"update":{"sessionUpdate":"tool_call_update",`...)
	dst = appendField(dst, "status", string(status))
	dst = append(dst, `"toolCallId":`...)
	dst = appendString(dst, call)
	return append(dst, "}}}\n"...)
}

func appendRawValue(dst []byte, rawJSON jsonText, rawText string) []byte {
	if rawJSON != nil {
		return append(dst, rawJSON...)
	}
	return appendString(dst, rawText)
}
