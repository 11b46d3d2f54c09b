package agent_test

import (
	"context"
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/provider"
)

// BenchmarkTurnOverhead: one turn in which the model (answering at once)
// calls one no-op tool (task_list) and then answers. What it measures is
// the runtime's overhead: history, reflow, tool dispatch, schemas and
// results.
func BenchmarkTurnOverhead(b *testing.B) {
	model := modelFunc(func(req provider.Request) provider.Response {
		last := req.Messages[len(req.Messages)-1]
		if len(last.Content) > 0 && last.Content[0].Type == provider.ToolResult {
			return text("nothing is running")
		}
		return toolCall("task_list", `{}`)
	})
	s, err := agent.New(context.Background(), agent.Config{Model: model})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	for b.Loop() {
		agent.ResetHistory(s)
		if _, err := s.Turn(ctx, "what is running?", agent.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
