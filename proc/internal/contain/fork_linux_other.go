//go:build linux && !amd64

package contain

import (
	"os"
	"os/exec"
)

// forkFenced: every fenced start goes to the fenced thread here, where
// fork_linux_amd64.s has no vfork of this architecture's.
func forkFenced(cmd *exec.Cmd, mntns *os.File, ruleset int) (ok bool, err error) {
	return false, nil
}

// OwnFork does nothing here: there is no fork of our own, which has
// forked no start.
func OwnFork(on bool) int64 { return 0 }
