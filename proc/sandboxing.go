package proc

import "github.com/offstage/offstage/proc/internal/sandbox"

// The sandbox (Landlock, namespaces, capabilities, a seccomp filter, and
// the step that applies them where a thread of the host cannot) lives in
// package proc/internal/sandbox, whose doc says what holds it on which
// kernel; these are the names of it a caller needs.

// Sandbox fences a command and everything it starts (Config.Sandbox; see
// "Sandbox" in the package doc): Mode, Workspace (default Config.Dir),
// Write (more writable directories, absolute), Network, BestEffort. The
// zero value is off. Its methods: On, Validate, Narrow (what a narrower
// policy, a sub-agent's profile, makes of it; never wider).
type Sandbox = sandbox.Policy

// SandboxMode says what a sandboxed command may write.
type SandboxMode = sandbox.Mode

const (
	// SandboxOff runs the command with the host's full rights. The zero
	// value ("") means the same.
	SandboxOff = sandbox.Off
	// SandboxReadOnly lets the command read what the host can, and write
	// nothing but its own temporary directory ($TMPDIR).
	SandboxReadOnly = sandbox.ReadOnly
	// SandboxWorkspaceWrite also lets it write under Sandbox.Workspace
	// and the directories of Sandbox.Write.
	SandboxWorkspaceWrite = sandbox.WorkspaceWrite
)

// ParseSandboxMode reads a mode as the flags spell it: off, read-only or
// workspace-write.
func ParseSandboxMode(s string) (SandboxMode, error) { return sandbox.ParseMode(s) }

// SandboxStatus is what a sandbox enforces for a command, as Start found
// it on this host (Process.Sandbox): Mode, Writable (its temporary
// directory first), Network, Enforced (by what each rule is held),
// NotEnforced (what a best-effort sandbox could not enforce) and Gaps
// (what no mode enforces on this host). Its String says it in one line.
type SandboxStatus = sandbox.Status

// CheckSandbox says what s enforces on this host, and fails as Start
// would where s is strict and a rule its mode needs cannot hold: a
// program checks its flags with it at start-up. Writable does not list
// the per-command temporary directory, which Start makes.
func CheckSandbox(s Sandbox) (SandboxStatus, error) { return sandbox.Check(s) }

// KeepInheritedToSelf marks every descriptor this process holds past
// stdin, stdout and stderr close-on-exec. A program that starts
// commands calls it first thing in main: a launcher's open file or
// socket (exec 200>>file in the shell that started it, a CI runner's
// pipe) then reaches no command, which could write through it (a sandbox
// checks opens, not writes to what is open) or hold a pipe open that its
// reader waits on. Sandboxed commands of a process that holds such a
// descriptor start through the re-executed step, which closes it for
// them, at the cost of one more exec each.
func KeepInheritedToSelf() { sandbox.KeepInheritedToSelf() }
