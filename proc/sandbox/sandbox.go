// Package sandbox says how package proc fences a command
// (proc.Config.Sandbox): the Policy an embedder sets, its Mode, and what
// the Policy holds on this host (Check, Status).
//
// A Policy fences a command and everything it starts, daemons included;
// nothing inside can lift it. ReadOnly reads what the host can and writes
// nothing but the command's own temporary directory ($TMPDIR);
// WorkspaceWrite also writes under Policy.Workspace (default
// proc.Config.Dir) and Policy.Write. Policy.Network off (the default)
// cuts the network, UDP and DNS included. The kernel holds it: Landlock,
// a mount namespace where all but the writable places is read-only, a
// network namespace of its own, no capabilities that undo it, no set-id
// bits, a session of its own. A policy whose mode needs a rule this host
// lacks fails proc.Start, saying what is missing, unless
// Policy.BestEffort: then proc.Process.Sandbox lists what does not hold.
// Check tells a program all this at start-up; off Linux a sandboxed mode
// fails.
//
//	st, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: repo})
//	if err != nil { … }            // this host cannot hold it
//	fmt.Println(st)                // what holds, by what
//	p, err := proc.Start(ctx, proc.Config{Command: "make", Dir: repo,
//		Sandbox: sandbox.Policy{Mode: sandbox.WorkspaceWrite}})
//
// What holds on which kernel, what stays open (a fenced command still
// reads what the user can), and what it costs: package
// proc/internal/sandbox, whose types these names are.
//
// Everything here is safe for concurrent use.
package sandbox

import impl "github.com/offstage/offstage/proc/internal/sandbox"

// Policy fences a command and everything it starts (proc.Config.Sandbox):
// Mode, Workspace (default proc.Config.Dir), Write (more writable
// directories, absolute), Network, BestEffort. The zero value is off. Its
// methods: On, Validate, Narrow (what a narrower policy, a sub-agent's
// profile, makes of it; never wider).
type Policy = impl.Policy

// Mode says what a sandboxed command may write.
type Mode = impl.Mode

const (
	// Off runs the command with the host's full rights. The zero
	// value ("") means the same.
	Off = impl.Off
	// ReadOnly lets the command read what the host can, and write
	// nothing but its own temporary directory ($TMPDIR).
	ReadOnly = impl.ReadOnly
	// WorkspaceWrite also lets it write under Policy.Workspace
	// and the directories of Policy.Write.
	WorkspaceWrite = impl.WorkspaceWrite
)

// ParseMode reads a mode as the flags spell it: off, read-only or
// workspace-write.
func ParseMode(s string) (Mode, error) { return impl.ParseMode(s) }

// Status is what a sandbox enforces for a command, as proc.Start found
// it on this host (proc.Process.Sandbox): Mode, Writable (its temporary
// directory first), Network, Enforced (by what each rule is held),
// NotEnforced (what a best-effort sandbox could not enforce) and Gaps
// (what no mode enforces on this host). Its String says it in one line.
type Status = impl.Status

// Check says what s enforces on this host, and fails as proc.Start
// would where s is strict and a rule its mode needs cannot hold: a
// program checks its flags with it at start-up. Writable does not list
// the per-command temporary directory, which proc.Start makes.
func Check(s Policy) (Status, error) { return impl.Check(s) }

// KeepInheritedToSelf marks every descriptor this process holds past
// stdin, stdout and stderr close-on-exec. A program that starts
// commands calls it first thing in main: a launcher's open file or
// socket (exec 200>>file in the shell that started it, a CI runner's
// pipe) then reaches no command, which could write through it (a sandbox
// checks opens, not writes to what is open) or hold a pipe open that its
// reader waits on. Sandboxed commands of a process that holds such a
// descriptor start through the re-executed step, which closes it for
// them, at the cost of one more exec each.
func KeepInheritedToSelf() { impl.KeepInheritedToSelf() }
