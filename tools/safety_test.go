package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/tools"
)

// TestConsequentialIsExecuteOrDestructive: the classes a surface asks its
// user about are exactly those that run or end something.
func TestConsequentialIsExecuteOrDestructive(t *testing.T) {
	for s, want := range map[tools.Safety]bool{
		tools.ReadOnly:    false,
		tools.Mutating:    false,
		tools.Destructive: true,
		tools.Execute:     true,
	} {
		if got := s.Consequential(); got != want {
			t.Errorf("%v.Consequential() = %v, want %v", s, got, want)
		}
	}
}

// TestUnknownToolFailsClearly: Set.Tool of a name it does not know is nil,
// and calling that nil tool is an error, not a nil-pointer panic.
func TestUnknownToolFailsClearly(t *testing.T) {
	e := newEnv(t, tools.Config{})
	nope := e.set.Tool("nope")
	if nope != nil {
		t.Fatalf("Tool(nope) = %v, want nil", nope.Name)
	}
	if _, err := nope.Call(t.Context(), e.top, json.RawMessage(`{}`)); !errors.Is(err, tools.ErrNoTool) {
		t.Errorf("Call on Tool(nope) = %v, want ErrNoTool", err)
	}
	res, ok := nope.Check(json.RawMessage(`{}`))
	if ok || !res.IsError || !strings.Contains(res.Text, "no such tool") {
		t.Errorf("Check on Tool(nope) = %+v, %v; want an error result", res, ok)
	}
}

// TestANilViewFailsClearly: a call with no caller's view is an error, not
// a nil-pointer panic (an outsider looked a view up in a map, and missed).
func TestANilViewFailsClearly(t *testing.T) {
	e := newEnv(t, tools.Config{})
	for _, name := range []string{"task_list", "bash"} {
		if _, err := e.set.Tool(name).Call(t.Context(), nil, json.RawMessage(`{"command":"echo hi"}`)); !errors.Is(err, tools.ErrNoView) {
			t.Errorf("%s with a nil view = %v, want ErrNoView", name, err)
		}
	}
}

// TestACancelledCallStartsNoCommand: a bash call whose context has ended
// (its turn was cancelled) starts nothing, in the foreground or the
// background, and says so. Before, the command started, and could run
// to its end while the result said it was stopped (an outsider's
// finding: 2 runs in 20).
func TestACancelledCallStartsNoCommand(t *testing.T) {
	e := newEnv(t, tools.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i, bg := range []bool{false, true} {
		mark := filepath.Join(t.TempDir(), "ran")
		args, _ := json.Marshal(map[string]any{"command": "touch " + mark, "run_in_background": bg})
		res, err := e.set.Tool("bash").Call(ctx, e.top, args)
		if err != nil || !res.IsError || !strings.Contains(res.Text, "before the command started: it did not run") {
			t.Errorf("call %d (background %v) = %+v, %v; want an error result saying it did not run", i, bg, res, err)
		}
		if _, err := os.Stat(mark); err == nil {
			t.Errorf("call %d (background %v): the command ran", i, bg)
		}
	}
	if list := e.top.List(); len(list) != 0 {
		t.Errorf("the cancelled calls left tasks: %+v", list)
	}
}

// TestACancelAsACommandEndsIsToldTruly: a turn cancelled just as its
// foreground command starts: where the command ran to its end (its
// file written, exit 0), the result never says it was stopped. An
// outsider found 39 of 200 such results saying so.
func TestACancelAsACommandEndsIsToldTruly(t *testing.T) {
	e := newEnv(t, tools.Config{})
	ran := 0
	for i := range 100 {
		mark := filepath.Join(t.TempDir(), "ran")
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Duration(i%4)*time.Millisecond, cancel)
		args, _ := json.Marshal(map[string]any{"command": "echo done > " + mark})
		res, err := e.set.Tool("bash").Call(ctx, e.top, args)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var out tools.BashOutput
		json.Unmarshal([]byte(res.Text), &out)
		if b, _ := os.ReadFile(mark); string(b) == "done\n" && out.ExitCode != nil && *out.ExitCode == 0 {
			ran++
			if strings.Contains(out.Note, "was stopped") {
				t.Errorf("call %d ran to its end (exit 0, its file written), and its result says: %s", i, res.Text)
			}
		}
	}
	t.Logf("%d of 100 commands ran to their end", ran)
}
