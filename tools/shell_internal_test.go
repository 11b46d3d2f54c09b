package tools

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/offstage/offstage/proc"
)

// TestAShellResultSaysWhereItsLogStopped: the result of a shell whose log
// filled its disk says where logging stopped and how much was not logged
// (issue 19, item 5; proc's TestAFullDiskStopsTheLogWithAMark makes the
// full disk).
func TestAShellResultSaysWhereItsLogStopped(t *testing.T) {
	e := proc.Exit{
		LogErr: &proc.LogError{Path: "out.log", At: 299_008, Err: &os.PathError{Op: "write", Path: "out.log", Err: syscall.EFBIG}},
		LogCut: 4<<20 - 299_008,
	}
	want := "its output log stopped at byte 299008 (file too large), so 3895296 bytes of it were not logged"
	if got := shellResult(nil, e, 1, 100); !strings.Contains(got, want) {
		t.Errorf("result %q lacks %q", got, want)
	}
}
