package proc

import (
	"os"
	"time"
)

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

// Usage reports what the command uses while it runs; the zero Usage once
// it is done. In ModeCgroup it reads the task's cgroup (a few small
// files, and each process's statm when the memory controller is off);
// in ModeMarks it costs a scan of /proc for its processes (as Processes
// does), and a read of each one's stat.
func (p *Process) Usage() Usage {
	select {
	case <-p.done:
		return Usage{}
	default:
	}
	var u Usage
	if p.cg != nil {
		u.Processes = p.Processes()
		u.CPU, u.Memory, u.MemoryPeak = p.cg.usage()
		u.Measured = true
	} else {
		pids := p.taskPids() // one scan of /proc for the count and the sums
		u.Processes = len(pids)
		u.CPU, u.Memory, u.Measured = procUsage(pids)
	}
	seen := p.notePeak(u.Memory, u.CPU)
	u.MemoryPeak = max(u.MemoryPeak, seen)
	return u
}

// notePeak keeps the highest memory and CPU time seen, for the exit's
// figures, and returns the highest memory.
func (p *Process) notePeak(mem int64, cpu time.Duration) int64 {
	p.usageMu.Lock()
	defer p.usageMu.Unlock()
	p.peakSeen = max(p.peakSeen, mem)
	p.cpuSeen = max(p.cpuSeen, cpu)
	return p.peakSeen
}

// finalUsage is the CPU time and peak memory of a command that ended, for
// its Exit: the cgroup's figures, read before it is removed, or the
// leader's resource usage (its own and that of the descendants reaped
// within the task), whichever is higher than what Usage saw while it ran.
func (p *Process) finalUsage(ps *os.ProcessState) (cpu time.Duration, peak int64) {
	if p.cg != nil {
		cpu, peak = p.cg.finalUsage()
	}
	if ps != nil {
		cpu = max(cpu, ps.UserTime()+ps.SystemTime())
		peak = max(peak, maxRSS(ps))
	}
	p.usageMu.Lock()
	defer p.usageMu.Unlock()
	return max(cpu, p.cpuSeen), max(peak, p.peakSeen)
}
