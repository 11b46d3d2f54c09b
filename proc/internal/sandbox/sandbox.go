package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
)

// Mode says what a sandboxed command may write (see "Sandbox" in
// the package doc).
type Mode string

const (
	// Off runs the command with the host's full rights. The zero
	// value ("") means the same.
	Off Mode = "off"
	// ReadOnly lets the command read what the host can, and write
	// nothing but its own temporary directory ($TMPDIR).
	ReadOnly Mode = "read-only"
	// WorkspaceWrite also lets it write under Policy.Workspace
	// and the directories of Policy.Write.
	WorkspaceWrite Mode = "workspace-write"
)

// ParseMode reads a mode as the flags spell it: off, read-only or
// workspace-write.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.TrimSpace(s)); m {
	case Off, ReadOnly, WorkspaceWrite:
		return m, nil
	case "":
		return Off, nil
	}
	return "", fmt.Errorf("%q is not a sandbox mode: give off, read-only or workspace-write", s)
}

// Sandbox fences a command and everything it starts (see "Sandbox" in
// the package doc). The zero value is off.
type Policy struct {
	Mode Mode
	// Workspace is the directory workspace-write may write under.
	// Default: Config.Dir, else the host's working directory.
	Workspace string
	// Write lists more directories workspace-write may write under
	// (caches a toolchain needs). Each must be an absolute path that
	// exists.
	Write []string
	// Network lets a sandboxed command use the network. Off, it has a
	// network namespace of its own with loopback alone (or, where none
	// can be made, Landlock's TCP rules: see Start's errors).
	Network bool
	// BestEffort starts a sandboxed command even where a rule its mode
	// needs cannot be enforced; Process.Sandbox then says what was not.
	// Without it, Start fails and says what is missing.
	BestEffort bool
}

// On says whether s sandboxes anything.
func (s Policy) On() bool { return s.Mode != "" && s.Mode != Off }

// Validate says what is wrong with s, if anything.
func (s Policy) Validate() error {
	if _, err := ParseMode(string(s.Mode)); err != nil {
		return fmt.Errorf("proc: %w", err)
	}
	for _, d := range append([]string{s.Workspace}, s.Write...) {
		if d != "" && !filepath.IsAbs(d) {
			return fmt.Errorf("proc: sandbox directory %q is not an absolute path", d)
		}
	}
	if s.Mode == ReadOnly && len(s.Write) > 0 {
		return errors.New("proc: the read-only sandbox writes nowhere but its temporary directory; use workspace-write for the directories of Policy.Write")
	}
	return nil
}

// strictness ranks the modes: a narrower policy may only go up.
func (m Mode) strictness() int {
	switch m {
	case WorkspaceWrite:
		return 1
	case ReadOnly:
		return 2
	}
	return 0
}

// Narrow returns what a narrower policy t (a sub-agent's profile) makes
// of s: the stricter mode, only those writable directories of t that s
// lets write too, the network only if both allow it, and best effort
// only where s allows it. It never widens s.
func (s Policy) Narrow(t Policy) Policy {
	if !s.On() {
		return t
	}
	if !t.On() {
		return s
	}
	out := s
	if t.Mode.strictness() > s.Mode.strictness() {
		out.Mode = t.Mode
	}
	out.Network = s.Network && t.Network
	if out.Mode == ReadOnly {
		out.Write = nil
	} else if t.Write != nil {
		out.Write = nil
		for _, d := range t.Write {
			if slices.ContainsFunc(s.Write, func(p string) bool { return within(d, p) }) {
				out.Write = append(out.Write, d)
			}
		}
	}
	return out
}

// within says whether path is dir or under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Status is what a sandbox enforces for a command, as Start found
// it on this host: the model is told it, and a best-effort sandbox
// lists what did not hold.
type Status struct {
	Mode Mode
	// Writable lists where the command may write: its temporary directory
	// first, then the workspace and Policy.Write. Empty when off.
	Writable []string
	Network  bool
	// Enforced says by what each rule is held ("file system: Landlock ABI 7").
	Enforced []string
	// NotEnforced says what a best-effort sandbox could not enforce, and
	// Gaps what no mode enforces on this host (signals without Landlock
	// ABI 6): both are told to the model.
	NotEnforced []string
	Gaps        []string
}

// String says it in one line: "workspace-write; writes: /tmp/x, /src;
// network off (own network namespace, loopback only)".
func (s Status) String() string {
	if s.Mode == "" || s.Mode == Off {
		return "off"
	}
	var b strings.Builder
	b.WriteString(string(s.Mode))
	b.WriteString("; writes only under: ")
	b.WriteString(strings.Join(s.Writable, ", "))
	if s.Network {
		b.WriteString("; network on")
	} else {
		b.WriteString("; network off")
	}
	if len(s.Enforced) > 0 {
		b.WriteString("; enforced by: " + strings.Join(s.Enforced, ", "))
	}
	if len(s.NotEnforced) > 0 {
		b.WriteString("; NOT enforced (best effort): " + strings.Join(s.NotEnforced, "; "))
	}
	if len(s.Gaps) > 0 {
		b.WriteString("; not covered: " + strings.Join(s.Gaps, "; "))
	}
	return b.String()
}

// Status says what fences the command: its mode, where it may write,
// whether it has the network, and, for a best-effort sandbox, what did
// not hold. Mode is off for a nil Setup (no sandbox).
func (sb *Setup) Status() Status {
	if sb == nil {
		return Status{Mode: Off}
	}
	return sb.status
}

// forceStep makes every sandboxed start go through the step (tests).
var forceStep atomic.Bool

// ForceStep, while on, makes every sandboxed start go through the
// re-executed step, as it does where this process cannot fence a thread
// of its own for it. A test knob.
func ForceStep(on bool) { forceStep.Store(on) }

// noForker makes a host that is not root start its sandboxed commands
// through the step, not the forker (tests).
var noForker atomic.Bool

// UseForker turns the forker on (the default) or off, for a host that is
// not root: off, each sandboxed command starts through the step. A test
// knob.
func UseForker(on bool) { noForker.Store(!on) }
