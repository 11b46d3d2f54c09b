package proc

import "time"

// Usage is what a running command uses, as far as the containment can
// tell (see "Containment" in the package doc).
type Usage struct {
	// Processes counts its live processes, as Processes does.
	Processes int
	// CPU is the user and system time of all its processes so far, those
	// that exited included; in ModeCgroup only (the cgroup's cpu.stat),
	// 0 elsewhere.
	CPU time.Duration
	// Memory is its memory now: the cgroup's memory.current where the
	// memory controller is enabled for it (or memory.usage_in_bytes of its
	// v1 memory cgroup, with a memory limit on a hybrid host), else the
	// sum of its processes' resident sets (ModeCgroup); 0 elsewhere.
	Memory int64
	// MemoryPeak is the cgroup's memory.peak, where the memory controller
	// is enabled for it (or its v1 memory cgroup's max_usage_in_bytes);
	// 0 elsewhere.
	MemoryPeak int64
}

// Usage reports what the command uses while it runs; the zero Usage once
// it is done. In ModeCgroup it reads the task's cgroup (a few small
// files, and each process's statm when the memory controller is off);
// in ModeMarks it costs what Processes costs and reports only the count.
func (p *Process) Usage() Usage {
	select {
	case <-p.done:
		return Usage{}
	default:
	}
	u := Usage{Processes: p.Processes()}
	if p.cg != nil {
		u.CPU, u.Memory, u.MemoryPeak = p.cg.usage()
	}
	return u
}
