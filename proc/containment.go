package proc

import "github.com/offstage/offstage/proc/internal/contain"

// The kernel side of containment (cgroups, marks, the keeper, the
// lifeline) lives in package proc/internal/contain, whose doc says how
// each guarantee is kept; these are the names of it a caller needs.

// Limits caps the memory, processes and CPU of a command and everything
// it starts, enforced by the kernel in its cgroup (see "Resource limits"
// in the package doc). The zero value sets none. Its methods: IsZero,
// Validate, Narrow (what a narrower policy makes of it) and String.
type Limits = contain.Limits

// CheckLimits says whether this host can enforce l, as Start would find:
// nil, or why not (no cgroup v2, a controller missing).
func CheckLimits(l Limits) error { return contain.CheckLimits(l) }

// LimitController says where one kind of limit is enforced on this host
// (Name, Where), or why it cannot be (Err).
type LimitController = contain.LimitController

// LimitControllers says, for each kind of limit, where this host
// enforces it or why it cannot: what a program shows at start-up.
func LimitControllers() []LimitController { return contain.LimitControllers() }

// ParseSize reads a size in bytes: a number with an optional suffix K, M,
// G or T (powers of 1024; "KiB", "MB" and lower case mean the same), such
// as 512M or 2G or 1.5G.
func ParseSize(s string) (int64, error) { return contain.ParseSize(s) }

// FormatSize writes n bytes for a reader: "2 GiB", "64 MiB", "1.5 GiB",
// "900 B".
func FormatSize(n int64) string { return contain.FormatSize(n) }

// Usage is what a running command uses (Process.Usage): its live
// processes, its CPU time, its memory now and at its peak, as far as the
// containment can tell.
type Usage = contain.Usage

// Contained is what the containment saw as a command ended (Exit.Contained):
// Leftovers, the processes the leader left behind, all killed before
// Wait returned; Survivors (and SurvivorsErr), those that outlived every
// SIGKILL, zero unless something is badly wrong; MemoryKills, the
// processes the kernel killed at Limits.Memory (MemoryLimit).
type Contained = contain.Ended

// ContainmentInfo says how this host contains its commands: Mode
// (ModeCgroup or ModeMarks on Linux, "group" elsewhere), Dir (its
// cgroups), Reason, Root (what a root command could do to it) and Err
// (the containment asked for cannot be had: Start fails with it). Its
// String is the line a program shows at start-up.
type ContainmentInfo = contain.Info

// The containments a host can use on Linux (ContainmentInfo.Mode).
const (
	ModeCgroup = contain.ModeCgroup // a cgroup v2 per command
	ModeMarks  = contain.ModeMarks  // a mark on every process of a command
)

// Containment says how this host contains its commands, deciding it if no
// Start has yet (on Linux that makes this host's cgroup directory and
// starts its keeper, as a Start would). Set OFFSTAGE_CONTAINMENT=marks to
// force the fallback, or =cgroup to make Start fail rather than fall
// back. Safe for concurrent use.
func Containment() ContainmentInfo { return contain.HostInfo() }
