package tools_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
