package tools_test

import (
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
