// Package openai is a provider.Model for the OpenAI Chat Completions API
// and everything that speaks it: OpenAI, Ollama, vLLM, LM Studio,
// OpenRouter. It uses the official SDK (github.com/openai/openai-go/v3)
// with streaming and tool calls.
//
// The key and base URL come from Config only; reading OPENAI_API_KEY and
// OPENAI_BASE_URL is the caller's business (the CLI does it). Requests
// that fail with 408, 409, 429 or 5xx, or cannot connect, are retried with
// exponential backoff (Config.MaxRetries times, honouring Retry-After)
// before the response starts streaming; a stream that breaks off is not
// retried (its partial answer may already have been shown).
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/offstage/offstage/provider"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a Model.
type Config struct {
	// Model is the model name, such as "gpt-4.1" or "qwen3:8b". Required.
	Model string
	// APIKey authenticates; required for OpenAI, optional for local
	// servers.
	APIKey string
	// BaseURL of the API. Default DefaultBaseURL.
	BaseURL string
	// MaxTokens caps each response; 0 leaves it to the server.
	MaxTokens int
	// MaxRetries on 408/409/429/5xx and connection failures. Default 3;
	// negative means none.
	MaxRetries int
	// HTTPClient, if set, sends the requests.
	HTTPClient *http.Client
}

// Model is a provider.Model over Chat Completions. It is safe for
// concurrent use.
type Model struct {
	cfg    Config
	client openai.Client
}

// New returns a Model. It fails if Model is empty, or if APIKey is empty
// while BaseURL is OpenAI's.
func New(cfg Config) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: no model name (set --model)")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.APIKey == "" && strings.HasPrefix(cfg.BaseURL, DefaultBaseURL) {
		return nil, errors.New("openai: no API key (set OPENAI_API_KEY, or --base-url for a local server)")
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
	return &Model{cfg: cfg, client: openai.NewClient(opts...)}, nil
}

// Generate implements provider.Model.
func (m *Model) Generate(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (provider.Response, error) {
	params := openai.ChatCompletionNewParams{
		Model:         m.cfg.Model,
		Messages:      messages(req),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if m.cfg.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(int64(m.cfg.MaxTokens))
	}
	for _, t := range req.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
			return provider.Response{}, fmt.Errorf("openai: tool %s: schema: %w", t.Name, err)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: schema,
		}))
	}
	emit := func(e provider.Event) {
		if onEvent != nil {
			onEvent(e)
		}
	}
	var failed failure
	stream := m.client.Chat.Completions.NewStreaming(ctx, params, option.WithMiddleware(failed.keep))
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			return provider.Response{}, fmt.Errorf("%w: a chunk did not fit the ones before it", provider.ErrBadStream)
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		d := chunk.Choices[0].Delta
		if r := reasoning(d); r != "" {
			emit(provider.Event{Type: provider.ThinkingDelta, Text: r})
		}
		if d.Content != "" {
			emit(provider.Event{Type: provider.TextDelta, Text: d.Content})
		}
	}
	if err := stream.Err(); err != nil {
		return provider.Response{}, m.classify(ctx, err, &failed)
	}
	if len(acc.Choices) == 0 {
		return provider.Response{}, fmt.Errorf("%w: the stream ended without an answer", provider.ErrBadStream)
	}
	choice := acc.Choices[0]
	res := provider.Response{
		Message: provider.Message{Role: provider.Assistant},
		Usage: provider.Usage{InputTokens: int(acc.Usage.PromptTokens), OutputTokens: int(acc.Usage.CompletionTokens),
			CachedInputTokens: int(acc.Usage.PromptTokensDetails.CachedTokens)},
	}
	if choice.Message.Content != "" {
		res.Message.Content = append(res.Message.Content, provider.Block{Type: provider.Text, Text: choice.Message.Content})
	}
	for _, c := range choice.Message.ToolCalls {
		args := json.RawMessage(c.Function.Arguments)
		if len(strings.TrimSpace(c.Function.Arguments)) == 0 {
			args = json.RawMessage("{}")
		}
		b := provider.Block{Type: provider.ToolUse, ToolCallID: c.ID, ToolName: c.Function.Name, Input: args}
		res.Message.Content = append(res.Message.Content, b)
		emit(provider.Event{Type: provider.ToolCall, Call: b})
	}
	switch {
	case len(choice.Message.ToolCalls) > 0:
		res.StopReason = provider.ToolCalls
	case choice.FinishReason == "length":
		res.StopReason = provider.MaxTokens
	case choice.Message.Refusal != "":
		res.StopReason = provider.Refusal
		res.Message.Content = append(res.Message.Content, provider.Block{Type: provider.Text, Text: choice.Message.Refusal})
	default:
		res.StopReason = provider.EndTurn
	}
	return res, nil
}

