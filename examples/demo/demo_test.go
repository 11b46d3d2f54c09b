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

func TestProfilesParse(t *testing.T) {
	list, err := Profiles()
	if err != nil || len(list) != 2 || list[0].Name != "doc-reader" || list[1].Name != "log-reader" {
		t.Fatalf("Profiles() = %+v, %v", list, err)
	}
}
