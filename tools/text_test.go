package tools_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/tools"
)

func TestFitBudgetCutsTheLongestStringsUntilItFits(t *testing.T) {
	big := map[string]any{
		"a": strings.Repeat("x", 5000),
		"b": []any{strings.Repeat("日本", 3000), "short"},
		"c": map[string]any{"d": strings.Repeat("y", 4000), "n": 7},
	}
	out, text, whole := tools.FitBudget(big, 1000, "")
	if len(text) > 1000 || !whole {
		t.Fatalf("fitted result is %d bytes", len(text))
	}
	var back map[string]any
	if err := json.Unmarshal(text, &back); err != nil {
		t.Fatalf("fitted result is not JSON: %v", err)
	}
	if back["truncated"] == nil || !strings.Contains(string(text), "more bytes)") || !strings.Contains(string(text), `"short"`) {
		t.Errorf("fitted result = %s", text)
	}
	if out == nil {
		t.Error("no data returned")
	}
	// Thousands of tiny fields cannot be cut to fit: an honest error (an
	// error result: it has not the tool's output schema).
	many := map[string]any{}
	for i := range 2000 {
		many[strings.Repeat("k", 8)+string(rune('a'+i%26))+strings.Repeat("z", i%7)+string(rune(i))] = 1
	}
	if _, text, whole := tools.FitBudget(many, 500, "Ask for less."); len(text) > 500 || whole || !strings.Contains(string(text), "too large") {
		t.Errorf("unfittable result = %s", text)
	}
}

// TestHugeSecondsDoNotOverflow (an attacker's trial, F19): 1e300 seconds
// became a negative duration, a wait that did not wait and a timeout
// shown as negative.
func TestHugeSecondsDoNotOverflow(t *testing.T) {
	for _, s := range []float64{1e300, 1e10, math.Inf(1), math.NaN()} {
		if d := tools.Seconds2d(s); d <= 0 || d < 24*time.Hour {
			t.Errorf("Seconds2d(%v) = %v", s, d)
		}
	}
	if d := tools.Seconds2d(1.5); d != 1500*time.Millisecond {
		t.Errorf("Seconds2d(1.5) = %v", d)
	}
}
