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
// matches the constants the code uses, on both faces.
func TestDescriptionsKeepTheirPromises(t *testing.T) {
	for _, noPush := range []bool{false, true} {
		set := tools.New(tools.Config{NoPush: noPush})
		for tool, promises := range promises(noPush) {
			desc := set.Tool(tool).Description
			for _, p := range promises {
				if !strings.Contains(desc, p) {
					t.Errorf("NoPush %v: %s: the description does not say %q:\n%s", noPush, tool, p, desc)
				}
			}
		}
	}
}

// promises returns what each description must say, on the face where
// results come back by themselves (noPush false) or over MCP.
func promises(noPush bool) map[string][]string {
	sent := "will not be sent to you again"
	if noPush {
		sent = "will not be returned again"
	}
	return map[string][]string{
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
		"task_list": {fmt.Sprintf("at most %d tasks", tools.MaxListed), fmt.Sprintf("default %d", tools.DefaultListed), "task_wait once", "`waiting_for_input`", "`cursor`", "task_inspect's"},
		"task_inspect": {
			fmt.Sprintf("(default %d, at most %d)", tools.DefaultRecent, tools.MaxRecent),
			sent,
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
			sent, "not an error",
			"instead of polling", "sleep",
			"seems to wait for input", "`notices`",
			fmt.Sprintf("looks every %d ms", tools.PortPoll.Milliseconds()), "`listening`",
		},
		"task_cancel": {fmt.Sprintf("SIGKILL %d seconds later", int(procGrace.Seconds())), "already finished"},
		"task_input":  {"`interactive: true`"},
	}
}

// pushPromises are phrases that say a result or notice reaches the model
// by itself: true where results are pushed (the CLI, ACP, sub-agents),
// false over MCP, where nothing reaches the model unless it asks.
var pushPromises = []string{"by itself when", "come to you", "comes to you", "come back to you", "comes back to you", "sent to you", "you get a notice", "{{", "}}"}

// TestDescriptionsSayWhatIsTrueOnEachFace (issue 23, item 13): over MCP
// (NoPush) the descriptions promised that results come back by
// themselves; they now say to get them with task_wait. Where results are
// pushed, the descriptions still say so.
func TestDescriptionsSayWhatIsTrueOnEachFace(t *testing.T) {
	for _, tool := range tools.New(tools.Config{NoPush: true}).Tools() {
		for _, p := range pushPromises {
			if strings.Contains(tool.Description, p) {
				t.Errorf("NoPush: %s: the description says %q:\n%s", tool.Name, p, tool.Description)
			}
		}
	}
	for name, want := range map[string]string{
		"bash":        "Nothing comes back by itself: read its output with task_output, and get its result with task_wait",
		"task_wait":   "nothing comes back by itself, so this is how you get a background task's result",
		"task_cancel": "task_wait returns it",
	} {
		if desc := tools.New(tools.Config{NoPush: true}).Tool(name).Description; !strings.Contains(desc, want) {
			t.Errorf("NoPush: %s: the description does not say %q:\n%s", name, want, desc)
		}
	}
	push := tools.New(tools.Config{})
	if desc := push.Tool("bash").Description; !strings.Contains(desc, "Its result comes back to you by itself when it finishes") || strings.Contains(desc, "{{") {
		t.Errorf("push: bash description lost its promise, or shows the template:\n%s", desc)
	}
}

