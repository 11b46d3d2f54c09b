package tools_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// FuzzToolCall feeds arbitrary arguments to every tool: no panic, no hang,
// no Go error, and always a JSON object within the budget. Commands are
// given to /bin/echo instead of a shell, so nothing a fuzzer writes runs.
// The table holds a finished shell (shell:1) and another owner's task
// (shell:3, under agent:2), so ids resolve every way.
func FuzzToolCall(f *testing.F) {
	for tool, args := range map[uint8]string{
		0: `{"command": "ls", "yield_after_seconds": 0.5, "timeout_seconds": 1e308, "cwd": "/"}`,
		1: `{}`,
		2: `{"task_id": "shell:1", "recent": 99}`,
		3: `{"task_id": 1, "since": 0, "filter": "[a-z]+", "tail_lines": 3}`,
		4: `{"task_ids": ["shell:1", " 3 ", "agent:2"], "mode": "all", "timeout_seconds": 0.05}`,
		5: `{"task_id": "shell:3"}`,
		6: `{"task_id": "1", "text": "hi\n", "close_stdin": true}`,
	} {
		f.Add(tool, []byte(args))
	}
	f.Add(uint8(0), []byte(`{"command": "x", "run_in_background": true, "notify_on": "(a+)+$", "tty": true}`))
	f.Add(uint8(4), []byte(`{"task_ids": ["shell:1"], "until": "[", "timeout_seconds": 0.05}`))
	f.Add(uint8(0), []byte(`{"command": "x", "port": 1e30}`))
	f.Add(uint8(4), []byte(`{"task_ids": ["shell:1"], "timeout_seconds": -1e999}`))
	f.Add(uint8(3), []byte(`{"task_id": 1, "since": -9223372036854775808, "tail_lines": 1e19}`))
	f.Add(uint8(1), []byte(`{"limit": 9223372036854775807, "cursor": 1e400}`))
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		tb := task.New(context.Background(), task.Options{})
		defer tb.Close(context.Background())
		set := tools.New(tools.Config{Process: proc.Config{Shell: []string{"/bin/echo"}}, ResultBudget: 4096})
		top := tb.View("")
		if _, _, err := tools.SpawnShell(top, proc.Config{Command: "finished", Shell: []string{"/bin/echo"}}, tools.ShellOptions{}); err != nil {
			t.Fatal(err)
		}
		child := make(chan struct{})
		tb.View("").Spawn(task.Spec{Kind: "agent"}, func(ctx context.Context, h *task.Handle) (string, error) {
			tools.SpawnShell(h.View(), proc.Config{Command: "sleep 100"}, tools.ShellOptions{})
			close(child)
			<-ctx.Done()
			return "", nil
		})
		<-child
		done, _ := top.Done("shell:1")
		<-done

		tool := set.Tools()[int(which)%len(set.Tools())]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := tool.Call(ctx, top, json.RawMessage(args))
		if err != nil {
			t.Fatalf("%s(%q) Go error: %v", tool.Name, args, err)
		}
		var obj map[string]any
		if json.Unmarshal([]byte(res.Text), &obj) != nil {
			t.Fatalf("%s(%q) = %q: not a JSON object", tool.Name, args, res.Text)
		}
		if len(res.Text) > 4096 {
			t.Fatalf("%s(%q) result is %d bytes, over its budget", tool.Name, args, len(res.Text))
		}
		// An error result is exactly {"error": "a sentence"}: decoded as
		// such, not looked up in a map (where a missing field passed).
		if res.IsError {
			var e tools.ErrorOutput
			dec := json.NewDecoder(strings.NewReader(res.Text))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil || strings.TrimSpace(e.Error) == "" {
				t.Fatalf("%s(%q) error result %s, want {\"error\": a sentence} (%v)", tool.Name, args, res.Text, err)
			}
			if goTalk.MatchString(e.Error) {
				t.Fatalf("%s(%q) error %q names Go types; a model reads JSON's", tool.Name, args, e.Error)
			}
		}
	})
}

// goTalk matches what encoding/json's errors say in Go's terms.
var goTalk = regexp.MustCompile(`Go (struct field|value)|of type (u?int|float|string|bool|\[\]|map|\*)|[a-z]+Input\.|reflect\.`)
