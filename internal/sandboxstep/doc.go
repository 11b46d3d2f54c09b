// Package sandboxstep is the step that fences a sandboxed command before
// it runs (see "Sandbox" in package proc's doc): on Linux, the binary
// re-executed with Env set applies Spec (loopback up, Landlock) and execs
// the command. It is a package of its own, with few dependencies, so
// that its init function, which takes over before main, runs early in
// the binary's initialization: in a large binary (offstage), the
// packages initialized before proc cost more than the step itself.
package sandboxstep

// Env, in a process's environment, makes it the step. Only package proc
// sets it, in the step's environment, and the step removes it before the
// exec. The value is a Spec in JSON, or Probe.
const Env = "OFFSTAGE_PROC_SANDBOX"

// Probe, as Env's value, makes the step bring lo up and exit: package
// proc starts it once in a new network namespace to see that one can be
// made.
const Probe = "probe"

// Spec is what the step enforces, decided by package proc.
type Spec struct {
	Write    []string `json:"w"`             // writable directories
	Loopback bool     `json:"lo,omitempty"`  // in a network namespace of its own: bring lo up
	NetTCP   bool     `json:"tcp,omitempty"` // network off by Landlock's TCP (and, ABI 10+, UDP) rules
	Abstract bool     `json:"ab,omitempty"`  // scope abstract unix sockets
}
