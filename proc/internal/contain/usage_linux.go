package contain

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procUsage sums the CPU time (user and system, with that of the children
// each reaped) and resident memory of pids, from /proc/PID/stat.
func procUsage(pids []int) (cpu time.Duration, mem int64, ok bool) {
	page := int64(os.Getpagesize())
	var ticks int64
	for _, pid := range pids {
		b := readSmall("/proc/" + strconv.Itoa(pid) + "/stat")
		// pid (comm) state ppid …: comm may hold spaces and parentheses,
		// so the fields count from the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		// f[0] is field 3 (state): utime, stime, cutime, cstime are
		// fields 14-17, rss field 24.
		if len(f) < 22 {
			continue
		}
		for _, j := range []int{11, 12, 13, 14} {
			n, _ := strconv.ParseInt(string(f[j]), 10, 64)
			ticks += n
		}
		rss, _ := strconv.ParseInt(string(f[21]), 10, 64)
		mem += rss * page
	}
	return time.Duration(ticks) * time.Second / clockTicks, mem, true
}

// maxRSS is the largest resident set of the reaped leader and of the
// descendants reaped within it, in bytes (Linux counts it in KiB), or 0
// when that cannot be told from a figure that is not the command's. At
// exec Linux carries the resident peak of the memory the exec replaces
// into the new program's ru_maxrss; a command is forked sharing this
// process's memory (vfork), so its ru_maxrss is at least this process's
// peak when it started: a `sleep 3` showed 56 MB. A figure above this
// process's own peak now is the command's; one at or below it may be
// this process's, and is left out (unknown) rather than reported.
func maxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	var self syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || ru.Maxrss <= self.Maxrss {
		return 0
	}
	return ru.Maxrss << 10
}

// Pids returns the pids of the task's live processes: the cgroup's list,
// or a scan of /proc for the mark; the leader's pid alone when neither
// finds any.
func (t *Task) Pids() []int {
	var pids []int
	if t.cg != nil {
		pids = t.cg.pids()
	} else {
		newScanner().scan(exact(t.mark), false, func(pid int) { pids = append(pids, pid) })
	}
	if !slices.Contains(pids, t.pid) {
		pids = append(pids, t.pid)
	}
	return pids
}
