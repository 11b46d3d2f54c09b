package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// blockTask runs until cancelled.
func blockTask(ctx context.Context, _ *task.Handle) (string, error) {
	<-ctx.Done()
	return "", context.Cause(ctx)
}

// TestTaskListAtAThousandTasks (issue 35): with 1,000 running tasks
// task_list stopped working: every call was "too large to show" and it took
// no parameter to ask for less. Now it answers a page that fits, says how
// to get the next one, pages through every task once, and narrows by
// status and kind.
func TestTaskListAtAThousandTasks(t *testing.T) {
	const n = 1000
	e := newEnvWith(t, tools.Config{}, task.Options{MaxRunning: n + 1, MaxTasks: 2 * n})
	for i := range n {
		kind := "shell"
		if i%10 == 0 {
			kind = "agent"
		}
		// Long labels: a page is cut to the budget, never truncated.
		if _, err := e.top.Spawn(task.Spec{Kind: kind, Label: strings.Repeat("make test ", 20)}, blockTask); err != nil {
			t.Fatal(err)
		}
	}
	finished, err := e.top.Spawn(task.Spec{Kind: "shell", Label: "true"}, func(context.Context, *task.Handle) (string, error) { return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, e.top, finished)

	var list tools.ListOutput
	// A kind the tasks have that no row matches is no unknown kind
	// (below: one none has is said so; kinds are open, so not refused).
	ok(t, e, e.top, "task_list", `{"kind": "agent", "status": "completed"}`, &list)
	if list.Count != 0 || !strings.HasPrefix(list.Note, "None of your tasks is selected by this list") {
		t.Errorf("task_list kind agent, completed = %d tasks, note %q", list.Count, list.Note)
	}
	ok(t, e, e.top, "task_list", `{}`, &list)
	if len(list.Tasks) != tools.DefaultListed || list.Count != n+1 || list.Cursor != list.Tasks[len(list.Tasks)-1].ID ||
		!strings.Contains(list.Note, fmt.Sprintf("pass cursor=%q", list.Cursor)) {
		t.Fatalf("task_list {} = %d tasks, count %d, cursor %q, note %q; want %d of %d and a cursor", len(list.Tasks), list.Count, list.Cursor, list.Note, tools.DefaultListed, n+1)
	}
	seen := map[string]bool{}
	pages := 0
	for cursor := ""; ; pages++ {
		ok(t, e, e.top, "task_list", fmt.Sprintf(`{"limit": 100, "cursor": %q}`, cursor), &list)
		for _, row := range list.Tasks {
			if seen[row.ID] {
				t.Fatalf("page %d shows %s again", pages, row.ID)
			}
			seen[row.ID] = true
		}
		if list.Cursor == "" {
			break
		}
		cursor = list.Cursor
	}
	if len(seen) != n+1 || pages < 10 {
		t.Errorf("paging saw %d tasks in %d pages, want %d in at least 10", len(seen), pages+1, n+1)
	}

	ok(t, e, e.top, "task_list", `{"status": "finished"}`, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].ID != finished || list.Cursor != "" || list.Note != "" {
		t.Errorf("task_list finished = %+v", list)
	}
	ok(t, e, e.top, "task_list", `{"status": "unfinished", "kind": "agent", "limit": 100}`, &list)
	// 100 rows of long labels do not fit 16 KiB: the page ends where the
	// budget does, and the cursor goes on from there.
	if list.Count != n/10 || len(list.Tasks) < tools.DefaultListed || len(list.Tasks) == n/10 || list.Cursor == "" || list.Tasks[0].Kind != "agent" {
		t.Errorf("task_list unfinished agents: %d of %d, cursor %q, first %+v; want a page cut to the budget of %d", len(list.Tasks), list.Count, list.Cursor, list.Tasks[0], n/10)
	}
	for kind, note := range map[string]string{
		"robot":   `None of your tasks is of kind "robot"; yours are of kind agent, shell.`,
		"shel":    `None of your tasks is of kind "shel"; yours are of kind agent, shell. Did you mean kind "shell"?`,
		"SHELL":   `None of your tasks is of kind "SHELL"; yours are of kind agent, shell. Did you mean kind "shell"?`,
		"running": `None of your tasks is of kind "running"; yours are of kind agent, shell. "running" is a status: pass status "running".`,
	} {
		ok(t, e, e.top, "task_list", `{"kind": "`+kind+`"}`, &list)
		if list.Count != 0 || list.Note != note {
			t.Errorf("task_list of kind %s = %+v, want the note %s", kind, list, note)
		}
	}
	// A cursor is a position: the number alone, or an id of any kind,
	// gone or not; one past the last task says so. Anything else is
	// refused: it was read as no cursor, from the first (an outsider's
	// finding).
	var first tools.ListOutput
	ok(t, e, e.top, "task_list", `{"limit": 2}`, &first)
	_, num, _ := strings.Cut(first.Tasks[0].ID, ":")
	for _, cursor := range []string{first.Tasks[0].ID, num, " " + num + " ", "robot:" + num} {
		ok(t, e, e.top, "task_list", fmt.Sprintf(`{"limit": 1, "cursor": %q}`, cursor), &list)
		if len(list.Tasks) != 1 || list.Tasks[0].ID != first.Tasks[1].ID {
			t.Errorf("task_list after cursor %q = %+v, want %s first", cursor, list.Tasks, first.Tasks[1].ID)
		}
	}
	ok(t, e, e.top, "task_list", `{"cursor": "shell:999999"}`, &list)
	if list.Count != 0 || !strings.Contains(list.Note, `comes after cursor "shell:999999"`) {
		t.Errorf("task_list after the last task = %+v", list)
	}
	for args, want := range map[string]string{
		`{"status": "sleeping"}`: "status \"sleeping\" is not one task_list knows",
		`{"limit": -1}`:          "limit must not be negative",
		`{"cursor": "garbage"}`:  `cursor "garbage" is not one task_list gives`,
		`{"cursor": "shell:0"}`:  `cursor "shell:0" is not one task_list gives`,
	} {
		// A bad status is refused by the schema's enum, or by the tool.
		if got := e.refused(t, e.top, "task_list", args); !strings.Contains(got, want) && !strings.Contains(got, "status") {
			t.Errorf("task_list %s = %q, want %q", args, got, want)
		}
	}
	e.tb.CancelAll()
}

// TestTooLargeNamesTheToolsParameters (issue 35): a result too large to
// show told the model to ask for "fewer ids, a filter, fewer lines" of a
// tool (task_list) that took none of them. It names the parameters the
// tool has.
func TestTooLargeNamesTheToolsParameters(t *testing.T) {
	type in struct {
		Limit int    `json:"limit,omitempty"`
		Kind  string `json:"kind,omitempty"`
	}
	many := func(context.Context, *task.View, in) (map[string]int, error) {
		out := map[string]int{}
		for i := range 5000 {
			out[fmt.Sprint(i)] = i
		}
		return out, nil
	}
	tl := tools.Define("many", "returns many tiny fields", 1000, many)
	res, err := tl.Call(t.Context(), nil, nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text, "Ask for less with its parameters (kind, limit).") {
		t.Errorf("Call() = %+v, %v; want an error naming kind and limit", res, err)
	}
}

// TestShellReportsOutputWhenItArrives (issue 35, item 3): a shell looked
// for new output on a ticker (every Heartbeat), whether it printed or not:
// a thousand sleeping shells woke a thousand times a second. It now waits
// for output, and reports its first at once: with a heartbeat of an hour
// the report still comes (a ticker would send none for an hour).
func TestShellReportsOutputWhenItArrives(t *testing.T) {
	tb, v := table(t)
	seq := tb.Events().Last()
	id, p := startShell(t, v, proc.Config{Command: "echo hello; exec sleep 100"}, tools.ShellOptions{Heartbeat: time.Hour})
	defer p.Stop(0)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		evs, err := tb.Events().Wait(ctx, seq)
		if err != nil {
			t.Fatalf("no output event for %s: %v", id, err)
		}
		for _, e := range evs {
			if e.Type == task.EventOutput && e.ID == id {
				return
			}
			seq = e.Seq
		}
	}
}

