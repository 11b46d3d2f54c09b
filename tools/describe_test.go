package tools_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/tools"
)

func TestToolSetIsComplete(t *testing.T) {
	var names []string
	for _, tool := range tools.New(tools.Config{}).Tools() {
		names = append(names, tool.Name)
	}
	want := []string{"bash", "task_list", "task_inspect", "task_output", "task_wait", "task_cancel", "task_input"}
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

// Every description names every input field, in backquotes, and each
// field's schema carries a description.
func TestDescriptionsNameEveryField(t *testing.T) {
	for _, tool := range tools.New(tools.Config{}).Tools() {
		if tool.InputSchema.Type != "object" {
			t.Errorf("%s: input schema type %q, want object", tool.Name, tool.InputSchema.Type)
		}
		for name, prop := range tool.InputSchema.Properties {
			if !strings.Contains(tool.Description, "`"+name+"`") {
				t.Errorf("%s: the description does not name its input field `%s`", tool.Name, name)
			}
			if prop.Description == "" {
				t.Errorf("%s: field %s has no schema description", tool.Name, name)
			}
		}
	}
}

// What the descriptions promise (defaults, caps, what a wait consumes)
// matches the constants the code uses.
func TestDescriptionsKeepTheirPromises(t *testing.T) {
	set := tools.New(tools.Config{})
	for tool, promises := range map[string][]string{
		"bash": {
			fmt.Sprintf("(default %d)", tools.DefaultYieldSeconds),
			fmt.Sprintf("last %d bytes", tools.OutputBytes),
			fmt.Sprintf("SIGKILL %d seconds later", int(procGrace.Seconds())),
			"keeps running in the background", "Do not run it again",
			"Never poll", "sleep",
			fmt.Sprintf("at most %d lines per notice", tools.DefaultWatchLines),
			fmt.Sprintf("one notice per %d seconds", int(tools.DefaultWatchEvery.Seconds())),
			fmt.Sprintf("%d notices per command", tools.DefaultWatchNotices),
			fmt.Sprintf("at most %d characters", tools.MaxNotifyOnChars),
			fmt.Sprintf("stops for %d seconds", int(procPromptAfter.Seconds())),
			"`waiting_for_input`",
		},
		"task_list": {fmt.Sprintf("at most %d tasks", tools.MaxListed), "task_wait once", "`waiting_for_input`"},
		"task_inspect": {
			fmt.Sprintf("(default %d, at most %d)", tools.DefaultRecent, tools.MaxRecent),
			"will not be sent to you again",
		},
		"task_output": {
			fmt.Sprintf("At most %d bytes", tools.OutputBytes),
			fmt.Sprintf("last %d MiB", procTailBytes>>20),
			fmt.Sprintf("log's cap (%d MiB)", procLogMaxBytes>>20),
			"`skipped_bytes`", "`next_cursor`", "`more`",
		},
		"task_wait": {
			fmt.Sprintf("at most %d", tools.MaxWaitIDs),
			fmt.Sprintf("default %d, at most %d", tools.DefaultWaitSeconds, tools.MaxWaitSeconds),
			fmt.Sprintf("capped at %d", tools.MaxWaitSeconds),
			"will not be sent to you again", "not an error",
			"instead of polling", "sleep",
			"seems to wait for input", "`notices`",
		},
		"task_cancel": {fmt.Sprintf("SIGKILL %d seconds later", int(procGrace.Seconds())), "already finished"},
		"task_input":  {"`interactive: true`"},
	} {
		desc := set.Tool(tool).Description
		for _, p := range promises {
			if !strings.Contains(desc, p) {
				t.Errorf("%s: the description does not say %q:\n%s", tool, p, desc)
			}
		}
	}
}

// proc.Config's defaults, documented at its fields (proc's
// TestDocumentedDefaults holds them), which the descriptions repeat.
const (
	procGrace       = 3 * time.Second
	procPromptAfter = 4 * time.Second
	procHeadBytes   = 64 << 10
	procTailBytes   = 1 << 20
	procLogMaxBytes = 64 << 20
)
