// Package proc runs one shell command as a supervised OS process: in its
// own process group, signalled as a group, always reaped, its output
// captured in bounded memory, and killed with its whole group if the host
// dies. SpawnShell runs one as a task (shell:N) of a task.Table.
//
//	p, err := proc.Start(ctx, proc.Config{Command: "make test", Dir: repo})
//	if err != nil { … }
//	chunk := p.Read(proc.Combined, 0, 64<<10) // output so far, from cursor 0
//	fmt.Print(proc.Clean(chunk.Data))       // safe for a model
//	next := chunk.Next                      // read on from here later
//	exit, _ := p.Wait(ctx)
//	fmt.Println(exit.Code, exit.Err())
//
// # Lifecycle
//
// Start runs Config.Command through Config.Shell (/bin/sh -c) in a new
// process group whose id is the shell's pid, and returns at once. Provider
// API keys (DefaultSecrets) and Config.Secrets are removed from the child's
// environment unless Config.KeepSecrets is set.
//
// Stop, or the end of Start's context, sends SIGTERM to the whole group and
// SIGKILL to the group after the grace period if the leader still runs. As
// soon as the leader exits, for whatever reason, whatever is left of its
// group is killed with SIGKILL. On Linux the exit is observed without
// reaping (waitid with WNOWAIT), so the group is killed while the leader's
// zombie still holds the group id: a signal can never reach a group whose
// id was reused. Elsewhere the leader is reaped first and the group killed
// microseconds later.
//
// Wait returns once the leader is reaped and the output captured. It cannot
// hang on pipes held by processes that left the group (setsid): they get
// Config.WaitDelay after the leader's exit, then our ends are closed.
//
// A process we stopped reports Exit.Stopped; one killed by a signal we did
// not send reports the signal and not Stopped; Exit.Err tells the two
// apart from a clean exit. As a task, the first is canceled (or timed_out,
// by the task's timeout), the second failed.
//
// # Host death
//
// If the host process dies, even by SIGKILL, the kernel sends SIGIO to
// every process of every group it started, which terminates them (see the
// comment on the lifeline in lifeline.go for how and for the alternatives
// rejected). Measured on Linux: groups gone within a few milliseconds.
// Not covered: processes that ignore or handle SIGIO, that left the group,
// or a group in which every process closed descriptor 10. Parent-death
// signals are not used: on Linux they reach only the direct child and fire
// when the thread that forked it exits, which in Go is not when the host
// dies.
//
// # Output
//
// Stdout and stderr are read from two pipes by two goroutines and stored
// interleaved in the order they were received (writes to the two streams
// microseconds apart may be stored swapped: two pipes carry no common
// clock), and each stream separately. Memory holds a head (Config.HeadBytes,
// 64 KiB) and a ring of the tail (Config.TailBytes, 1 MiB) of the combined
// output, and a ring of each stream (Config.StreamBytes, 256 KiB); nothing
// grows with the output. An optional log file (Config.LogPath) keeps the
// combined output up to Config.LogMaxBytes (64 MiB), then stops and ends
// with a line saying how much it left out.
//
// Reads never block. Read returns the output since a cursor (a byte offset
// from the first byte) and the cursor to continue from; bytes the ring no
// longer holds are counted in Chunk.Skipped, never silently dropped.
// TailLines returns the last lines. Raw bytes are returned as written;
// Clean strips ANSI escapes, applies carriage returns and makes invalid
// UTF-8 safe for a model, and FilterLines keeps lines matching a regular
// expression.
//
// # Concurrency properties
//
// All methods of Process are safe for concurrent use. Each process has
// three goroutines (two readers and a reaper), which all end by the time
// Done is closed; Start's context is watched with context.AfterFunc, which
// is released then too. Signals are sent under the process's lock so they
// are ordered before the leader is marked exited. Input serialises writers
// and can be abandoned through its context.
package proc