// TestSetsShareTheirSchemas (issue 35, item 2): every Set rebuilt each
// tool's JSON schemas by reflection, identical in every session: 81% of
// an idle MCP session's memory. Sets built anywhere, at once, share one
// schema per tool, its JSON, and the enums set on it.
func TestSetsShareTheirSchemas(t *testing.T) {
	sets := make(chan *tools.Set, 8)
	for range cap(sets) {
		go func() { sets <- tools.New(tools.Config{NoPush: true}) }()
	}
	first := <-sets
	for range cap(sets) - 1 {
		s := <-sets
		for i, tl := range s.Tools() {
			want := first.Tools()[i]
			a, _ := tl.InputJSON()
			b, _ := want.InputJSON()
			if tl.InputSchema != want.InputSchema || tl.OutputSchema != want.OutputSchema || &a[0] != &b[0] {
				t.Errorf("%s: a second Set has schemas of its own", tl.Name)
			}
		}
	}
	wait := first.Tool("task_wait")
	if got := wait.InputSchema.Properties["mode"].Enum; len(got) != 2 {
		t.Errorf("task_wait's mode enum = %v", got)
	}
	raw, _ := wait.InputJSON()
	if !strings.Contains(string(raw), `"enum":["any","all"]`) {
		t.Errorf("task_wait's schema JSON = %s, want its enum", raw)
	}
}

