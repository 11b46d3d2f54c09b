package contain

import "time"

// Usage is what a running command uses, as far as the containment can
// tell (see "Containment" in the package doc).
type Usage struct {
	// Processes counts its live processes, as Processes does.
	Processes int
	// Measured says CPU and Memory were measured: false on systems
	// without /proc (macOS), where they are 0.
	Measured bool
	// CPU is the user and system time of its processes so far. In
	// ModeCgroup it is the cgroup's cpu.stat: every process, those that
	// exited included. In ModeMarks it is the sum over its live
	// processes of their own time and that of the children they reaped
	// (/proc/PID/stat), so a process that exited unreaped by one of them
	// (a daemon's, reparented to init) no longer counts.
	CPU time.Duration
	// Memory is its memory now: the cgroup's memory.current where the
	// memory controller is enabled for it (or memory.usage_in_bytes of its
	// v1 memory cgroup, with a memory limit on a hybrid host), else the
	// sum of its live processes' resident sets.
	Memory int64
	// MemoryPeak is the cgroup's memory.peak where the memory controller
	// is enabled for it (or its v1 memory cgroup's max_usage_in_bytes);
	// elsewhere the highest Memory seen so far (by Usage, which looks only
	// when called: a spike between looks is missed).
	MemoryPeak int64
}

// Usage reports what the task uses while it runs. In ModeCgroup it
// reads the task's cgroup (a few small files, and each process's statm
// when the memory controller is off); in ModeMarks it costs a scan of
// /proc for its processes (as Processes does), and a read of each one's
// stat.
func (t *Task) Usage() Usage {
	var u Usage
	if t.cg != nil {
		u.Processes = t.Processes()
		u.CPU, u.Memory, u.MemoryPeak = t.cg.usage()
		u.Measured = true
	} else {
		pids := t.Pids() // one scan of /proc for the count and the sums
		u.Processes = len(pids)
		u.CPU, u.Memory, u.Measured = procUsage(pids)
	}
	seen := t.notePeak(u.Memory, u.CPU)
	u.MemoryPeak = max(u.MemoryPeak, seen)
	return u
}

// notePeak keeps the highest memory and CPU time seen, for the exit's
// figures, and returns the highest memory.
func (t *Task) notePeak(mem int64, cpu time.Duration) int64 {
	t.usageMu.Lock()
	defer t.usageMu.Unlock()
	t.peakSeen = max(t.peakSeen, mem)
	t.cpuSeen = max(t.cpuSeen, cpu)
	return t.peakSeen
}
