// Package anthropic is a provider.Model for Anthropic's Messages API, with
// streaming, tool use and extended thinking, using the official SDK
// (github.com/anthropics/anthropic-sdk-go).
//
// The key and base URL come from Config only; reading ANTHROPIC_API_KEY is
// the caller's business (the CLI does it). Requests that fail with 408,
// 409, 429 or 5xx, or cannot connect, are retried with exponential backoff
// (Config.MaxRetries times, honouring Retry-After) before the response
// starts streaming; a stream that breaks off is not retried.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/offstage/offstage/provider"
)

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com"

// Config configures a Model.
type Config struct {
	// Model is the model name, such as "claude-sonnet-4-5". Required.
	Model string
	// APIKey authenticates. Required.
	APIKey string
	// BaseURL of the API. Default DefaultBaseURL.
	BaseURL string
	// MaxTokens caps each response (the API requires a cap). Default 8192.
	MaxTokens int
	// ThinkingBudget, when positive, turns on extended thinking with that
	// many tokens (it must be below MaxTokens).
	ThinkingBudget int
	// MaxRetries on 408/409/429/5xx and connection failures. Default 3;
	// negative means none.
	MaxRetries int
	// HTTPClient, if set, sends the requests.
	HTTPClient *http.Client
}

// Model is a provider.Model over the Messages API. It is safe for
// concurrent use.
type Model struct {
	cfg    Config
	client anthropic.Client
}

// New returns a Model. It fails without a model name or a key.
func New(cfg Config) (*Model, error) {
	switch {
	case cfg.Model == "":
		return nil, errors.New("anthropic: no model name (set --model)")
	case cfg.APIKey == "":
		return nil, errors.New("anthropic: no API key (set ANTHROPIC_API_KEY)")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 8192
	}
	if cfg.ThinkingBudget >= cfg.MaxTokens {
		return nil, fmt.Errorf("anthropic: the thinking budget (%d) must be below the token cap (%d)", cfg.ThinkingBudget, cfg.MaxTokens)
	}
	cfg.MaxRetries = provider.Retries(cfg.MaxRetries)
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(cfg.MaxRetries),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Model{cfg: cfg, client: anthropic.NewClient(opts...)}, nil
}

// Generate implements provider.Model.
func (m *Model) Generate(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (provider.Response, error) {
	maxTokens := m.cfg.MaxTokens
	if req.MaxTokens > 0 {
		maxTokens = req.MaxTokens
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.cfg.Model),
		MaxTokens: int64(maxTokens),
		Messages:  messages(req.Messages),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	if m.cfg.ThinkingBudget > 0 {
		params.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(m.cfg.ThinkingBudget))
	}
	for _, t := range req.Tools {
		var schema struct {
			Properties any      `json:"properties"`
			Required   []string `json:"required"`
		}
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
			return provider.Response{}, fmt.Errorf("anthropic: tool %s: schema: %w", t.Name, err)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name: t.Name, Description: anthropic.String(t.Description),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: schema.Properties, Required: schema.Required},
		}})
	}
	emit := func(e provider.Event) {
		if onEvent != nil {
			onEvent(e)
		}
	}
	stream := m.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg anthropic.Message
	for stream.Next() {
		event := stream.Current()
		if err := msg.Accumulate(event); err != nil {
			return provider.Response{}, fmt.Errorf("%w: %v", provider.ErrBadStream, err)
		}
		if ev, ok := event.AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			switch d := ev.Delta.AsAny().(type) {
			case anthropic.TextDelta:
				emit(provider.Event{Type: provider.TextDelta, Text: d.Text})
			case anthropic.ThinkingDelta:
				emit(provider.Event{Type: provider.ThinkingDelta, Text: d.Thinking})
			}
		}
	}
	if err := stream.Err(); err != nil {
		return provider.Response{}, classify(ctx, err)
	}
	if msg.StopReason == "" {
		return provider.Response{}, fmt.Errorf("%w: the stream ended before the message did", provider.ErrBadStream)
	}
	res := provider.Response{
		Message: provider.Message{Role: provider.Assistant},
		Usage: provider.Usage{
			InputTokens:       int(msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens + msg.Usage.CacheCreationInputTokens),
			OutputTokens:      int(msg.Usage.OutputTokens),
			CachedInputTokens: int(msg.Usage.CacheReadInputTokens),
		},
	}
	for _, block := range msg.Content {
		switch b := block.AsAny().(type) {
		case anthropic.TextBlock:
			res.Message.Content = append(res.Message.Content, provider.Block{Type: provider.Text, Text: b.Text})
		case anthropic.ThinkingBlock:
			res.Message.Content = append(res.Message.Content, provider.Block{Type: provider.Thinking, Text: b.Thinking, Signature: b.Signature})
		case anthropic.ToolUseBlock:
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			call := provider.Block{Type: provider.ToolUse, ToolCallID: b.ID, ToolName: b.Name, Input: input}
			res.Message.Content = append(res.Message.Content, call)
			emit(provider.Event{Type: provider.ToolCall, Call: call})
		}
	}
	switch msg.StopReason {
	case anthropic.StopReasonToolUse:
		res.StopReason = provider.ToolCalls
	case anthropic.StopReasonMaxTokens:
		res.StopReason = provider.MaxTokens
	case anthropic.StopReasonRefusal:
		res.StopReason = provider.Refusal
	default:
		res.StopReason = provider.EndTurn
	}
	return res, nil
}

// messages converts the conversation; thinking blocks go back with their
// signatures, as the API requires during tool use.
func messages(msgs []provider.Message) []anthropic.MessageParam {
	var out []anthropic.MessageParam
	for _, m := range msgs {
		var blocks []anthropic.ContentBlockParamUnion
		for _, b := range m.Content {
			switch b.Type {
			case provider.Text:
				if b.Text != "" {
					blocks = append(blocks, anthropic.NewTextBlock(b.Text))
				}
			case provider.Thinking:
				if b.Signature != "" {
					blocks = append(blocks, anthropic.NewThinkingBlock(b.Signature, b.Text))
				}
			case provider.ToolUse:
				blocks = append(blocks, anthropic.NewToolUseBlock(b.ToolCallID, b.Input, b.ToolName))
			case provider.ToolResult:
				blocks = append(blocks, anthropic.NewToolResultBlock(b.ToolCallID, b.Text, b.IsError))
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if m.Role == provider.Assistant {
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		} else {
			out = append(out, anthropic.NewUserMessage(blocks...))
		}
	}
	return out
}

// classify turns an SDK error into one that wraps provider's sentinels.
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		body := apiErr.RawJSON()
		var parsed struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := http.StatusText(apiErr.StatusCode)
		if json.Unmarshal([]byte(body), &parsed) == nil && parsed.Error.Message != "" {
			msg = parsed.Error.Message
		}
		return &provider.StatusError{Status: apiErr.StatusCode, Message: msg, Body: provider.ClipBody(body), Err: provider.Classify(apiErr.StatusCode, body)}
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return fmt.Errorf("%w: %v", provider.ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %v", provider.ErrBadStream, err)
}