// TestDefineSharedSharesSchemas (issue 35, item 6): a tool made per
// session (agent's spawn_agent) with Define cloned its schemas and
// marshalled them again, ~100 KB and ~150 µs of each new session.
// DefineShared's tools share one schema, its JSON, and each enum set on
// it; Define's keep their own.
func TestDefineSharedSharesSchemas(t *testing.T) {
	type in struct {
		Mode string `json:"mode"`
	}
	run := func(context.Context, *task.View, in) (any, error) { return nil, nil }
	a := tools.DefineShared("a", "d", 0, run).Enum("mode", "x", "y")
	b := tools.DefineShared("b", "d", 0, run).Enum("mode", "x", "y")
	ja, _ := a.InputJSON()
	jb, _ := b.InputJSON()
	if a.InputSchema != b.InputSchema || &ja[0] != &jb[0] {
		t.Error("two DefineShared tools with the same enum have schemas of their own")
	}
	if !strings.Contains(string(ja), `"enum":["x","y"]`) {
		t.Errorf("schema JSON = %s, want its enum", ja)
	}
	c := tools.DefineShared("c", "d", 0, run).Enum("mode", "z")
	if jc, _ := c.InputJSON(); c.InputSchema == a.InputSchema || !strings.Contains(string(jc), `"enum":["z"]`) {
		t.Errorf("another enum's schema JSON = %s", jc)
	}
	if plain := tools.DefineShared("p", "d", 0, run); plain.InputSchema.Properties["mode"].Enum != nil {
		t.Errorf("Enum changed the shared schema: %v", plain.InputSchema.Properties["mode"].Enum)
	}
	own := tools.Define("o", "d", 0, run)
	if own.InputSchema == tools.DefineShared("p", "d", 0, run).InputSchema {
		t.Error("Define's tool shares its schema")
	}
}

// TestEmptyArgumentsCheckedOnce (issue 35, item 6): a call with no
// arguments (task_list's, most of the time) was parsed, validated
// against the schema and marshalled again on every call, a third of a
// direct turn's tool call. Whether {} passes is known after the first;
// a tool that requires a parameter still refuses it, every time.
func TestEmptyArgumentsCheckedOnce(t *testing.T) {
	set := tools.New(tools.Config{})
	list, cancel := set.Tool("task_list"), set.Tool("task_cancel")
	for _, args := range []string{"{}", " {} ", "", "null"} {
		if r, ok := list.Check(json.RawMessage(args)); !ok {
			t.Errorf("task_list.Check(%q) = %s, want accepted", args, r.Text)
		}
		for range 2 {
			if r, ok := cancel.Check(json.RawMessage(args)); ok || !strings.Contains(r.Text, "task_id") {
				t.Errorf("task_cancel.Check(%q) = %s, %v; want refused, naming task_id", args, r.Text, ok)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { list.Check(json.RawMessage("{}")) }); n > 2 {
		t.Errorf("task_list.Check({}) allocates %v times, want at most 2 (the arguments, the input)", n)
	}
}
