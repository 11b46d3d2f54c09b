// Package step fences a sandboxed command (see package sandbox, and
// "Sandbox" in package proc's doc). Fence applies the rules of a Spec (capabilities,
// a session keyring, a seccomp filter against set-id bits, then
// Landlock, over the raw system calls) to the calling OS thread alone; NewNetwork moves it into a network namespace with loopback up,
// and ReadOnlyMounts into mount and IPC namespaces where all but the
// writable places is read-only and /dev/pts is the command's own:
// package sandbox calls them on a thread of its own that forks the command
// and dies. Where that cannot be, the step does it: the binary
// re-executed with Env set brings loopback up in the namespace it was
// cloned into, fences its thread and execs the command from it; started
// once per host as the forker (Forker), it fences a thread of its own
// per command, as package sandbox does for root, and forks the command
// from it (forker_linux.go). It is a
// package of its own, with few dependencies, so that its init function,
// which takes over before main, runs early in the binary's
// initialization.
//
// Landlock is driven directly rather than through go-landlock, whose
// API restricts every thread of the process (signalling each one below
// ABI 8, through psx, which with cgo also wraps every thread the binary
// creates): a fence here is one thread's.
package step

// Env, in a process's environment, makes it the step. Only package proc
// sets it, in the step's environment, and the step removes it before the
// exec. The value is a Spec in JSON, or Probe.
const Env = "OFFSTAGE_PROC_SANDBOX"

// IDsEnv, in the step's environment, holds "UID GID": the step was
// cloned into a user namespace of its own and maps them first (mapSelf).
const IDsEnv = "OFFSTAGE_PROC_SANDBOX_IDS"

// Probe, as Env's value, makes the step bring lo up and exit: package
// proc starts it once in a new network namespace to see that one can be
// made.
const Probe = "probe"

// Spec is what the step enforces, decided by package proc.
type Spec struct {
	Write []string `json:"w"` // writable directories
	// WriteFDs holds, for each of Write, that directory open (O_PATH) in
	// the process that fences: pinned when offstage first saw it, so that
	// a command cannot re-point a writable place's path for the next one.
	WriteFDs []int `json:"wfd,omitempty"`
	Loopback bool  `json:"lo,omitempty"`  // in a network namespace of its own: bring lo up
	NetTCP   bool  `json:"tcp,omitempty"` // network off by Landlock's TCP (and, ABI 10+, UDP) rules
	Abstract bool  `json:"ab,omitempty"`  // scope abstract unix sockets
	// Terminal is the command's own pseudo-terminal (/dev/pts/N), the
	// only one it may open: not the user's others, nor other users'.
	Terminal string `json:"tty,omitempty"`
	// ABI is the Landlock ABI package proc planned for: the kernel's, or
	// a lower one (its tests pretend an older kernel). 0: the kernel's.
	ABI int `json:"abi,omitempty"`
	// Mounts makes every mount read-only but the writable places (see
	// ReadOnlyMounts), in a mount namespace of the command's own.
	Mounts bool `json:"mnt,omitempty"`
}

// ProbeMounts, as Env's value, makes the step make read-only mounts and
// exit: package proc starts it once, in a user namespace of its own
// where it is not root, to see that they can be made.
const ProbeMounts = "probe-mounts"
