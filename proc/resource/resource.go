// Package resource says what a command of package proc may use and what
// it uses: the Limits an embedder sets (proc.Config.Limits) on its
// memory, its processes and its CPU time, with everything it starts,
// and the Usage a running command reports (proc.Process.Usage).
//
// The kernel enforces limits in the command's cgroup: a fork past the
// process limit fails, a command past its memory is reclaimed from, then
// loses a process (proc.Exit.Contained.MemoryKills, and proc.Exit.Err
// says so). Limits need a cgroup v2 per command and the controllers
// (cgroup v2, or v1 on hybrid hosts); where they are missing, proc.Start
// fails, and Check and Controllers say so beforehand: a limit is never
// silently not applied.
//
//	l := resource.Limits{Memory: 2 << 30, Pids: 256}
//	if err := resource.Check(l); err != nil { … } // this host cannot enforce it
//	p, err := proc.Start(ctx, proc.Config{Command: "make -j", Limits: l})
//
// How each limit is enforced, on which host: package
// proc/internal/contain, whose types these names are. Everything here is
// safe for concurrent use.
package resource

import "github.com/offstage/offstage/proc/internal/contain"

// Limits caps the memory, processes and CPU of a command and everything
// it starts, enforced by the kernel in its cgroup. The zero value sets
// none. Its methods: IsZero, Validate, Narrow (what a narrower policy
// makes of it) and String.
type Limits = contain.Limits

// Check says whether this host can enforce l, as proc.Start would find:
// nil, or why not (no cgroup v2, a controller missing).
func Check(l Limits) error { return contain.CheckLimits(l) }

// Controller says where one kind of limit is enforced on this host
// (Name, Where), or why it cannot be (Err).
type Controller = contain.LimitController

// Controllers says, for each kind of limit, where this host enforces it
// or why it cannot: what a program shows at start-up.
func Controllers() []Controller { return contain.LimitControllers() }

// Usage is what a running command uses (proc.Process.Usage): its live
// processes, its CPU time, its memory now and at its peak, as far as the
// containment can tell.
type Usage = contain.Usage

// ParseSize reads a size in bytes: a number with an optional suffix K, M,
// G or T (powers of 1024; "KiB", "MB" and lower case mean the same), such
// as 512M or 2G or 1.5G.
func ParseSize(s string) (int64, error) { return contain.ParseSize(s) }

// FormatSize writes n bytes for a reader: "2 GiB", "64 MiB", "1.5 GiB",
// "900 B".
func FormatSize(n int64) string { return contain.FormatSize(n) }
