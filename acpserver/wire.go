package acpserver

import (
	"encoding/json"

	acp "github.com/coder/acp-go-sdk"
)

// The session/update notifications carry nearly everything the agent
// sends, several per prompt, and the SDK's encoding of one cost more than
// the turn itself: SessionUpdate.MarshalJSON (and ContentBlock's, and
// ToolCallContent's inside it) encodes the variant, decodes that into a
// map to add the discriminator and encodes the map again, and the
// notification and the message around it are checked and compacted twice
// more. appendUpdate writes the same JSON in one pass of encoding/json
// over plain structs: the variant structs carry their own discriminator
// field, and the text blocks that nearly every update holds are encoded
// as the struct they are. The key order differs from the SDK's (struct
// order, not sorted); JSON does not care, and TestUpdateWireMatchesSDK
// and FuzzUpdateWire check that a client decodes the same update from
// both. An update of another kind (a plan, the commands, a diff) goes
// through the SDK as before.

// maxKeptLine bounds the encoding buffer a session keeps between updates:
// one long tool output does not stay allocated for the session's life.
const maxKeptLine = 64 << 10

// appendUpdate appends a session/update notification line (with its
// newline) for u in session id to dst. It reports false for an update it
// does not encode, which the SDK then sends.
func appendUpdate(dst []byte, id acp.SessionId, u *acp.SessionUpdate) ([]byte, bool) {
	var v any
	switch {
	case u.UserMessageChunk != nil:
		c := u.UserMessageChunk
		v, _ = chunkOf(c.Meta, c.Content, c.MessageId, "user_message_chunk")
	case u.AgentMessageChunk != nil:
		c := u.AgentMessageChunk
		v, _ = chunkOf(c.Meta, c.Content, c.MessageId, "agent_message_chunk")
	case u.AgentThoughtChunk != nil:
		c := u.AgentThoughtChunk
		v, _ = chunkOf(c.Meta, c.Content, c.MessageId, "agent_thought_chunk")
	case u.ToolCall != nil && len(u.ToolCall.Content) == 0:
		c := *u.ToolCall
		c.SessionUpdate = "tool_call"
		v = c
	case u.ToolCallUpdate != nil:
		v, _ = toolCallUpdateOf(u.ToolCallUpdate)
	}
	if v == nil {
		return dst, false
	}
	var line updateLine
	line.JSONRPC, line.Method = "2.0", acp.ClientMethodSessionUpdate
	line.Params.SessionID, line.Params.Update = id, v
	b, err := json.Marshal(line)
	if err != nil {
		return dst, false
	}
	dst = append(dst, b...)
	return append(dst, '\n'), true
}

// updateLine is a session/update notification as it goes on the wire.
type updateLine struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  struct {
		SessionID acp.SessionId `json:"sessionId"`
		Update    any           `json:"update"`
	} `json:"params"`
}

// wireChunk is a message or thought chunk whose content is a text block.
type wireChunk struct {
	Meta          map[string]any `json:"_meta,omitempty"`
	Content       wireText       `json:"content"`
	MessageID     *string        `json:"messageId,omitempty"`
	SessionUpdate string         `json:"sessionUpdate"`
}

// chunkOf returns the chunk to encode, or false if its content is not
// text alone.
func chunkOf(meta map[string]any, content acp.ContentBlock, msgID *string, kind string) (any, bool) {
	t, ok := textOf(content)
	if !ok {
		return nil, false
	}
	return wireChunk{Meta: meta, Content: t, MessageID: msgID, SessionUpdate: kind}, true
}

// wireText is a text block as the SDK writes it: its text and type, and
// nothing else (the SDK drops a text block's annotations and _meta; so
// does this, so that both write the same).
type wireText struct {
	Text string `json:"text"`
	Type string `json:"type"`
}

// textOf returns a content block that is text alone.
func textOf(b acp.ContentBlock) (wireText, bool) {
	if b.Text == nil || b.Image != nil || b.Audio != nil || b.ResourceLink != nil || b.Resource != nil {
		return wireText{}, false
	}
	return wireText{Text: b.Text.Text, Type: "text"}, true
}

// wireToolCallUpdate is acp.SessionToolCallUpdate with its content as
// text blocks.
type wireToolCallUpdate struct {
	Meta          map[string]any         `json:"_meta,omitempty"`
	Content       []wireToolContent      `json:"content,omitempty"`
	Kind          *acp.ToolKind          `json:"kind,omitempty"`
	Locations     []acp.ToolCallLocation `json:"locations,omitempty"`
	RawInput      any                    `json:"rawInput,omitempty"`
	RawOutput     any                    `json:"rawOutput,omitempty"`
	SessionUpdate string                 `json:"sessionUpdate"`
	Status        *acp.ToolCallStatus    `json:"status,omitempty"`
	Title         *string                `json:"title,omitempty"`
	ToolCallID    acp.ToolCallId         `json:"toolCallId"`
}

// wireToolContent is a tool call's content entry holding a text block.
type wireToolContent struct {
	Meta    map[string]any `json:"_meta,omitempty"`
	Content wireText       `json:"content"`
	Type    string         `json:"type"`
}

// toolCallUpdateOf returns the update to encode, or false if some of its
// content is not a text block (a diff, a terminal, an image).
func toolCallUpdateOf(u *acp.SessionToolCallUpdate) (any, bool) {
	w := wireToolCallUpdate{Meta: u.Meta, Kind: u.Kind, Locations: u.Locations, RawInput: u.RawInput, RawOutput: u.RawOutput,
		SessionUpdate: "tool_call_update", Status: u.Status, Title: u.Title, ToolCallID: u.ToolCallId}
	if len(u.Content) > 0 {
		w.Content = make([]wireToolContent, len(u.Content))
	}
	for i, c := range u.Content {
		if c.Content == nil || c.Diff != nil || c.Terminal != nil {
			return nil, false
		}
		t, ok := textOf(c.Content.Content)
		if !ok {
			return nil, false
		}
		w.Content[i] = wireToolContent{Meta: c.Content.Meta, Content: t, Type: "content"}
	}
	return w, true
}
