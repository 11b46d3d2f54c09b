package proc

import "github.com/offstage/offstage/proc/internal/contain"

// The kernel side of containment (cgroups, marks, the keeper, the
// lifeline) lives in package proc/internal/contain, whose doc says how
// each guarantee is kept; these are the names of it a caller needs.

// Contained is what the containment saw as a command ended (Exit.Contained):
// Leftovers, the processes the leader left behind, all killed before
// Wait returned; Survivors (and SurvivorsErr), those that outlived every
// SIGKILL, zero unless something is badly wrong; MemoryKills, the
// processes the kernel killed at resource.Limits.Memory (MemoryLimit).
type Contained = contain.Ended

// ContainmentInfo says how this host contains its commands: Mode
// ("cgroup", a cgroup v2 per command, or "marks", a mark on every process
// of a command, on Linux; "group" elsewhere), Dir (its
// cgroups), Reason, Root (what a root command could do to it) and Err
// (the containment asked for cannot be had: Start fails with it). Its
// String is the line a program shows at start-up.
type ContainmentInfo = contain.Info

// Containment says how this host contains its commands, deciding it if no
// Start has yet (on Linux that makes this host's cgroup directory and
// starts its keeper, as a Start would). Set OFFSTAGE_CONTAINMENT=marks to
// force the fallback, or =cgroup to make Start fail rather than fall
// back. Safe for concurrent use.
func Containment() ContainmentInfo { return contain.HostInfo() }
