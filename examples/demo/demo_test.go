package demo

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/provider/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScriptParses(t *testing.T) {
	if _, err := scripted.Parse(Script); err != nil {
		t.Fatal(err)
	}
}
