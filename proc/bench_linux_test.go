package proc_test

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/offstage/offstage/proc"
)

// What BenchmarkSpawnPaired's ratio is made of, as root: two of the
// protections a start has that os/exec's does not, each priced by a pair
// that differs in it alone (x-…-cpu, the CPU ratio; its excess over 1,
// times os/exec's start, is what the protection costs a start).

// BenchmarkSpawnFencePaired: ours without the root fence (a test knob)
// against ours with it: the child's setns into the fence's mount
// namespace, its bounding set dropped, its Landlock domain and its
// seccomp filter (no clone3), between its clone and its exec.
func BenchmarkSpawnFencePaired(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the root fence fences root's commands")
	}
	ctx := context.Background()
	paired(b, "unfenced", "fenced", func() {
		proc.RootFence(false)
		defer proc.RootFence(true)
		runTrue(b, ctx, proc.Config{Command: "true"})
	}, func() { runTrue(b, ctx, proc.Config{Command: "true"}) })
}

// BenchmarkSpawnSessionPaired: os/exec's sh -c true against the same in
// a session of its own (setsid), as every command of ours is (no
// controlling terminal; an orphaned group, which job control cannot
// stop; a scheduler autogroup of its own, which the kernel makes and
// ends with it where autogroups are on).
func BenchmarkSpawnSessionPaired(b *testing.B) {
	paired(b, "raw", "session", func() {
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}, func() {
		cmd := exec.Command("/bin/sh", "-c", "true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	})
}
