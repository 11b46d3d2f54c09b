package contain

import (
	"crypto/rand"
	"encoding/binary"
	"strconv"
	"sync/atomic"
)

// A mark is how a process is recognised as belonging to one Process, with
// everything it started (see "Containment" in the package doc). It is the
// soft RLIMIT_RTTIME limit of every process of the task, and the value of
// markEnv in their environment. Its top bits are markMagic, then the
// host's id (one per host process), then the Process's sequence number.
type mark uint64

const (
	markMagic    = 0x5eed // a value no one sets by accident
	markHostBits = 24
	markSeqBits  = 24
	// MarkEnv carries the mark in the environment, the second net for
	// processes that reset their RLIMIT_RTTIME.
	MarkEnv = "OFFSTAGE_MARK"
)

// host returns the mark's host part: markMagic and the host id.
func (m mark) host() uint64 { return uint64(m) >> markSeqBits }

// hostOnly says whether m is a host mark (sequence 0): the mark the host
// process itself carries, so that whatever a leader forks before its own
// mark is set inherits one that says "a task of this host: look at my
// environment for which".
func (m mark) hostOnly() bool { return uint64(m)&(1<<markSeqBits-1) == 0 }

func (m mark) env() string { return MarkEnv + "=" + strconv.FormatUint(uint64(m), 10) }

// hostID is this host process's id in marks. It is package state because
// it names the OS process, not any value of ours: every Process started by
// this host carries it, and the host's keeper kills what carries it.
var hostID = func() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) & (1<<markHostBits - 1)
}()

// nextSeq numbers the marks of this host. Wrapping after 16 million
// processes is harmless: a mark only has to tell apart the processes that
// are alive at once.
var nextSeq atomic.Uint64

func newMark() mark {
	seq := nextSeq.Add(1) & (1<<markSeqBits - 1)
	if seq == 0 {
		seq = nextSeq.Add(1) & (1<<markSeqBits - 1) // 0 is the host's own
	}
	return hostMark() | mark(seq)
}

func hostMark() mark {
	return mark(uint64(markMagic)<<(markHostBits+markSeqBits) | hostID<<markSeqBits)
}

// The containments a host can use (see "Containment" in the package doc).
const (
	// ModeCgroup: each command in a cgroup v2 of its own (Linux, where
	// one is writable).
	ModeCgroup = "cgroup"
	// ModeMarks: each command's processes marked by RLIMIT_RTTIME and
	// OFFSTAGE_MARK (Linux without a writable cgroup v2, or forced).
	ModeMarks = "marks"
	// ModeGroup: the process group and the lifeline only (macOS and other
	// Unix systems).
	ModeGroup = "group"
)

// Info says how this host contains its commands.
type Info struct {
	Mode string // ModeCgroup, ModeMarks or ModeGroup
	// Dir is the directory of this host's cgroups, in ModeCgroup.
	Dir string
	// Reason says why this mode: where the cgroup was found, or why none
	// could be used.
	Reason string
	// Root says, for a host running as root, what a command run by
	// root without a sandbox can do to its containment (see "Commands run
	// by root" in the package doc).
	Root string
	// Err is set when the containment asked for (OFFSTAGE_CONTAINMENT)
	// cannot be had: Start fails with it.
	Err error
}

// String is the line a program shows at start-up: "containment: cgroup
// (…)".
func (c Info) String() string {
	s := "containment: " + c.Mode
	if c.Dir != "" {
		s += " in " + c.Dir
	}
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	if c.Root != "" {
		s += "; " + c.Root
	}
	if c.Err != nil {
		s += "; error: " + c.Err.Error()
	}
	return s
}

// HostInfo says how this host contains its commands, deciding it if no
// Start has yet (on Linux that makes this host's cgroup directory and
// starts its keeper, as a Start would). Set
// OFFSTAGE_CONTAINMENT=marks to force the fallback, or =cgroup to make
// Start fail rather than fall back. Safe for concurrent use.
func HostInfo() Info {
	ensureKeeper() // the keeper removes the host's directory when it is gone
	info, _ := containment()
	info.Root = rootNote(info)
	return info
}

// errSurvivors: processes of a task that outlived every SIGKILL, most
// likely stuck in the kernel (uninterruptible sleep on a dead mount).
type errSurvivors struct{ n int }

func (e errSurvivors) Error() string {
	return strconv.Itoa(e.n) + " processes survived SIGKILL"
}
