//go:build !linux

package proc

import (
	"os"
	"time"
)

// procUsage measures nothing: this system has no /proc.
func procUsage([]int) (time.Duration, int64, bool) { return 0, 0, false }

// taskPids returns the leader alone: without /proc its descendants
// cannot be found.
func (p *Process) taskPids() []int { return []int{p.pid} }

// maxRSS is 0: the units of ru_maxrss differ between the BSDs, and
// Usage measures nothing here to compare it with.
func maxRSS(*os.ProcessState) int64 { return 0 }
