//go:build linux

package contain

import (
	"os"
	"runtime"
	"syscall"
	"testing"
)

// TestHelperThreadsAreNoDescendants: a pid made after a leader that is a
// live thread of a helper (the sandbox's forker makes one after each
// command's fork) does not make the leader's end look for leftovers
// through every process; any other pid, or a helper's thread once it is
// no helper, does.
func TestHelperThreadsAreNoDescendants(t *testing.T) {
	tids, stop := make(chan int), make(chan struct{})
	defer close(stop)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- syscall.Gettid()
		<-stop
	}()
	tid := <-tids
	if helpersOnly(tid-1, tid) {
		t.Errorf("thread %d counted as a helper's before Helper", tid)
	}
	remove := Helper(os.Getpid())
	if !helpersOnly(tid-1, tid) {
		t.Errorf("thread %d of helper %d counted as a possible descendant", tid, os.Getpid())
	}
	if helpersOnly(0, 1) {
		t.Error("init counted as a thread of the helper")
	}
	remove()
	if helpersOnly(tid-1, tid) {
		t.Errorf("thread %d counted as a helper's after its removal", tid)
	}
}