// reasoning returns the reasoning text some OpenAI-compatible servers
// stream in a field of their own ("reasoning_content" or "reasoning").
func reasoning(d openai.ChatCompletionChunkChoiceDelta) string {
	for _, name := range []string{"reasoning_content", "reasoning"} {
		if f, ok := d.JSON.ExtraFields[name]; ok {
			var s string
			if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
				return s
			}
		}
	}
	return ""
}

// messages converts the conversation. Tool results become tool messages,
// placed right after the assistant message that called them; thinking is
// not sent back (Chat Completions has no place for it).
func messages(req provider.Request) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if req.System != "" {
		out = append(out, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		if m.Role == provider.Assistant {
			var a openai.ChatCompletionAssistantMessageParam
			if text := m.TextOf(); text != "" {
				a.Content.OfString = openai.String(text)
			}
			for _, c := range m.ToolCalls() {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ToolCallID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.ToolName, Arguments: string(c.Input)},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
			continue
		}
		var texts []string
		for _, b := range m.Content {
			switch b.Type {
			case provider.ToolResult:
				out = append(out, openai.ToolMessage(b.Text, b.ToolCallID))
			case provider.Text:
				texts = append(texts, b.Text)
			}
		}
		if len(texts) > 0 {
			out = append(out, openai.UserMessage(strings.Join(texts, "\n\n")))
		}
	}
	return out
}

// failure keeps the status and body of the last attempt's error response,
// whatever its shape: the SDK parses only {"error": {…}} and answers
// anything else ({"error": "boom"}, an HTML page) with its own JSON error,
// losing the status. One Generate's attempts run one after another on its
// goroutine, so it needs no lock.
type failure struct {
	status int
	body   []byte
}

// maxErrorBody bounds the part of an error response kept.
const maxErrorBody = 64 << 10

// keep is the middleware that records each attempt's error response,
// handing the SDK the same bytes.
func (f *failure) keep(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	*f = failure{}
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(b))
	*f = failure{status: res.StatusCode, body: b}
	return res, nil
}

// classify turns an SDK error into one that wraps provider's sentinels.
func (m *Model) classify(ctx context.Context, err error, failed *failure) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		data := string(streamErr.Event.Data)
		msg := provider.ErrorMessage(streamErr.Event.Data)
		if msg == "" {
			msg = provider.ClipBody(data)
		}
		return &provider.StreamError{Message: msg, Body: provider.ClipBody(data), Err: provider.ClassifyStream(data)}
	}
	var urlErr *url.Error
	if failed.status == 0 && errors.As(err, &urlErr) {
		return fmt.Errorf("%w: %v", provider.ErrUnavailable, err)
	}
	if failed.status != 0 {
		body := string(failed.body)
		msg := provider.ErrorMessage(failed.body)
		if msg == "" {
			msg = http.StatusText(failed.status)
		}
		return &provider.StatusError{Status: failed.status, Message: msg, Body: provider.ClipBody(body),
			Hint: m.hint(failed.status, body), Err: provider.Classify(failed.status, body+" "+msg)}
	}
	return fmt.Errorf("%w: %v", provider.ErrBadStream, err)
}

// hint says what a newcomer most likely got wrong when the endpoint
// answers that it has no chat completions at all: the base URL's /v1 left
// out, the commonest first slip (http://localhost:11434 for
// http://localhost:11434/v1).
func (m *Model) hint(status int, body string) string {
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed || provider.Classify(status, body) != nil {
		return ""
	}
	u, err := url.Parse(m.cfg.BaseURL)
	if err != nil {
		return ""
	}
	if p := strings.TrimSuffix(u.Path, "/"); !strings.HasSuffix(p, "/v1") {
		u.Path = p + "/v1"
		return fmt.Sprintf("the base URL %s has no /v1 at its end: most OpenAI-compatible servers want %s", m.cfg.BaseURL, u)
	}
	return fmt.Sprintf("check the base URL %s: the server has no %s/chat/completions", m.cfg.BaseURL, strings.TrimSuffix(m.cfg.BaseURL, "/"))
}

// Models lists the models the endpoint offers (GET /models), for a hint
// when the one asked for does not exist. It fails if the endpoint does
// not list them.
func (m *Model) Models(ctx context.Context) ([]string, error) {
	var failed failure
	page, err := m.client.Models.List(ctx, option.WithMiddleware(failed.keep), option.WithMaxRetries(0))
	if err != nil {
		return nil, m.classify(ctx, err, &failed)
	}
	var names []string
	for _, mo := range page.Data {
		names = append(names, mo.ID)
	}
	return names, nil
}
