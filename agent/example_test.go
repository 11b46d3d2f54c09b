package agent_test

import (
	"context"
	"fmt"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/provider/scripted"
)

func Example() {
	// A scripted model: it runs one command, then answers.
	model, err := scripted.Parse([]byte(`{"turns": [
		{"text": "Let me check.", "tool_calls": [{"name": "bash", "input": {"command": "echo 42"}}]},
		{"expect": "42", "text": "The answer is 42."}
	]}`))
	if err != nil {
		panic(err)
	}
	s, err := agent.New(context.Background(), agent.Config{Model: model, System: "You are helpful."})
	if err != nil {
		panic(err)
	}
	defer s.Close(context.Background())

	answer, err := s.Turn(context.Background(), "What is the answer?", agent.SinkFunc(func(e agent.Event) {
		if e.Type == agent.ToolCallEvent {
			fmt.Printf("calls %s %s\n", e.Tool, e.Input)
		}
	}))
	fmt.Println(answer, err)
	// Output:
	// calls bash {"command": "echo 42"}
	// The answer is 42. <nil>
}
