package acpserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/provider/scripted"
)

// turnsScript is a script of n prompts, each one tool call (task_list)
// and an answer: a scripted turn plays by the number of answers so far.
func turnsScript(b *testing.B, n int) *scripted.Model {
	var turns []string
	for range n {
		turns = append(turns, `{"tool_calls": [{"name": "task_list", "input": {}}]}`, `{"text": "Nothing is running."}`)
	}
	m, err := scripted.Parse([]byte(`{"turns": [` + strings.Join(turns, ",") + `]}`))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkACPPromptOverheadDirect is the yardstick: the same turn run on
// agent.Session, with a sink that does nothing.
func BenchmarkACPPromptOverheadDirect(b *testing.B) {
	s, err := agent.New(context.Background(), agent.Config{Model: turnsScript(b, b.N)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Turn(context.Background(), "what runs?", agent.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkACPPromptOverhead: the turn end to end over ACP on in-memory
// pipes, with the Go SDK's client: session/prompt, the streamed updates
// (two message chunks, a tool call and its two updates), the response.
func BenchmarkACPPromptOverhead(b *testing.B) {
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), acpserver.Config{Model: turnsScript(b, b.N), AllowAll: true}, agentIn, agentOut)
		agentOut.Close()
	}()
	c := newClient()
	in := &gatedReader{r: clientIn, ready: make(chan struct{})}
	conn := acp.NewClientSideConnection(c, clientOut, in)
	conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	close(in.ready)
	ctx := context.Background()
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		b.Fatal(err)
	}
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: b.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("what runs?")}})
		if err != nil || r.StopReason != acp.StopReasonEndTurn {
			b.Fatal(fmt.Sprint(r.StopReason, err))
		}
	}
	b.StopTimer()
	clientOut.Close()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	<-conn.Done()
}
