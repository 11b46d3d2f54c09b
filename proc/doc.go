// Package proc runs one shell command as a supervised OS process, as
// os/exec runs one program: in a session and process group of its own
// (no controlling terminal; Config.TTY gives one of its own), signalled with
// everything it started (daemons included), always reaped, its output
// captured in bounded memory, and killed with all it started if the host
// dies. It knows nothing of tasks or models: package tools runs a command
// as a task of a task.Table (tools.SpawnShell).
//
// # Quick start
//
//	p, err := proc.Start(ctx, proc.Config{Command: "make test", Dir: repo})
//	if err != nil { … }
//	defer p.Stop(0)                      // a no-op once it has exited
//	exit, err := p.Wait(ctx)             // reaped, and its output captured
//	chunk := p.Read(proc.Combined, 0, 0) // all the output memory holds
//	fmt.Print(proc.Clean(chunk.Data))    // text safe for a model
//	fmt.Println(exit.Code, exit.Err())
//
// Output can be read while the command runs: Read from a cursor (a byte
// offset) returns the cursor to read on from; WaitOutput waits for output
// past a cursor, so following the output needs no polling (see its
// example); WaitLine and ScanLines wait for lines that match a pattern.
// Input and CloseInput write to a command started with Config.Stdin or
// Config.TTY.
//
// # Your main, and the keeper
//
// On Linux the first Start re-executes your program's own binary
// (/proc/self/exe) as the host's keeper: a small process (about 1 MiB of
// its own), named offstage-keeper, whose one job is to end whatever your
// commands left running when your process dies, SIGKILL included. No
// call is needed: an init function finds the keeper's variable
// (OFFSTAGE_PROC_KEEPER) in the environment and takes over before main
// runs. So main, TestMain and the init functions of the packages that
// import proc never run in the keeper; init functions of packages
// initialized before proc do, and must be free of side effects. A binary
// that cannot exec itself (a noexec mount) gets no keeper: the lifeline
// alone then ends its commands' process groups on its death. A sandboxed
// command may start as the binary re-executed too (the step), under the
// same rule. A program that holds secrets its commands must not read
// calls environ.ProtectHost early in main, and one that starts commands
// calls sandbox.KeepInheritedToSelf first thing.
//
// # Lifecycle
//
// Start starts the command and returns at once; the Process is the
// caller's. There is nothing to close: its goroutines and descriptors are
// released once it has exited and been reaped, which Done's closing says,
// and its output stays readable as long as it is referenced. So every
// command must end: by itself, by Stop, or by the end of the context
// given to Start. Stop and a context's end send SIGTERM to everything the
// command started and SIGKILL after the grace (Config.Grace); Stop
// returns at once, Wait waits.
//
// Start runs Config.Command through Config.Shell (/bin/sh -c), or the
// program and arguments of Config.Args, in a new process group whose id
// is the shell's pid. As soon as the leader exits by itself, whatever it
// left running, in its group or not, is killed. Wait returns once the
// leader is reaped, what it left is gone, and the output captured; pipes
// held by processes out of reach get Config.WaitDelay, then are closed.
//
// A process we stopped reports Exit.Stopped, and Exit.Cause says why:
// ErrStopped after Stop, context.Cause of Start's context when it ended.
// One killed by a signal we did not send reports the signal and not
// Stopped. Exit.Err tells both apart from a clean exit: it returns an
// *ExitError, which unwraps to the cause.
//
// # Concurrency properties
//
// All methods of Process are safe for concurrent use. On Linux, a
// process whose output goes to its pipes only (no terminal, no
// Config.Stdout) is served by one goroutine, which blocks in poll on its
// pipes and on a pidfd of its leader, holding a thread, as os/exec's
// Wait does: it reads the output and reaps the leader. That goroutine is
// the first Wait's, where Wait is the first look at the process (a
// program that starts a command and waits for it, as os/exec's Run,
// wakes no other); any other look (Done, Exit, Read, WaitOutput, Stop,
// Input…) starts one of its own, and so does the package 20 ms after the
// start of a process nobody looked at, whose output waits in its pipe
// meanwhile. A Wait whose context ends returns, and a goroutine goes on
// serving. Past 32 such at once,
// and elsewhere, a process has a reader per pipe in Go's poller and a
// reaper. Once it has run for Config.PromptAfter (up to 100 ms later:
// one timer of the package looks at the processes due, in rounds), a
// process that has an input, or has stopped on a question, gets another
// goroutine watching for prompts; a quiet one without either gets none
// until its next output (unless PromptAfter is negative, never). They
// end by the time Done is closed, the watcher as soon as it sees Done
// closed.
// Signals are sent under the process's lock, so they are ordered before
// the leader is marked exited: a signal never reaches a reused group id.
// Input and CloseInput take turns through a one-slot semaphore, so writes
// are never interleaved, and a caller waiting its turn gives up when its
// own context ends. Reads never block; WaitOutput, WaitLine and ScanLines
// block until output arrives, the process is done, or their context ends.
//
// # Containment
//
// Everything a command starts belongs to it, whatever it does with
// sessions, groups or signal dispositions (setsid, a daemon's double
// fork, nohup): Stop, the end of Start's context and the leader's exit
// end all of it, and Wait returns only once none is left
// (Exit.Contained counts what the leader left behind, and what outlived
// every SIGKILL). Processes counts them while the command runs. On Linux
// a host contains its commands in one of two ways, decided at its first
// Start (Containment says which, and why): "cgroup", a cgroup v2 per
// command wherever one is writable, whose processes cannot leave it; or
// "marks", a mark on every process of a command, the fallback.
// OFFSTAGE_CONTAINMENT=marks forces the fallback, =cgroup makes Start
// fail rather than fall back. A command run by root without a sandbox is
// fenced (cgroup files read-only) between its fork and its exec, so that
// it cannot leave its cgroup. macOS and other Unix systems contain a command by its
// process group alone. How each holds, what escapes it, and the designs
// rejected: package proc/internal/contain.
//
// # Resource limits
//
// Config.Limits, a resource.Limits, caps the memory, the processes and
// the CPU time of a command with everything it starts, enforced by the
// kernel in its cgroup (one killed at its memory limit says so in
// Exit.Err); where this host cannot enforce one, Start fails, and
// resource.Check says so beforehand: a limit is never silently not
// applied. Process.Usage reports what a running command uses. Package
// proc/resource has both.
//
// # When the host dies
//
// The keeper ends every process of the host's commands when the host
// exits for any reason (SIGTERM, up to 300 ms, then SIGKILL until none
// is left) and removes their cgroups; each command's lifeline (a pipe
// whose read end, armed with F_SETOWN and O_ASYNC, sends SIGIO to its
// group when the host's write end closes) kills its group at once,
// before the keeper even wakes.
//
// # Environment and secrets
//
// A command sees the host's environment (or Config.Env) filtered by
// Config.EnvPolicy, an environ.Policy, which by default withholds whatever
// looks like a secret, by its name or the shape of its value. Package
// proc/environ holds the rule, its corrections, and what keeps the host's
// own environment from its commands (environ.ProtectHost,
// environ.HideWithheld).
//
// # Output
//
// Stdout and stderr are one pipe, as on a terminal, so the output is
// stored in the order it was written; with Config.SeparateStreams they
// are two, stored each separately and interleaved as received. Memory
// holds a head (Config.HeadBytes) and a ring of the tail
// (Config.TailBytes) of the combined output, and a ring of each stream
// (Config.StreamBytes): nothing grows with the output. A log file
// (Config.LogPath) keeps the combined output up to Config.LogMaxBytes;
// it stops, saying where and why in its last line, at its cap, on a
// write that fails, or before it would leave its file system less free
// than Config.LogReserveBytes (Process.Log, Exit.LogErr and
// Config.OnLogError tell it). Reads never block: Read returns the output
// since a cursor and the cursor to continue from; bytes the ring no
// longer holds are read back from the log, or counted in Chunk.Skipped,
// never silently dropped. Clean makes raw output safe for a model. With
// Config.Stdout, stdout is also copied to a writer as it is captured.
//
// # Programs that talk back
//
// WaitLine and ScanLines wait for lines that match a pattern, woken by
// the output as it arrives, never by polling; without a log, output
// faster than they can read passes partly unseen, and they count what
// they skipped. A process seems to wait for input when its output has
// stopped for Config.PromptAfter on an unfinished line that looks like
// a question, or, on Linux, for a command with an input, when one
// of its processes sleeps reading that input (/proc/PID/syscall):
// WaitingForInput reports it until output resumes, and Config.OnPrompt
// is told once per stall. With Config.TTY the command runs on a
// pseudo-terminal of its own, its containment unchanged.
//
// # Sandbox
//
// Config.Sandbox, a sandbox.Policy, fences a command and everything it
// starts, daemons included; nothing inside can lift it: read-only, or
// writing its workspace too, with the network or without. A policy this
// host cannot hold fails Start, saying what is missing, unless it is best
// effort: then Process.Sandbox lists what does not hold. Package
// proc/sandbox has the policy and its check at start-up.
package proc
