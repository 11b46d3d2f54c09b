package proctest_test

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/proc/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMarked(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	kv := "PROCTEST_MARK=" + t.Name()
	cmd := exec.Command("sleep", "100")
	cmd.Env = append(os.Environ(), kv)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if got := proctest.Marked(kv); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("Marked() = %v, want [%d]", got, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := proctest.Marked(kv); got != nil {
		t.Errorf("Marked() after the process was reaped = %v", got)
	}
	if proctest.Alive(cmd.Process.Pid) {
		t.Errorf("Alive(%d) after it was reaped", cmd.Process.Pid)
	}
}
