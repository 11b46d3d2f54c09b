package dashboard

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

// The task page shows what an agent task spent, and a list follows its
// tokens as they grow.
func TestAnAgentTasksUsageReachesThePage(t *testing.T) {
	a := journal.Task{Kind: "agent", ID: "agent:1", Usage: task.Usage{InputTokens: 48200, OutputTokens: 1300, CachedInputTokens: 40000, ModelCalls: 7}}
	b, _ := json.Marshal(toJSON(a, true))
	if !strings.Contains(string(b), `"usage":{"input_tokens":48200,"output_tokens":1300,"cached_input_tokens":40000,"model_calls":7}`) {
		t.Errorf("toJSON = %s, want its usage", b)
	}
	grown := a
	grown.Usage.ModelCalls++
	if !differ(a, grown) {
		t.Error("differ() = false for a task whose usage grew")
	}
	if b, _ := json.Marshal(toJSON(journal.Task{Kind: "shell"}, true)); strings.Contains(string(b), "usage") {
		t.Errorf("a shell's JSON has a usage: %s", b)
	}
}

// The task page shows the ports leased for a shell (issue 40 item 3),
// and a list that showed the shell before its ports were recorded gets
// them.
func TestAShellsPortsReachThePage(t *testing.T) {
	a := journal.Task{Kind: "shell", ID: "shell:1"}
	b := a
	b.Ports = []int{20417, 20418}
	if j, _ := json.Marshal(toJSON(b, false)); !strings.Contains(string(j), `"ports":[20417,20418]`) {
		t.Errorf("toJSON = %s, want its ports", j)
	}
	if !differ(a, b) {
		t.Error("differ() = false for a shell whose ports were recorded")
	}
}
