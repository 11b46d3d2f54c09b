package sandbox_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/proc/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestParseMode: the modes read back as the flags spell them, and a
// misspelt one is refused.
func TestParseMode(t *testing.T) {
	for _, m := range []sandbox.Mode{sandbox.Off, sandbox.ReadOnly, sandbox.WorkspaceWrite} {
		if got, err := sandbox.ParseMode(string(m)); got != m || err != nil {
			t.Errorf("ParseMode(%q) = %q, %v, want %q", m, got, err, m)
		}
	}
	if _, err := sandbox.ParseMode("readonly"); err == nil {
		t.Error(`ParseMode("readonly") = nil error, want one`)
	}
}
