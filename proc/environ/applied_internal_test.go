package environ

import (
	"strings"
	"testing"
)

// TestApplyKeepsNoHugeEnvironment: the environment Apply remembers is
// bounded (maxAppliedBytes); a larger one is judged, and not kept.
func TestApplyKeepsNoHugeEnvironment(t *testing.T) {
	huge := []string{"PATH=/bin", "BLOB=" + strings.Repeat("x", maxAppliedBytes)}
	if kept, _ := (Policy{}).Apply(huge); len(kept) != 2 {
		t.Fatalf("Apply kept %d of the 2 variables", len(kept))
	}
	verdicts.mu.Lock()
	ok, n := verdicts.last.ok, len(verdicts.last.env)
	verdicts.mu.Unlock()
	if ok || n != 0 {
		t.Errorf("after an environment of %d bytes, the last Apply kept is ok=%v with %d variables; want none", maxAppliedBytes+14, ok, n)
	}
	if kept, _ := (Policy{}).Apply(huge[:1]); len(kept) != 1 {
		t.Fatalf("Apply kept %d of the 1 variable", len(kept))
	}
	verdicts.mu.Lock()
	ok, n = verdicts.last.ok, len(verdicts.last.env)
	verdicts.mu.Unlock()
	if !ok || n != 1 {
		t.Errorf("after a small environment, the last Apply kept is ok=%v with %d variables; want it, with 1", ok, n)
	}
}

// TestApplyAnotherAnswerReusesItsArrays: an Apply that finds another
// policy than the last allocates its answer, not copies of what it keeps.
func TestApplyAnotherAnswerReusesItsArrays(t *testing.T) {
	env := []string{"PATH=/bin", "GITHUB_TOKEN=g", "HOME=/root"}
	a, b := Policy{}, Policy{Keep: []string{"GITHUB_TOKEN"}}
	a.Apply(env)
	b.Apply(env)
	n := testing.AllocsPerRun(100, func() {
		a.Apply(env)
		b.Apply(env)
	})
	// Each Apply: its kept and its withheld (none for b): 3 a pair.
	if n > 3 {
		t.Errorf("two policies in turn: %v allocations a pair of Applies; want at most 3", n)
	}
}