// TestNotesSayWhatIsTrueOnEachFace (issue 23, item 13): the notes of a
// background start, an until match and a cancel promised a result by
// itself over MCP too.
func TestNotesSayWhatIsTrueOnEachFace(t *testing.T) {
	for _, noPush := range []bool{false, true} {
		e := newEnv(t, tools.Config{NoPush: noPush})
		var started, watched, until tools.BashOutput
		ok(t, e, e.top, "bash", `{"command": "sleep 100", "run_in_background": true}`, &started)
		ok(t, e, e.top, "bash", `{"command": "sleep 100", "run_in_background": true, "notify_on": "x"}`, &watched)
		ok(t, e, e.top, "bash", `{"command": "echo ready; sleep 100", "run_in_background": true, "until": "ready", "wait_seconds": 20}`, &until)
		var cancel tools.CancelOutput
		ok(t, e, e.top, "task_cancel", `{"task_id": "`+started.TaskID+`"}`, &cancel)
		for what, note := range map[string]string{"background": started.Note, "notify_on": watched.Note, "until": until.Note, "cancel": cancel.Note} {
			promised := false
			for _, p := range pushPromises {
				promised = promised || strings.Contains(note, p)
			}
			if promised == noPush || noPush && !strings.Contains(note, "task_wait") {
				t.Errorf("NoPush %v: the %s note = %q", noPush, what, note)
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

// Issue 37 item 14: over MCP the seven tools' descriptions were about
// 13 KB before any work (bash alone 5,786 characters), a good part of a
// small model's context. TestDescriptionsKeepTheirPromises checks that
// the facts stay.
func TestDescriptionsFitASmallContext(t *testing.T) {
	for _, noPush := range []bool{false, true} {
		total := 0
		for _, tool := range tools.New(tools.Config{NoPush: noPush}).Tools() {
			total += len(tool.Description)
		}
		if total > 8<<10 {
			t.Errorf("NoPush %v: the descriptions are %d bytes in all, want at most 8 KiB", noPush, total)
		}
	}
}

// TestArgumentErrorsSpeakJSON (outsider finding): an argument of the
// wrong type or out of range is named, with the JSON type it takes, never
// with encoding/json's Go words ("cannot unmarshal number 1e+30 into Go
// struct field bashInput.port of type int"); an unknown one is named with
// the tool's parameters.
func TestArgumentErrorsSpeakJSON(t *testing.T) {
	e := newEnv(t, tools.Config{})
	for _, tc := range []struct{ tool, args, want string }{
		// An integer past what Go's int holds is told what the tool takes,
		// not that range (which reads as what it takes), and as it was sent.
		{"bash", `{"command": "true", "port": 1e30}`, "port is out of range: the number 1e30 (port: lease this many free TCP ports (1 to 8)"},
		{"task_list", `{"limit": 1e20}`, "limit is out of range: the number 1e20 (limit: at most this many tasks; default 50, at most 100.)"},
		{"task_output", `{"task_id": "shell:1", "since": -9223372036854775809}`, "since is out of range: the number -9223372036854775809 (since: read from this cursor"},
		// A fraction is not a range's matter.
		{"task_list", `{"limit": 1.5e0}`, "limit must be an integer (a JSON number without a fraction), not the number 1.5"},
		{"bash", `{"command": "true", "port": "2"}`, `port must be an integer (a JSON number without a fraction), not the string \"2\": send it without quotes`},
		{"bash", `{"command": "true", "port": 1.5}`, "port must be an integer (a JSON number without a fraction), not the number 1.5"},
		{"bash", `{"command": 5}`, "command must be a JSON string, not a number"},
		{"bash", `{"command": "true", "tty": "true"}`, `tty must be true or false, not the string \"true\"`},
		{"bash", `{"command": "true", "comand": "x"}`, `bash has no parameter \"comand\" (did you mean command?); its parameters are command, cwd,`},
		{"task_wait", `{"task_ids": "shell:1"}`, `task_ids must be a JSON array, not a string: send a list, such as [\"shell:1\"]`},
		{"task_wait", `{"task_ids": ["1"], "timeout_seconds": 1e999}`, "timeout_seconds must be a JSON number of ordinary size (within ±1.7e308), not the number 1e999"},
		// A task id sent as a number past JSON's range is no id, and a
		// null in a list of ids no string: each said so (they were told
		// "must be a JSON number", and "<invalid reflect.Value> has type
		// null" from the schema library).
		{"task_wait", `{"task_ids": [1e999]}`, "task_ids holds the number 1e999, which is no task id (out of range); an id is a kind, a colon and a number from 1"},
		{"task_inspect", `{"task_id": 1e400}`, "task_id holds the number 1e400, which is no task id (out of range)"},
		{"task_wait", `{"task_ids": [null]}`, `task_ids[0] must be a JSON string, not null; send a list of them, such as [\"shell:1\", \"agent:2\"]`},
		{"task_wait", `{"task_ids": ["shell:1", true]}`, `task_ids[1] must be a JSON string, not a boolean`},
		// JSON takes the last of a repeated key; an approval screen may
		// show the first (an outsider's trial).
		{"bash", `{"command": "echo x", "command": "echo dup"}`, `The argument \"command\" is given more than once`},
	} {
		res := e.call(t, e.top, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(res.Text, tc.want) || goTalk.MatchString(res.Text) {
			t.Errorf("%s(%s) = %s, want an error saying %s", tc.tool, tc.args, res.Text, tc.want)
		}
	}
	// The ends of int64 are integers it holds (an outsider's finding: the
	// arguments passed through float64, which read 2⁶³-1 back as 2⁶³).
	for _, args := range []string{`{"limit": 9223372036854775807}`} {
		if res := e.call(t, e.top, "task_list", args); res.IsError {
			t.Errorf("task_list(%s) = %s, want a list", args, res.Text)
		}
	}
	res := e.call(t, e.top, "task_output", `{"task_id": "shell:1", "since": -9223372036854775808}`)
	if !strings.Contains(res.Text, "There is no task") {
		t.Errorf("task_output with since -2⁶³ = %s, want its id looked up (since is an int64)", res.Text)
	}
}

func TestWholeNumber(t *testing.T) {
	for n, want := range map[string]bool{
		"1": true, "-7": true, "1e20": true, "1E+20": true, "1.50e2": true, "1.5e1": true, "2.000": true,
		"1e-0": true, "0e-5": true, "10e-1": true, "-0.0": true, "1.5": false, "1e-3": false, "1.25e1": false, "1e999999999": true,
		"1.5e-999999999999999999999": false, "100e-3": false, "1e99999999999999999999": true,
	} {
		if got := tools.WholeNumber(n); got != want {
			t.Errorf("wholeNumber(%q) = %v, want %v", n, got, want)
		}
	}
}

// TestInspectSaysWhatMemoryCounts (issue 37 item 15): where a cgroup
// measures a shell's memory it counts page cache (a sleep after a build
// showed 42 MiB); task_inspect's description says so, so a model does not
// take it for what the processes hold.
func TestInspectSaysWhatMemoryCounts(t *testing.T) {
	for _, noPush := range []bool{false, true} {
		if d := tools.New(tools.Config{NoPush: noPush}).Tool("task_inspect").Description; !strings.Contains(d, "page cache") {
			t.Errorf("NoPush %v: task_inspect's description does not say memory counts page cache:\n%s", noPush, d)
		}
	}
}
