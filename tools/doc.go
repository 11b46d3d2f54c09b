// Package tools gives a model the tools to run and steer background work:
// bash, task_list, task_inspect, task_output, task_wait, task_cancel and
// task_input. The agent runtime and the MCP server serve these same tools;
// this package depends on neither.
//
// A Tool has a name, a description (an embedded .md file beside its .go,
// whose promises a test checks against the code), the JSON Schema of its
// input (generated from a Go struct) and a Call. A description says what
// is true on its face: where results come back to the model by themselves
// (the CLI, ACP, sub-agents) and where they do not (MCP: Config.NoPush),
// rendered by Describe:
//
//	set := tools.New(tools.Config{Process: proc.Config{Dir: workdir}})
//	view := table.View("") // the caller: the top level, or an agent task
//	res, err := set.Tool("bash").Call(ctx, view, json.RawMessage(`{"command": "make test", "run_in_background": true}`))
//	// res.Text: {"task_id":"shell:1","status":"running","output_bytes":0,"note":"Started in the background as shell:1. …"}
//
// # Scoping
//
// Every call acts through the caller's task.View, so a tool can only see,
// read, wait on, write to and cancel tasks its caller started. An id of
// another owner's task is refused with an error result that says so, and
// the refused call has no side effect.
//
// # Results and errors
//
// Results are compact JSON objects with stable field names (see the
// *Output types), described by each tool's OutputSchema. Every free-text
// field is capped and says when it was cut ("…(+N more bytes)", "…(N
// earlier bytes)"), and a whole result never exceeds Config.ResultBudget
// (16 KiB): one that cannot be cut to fit is an error result. A mistake the model can fix (bad
// JSON, a wrong type, a missing field, an unknown or foreign id, a shell
// that is not interactive) is a Result with IsError set and one sentence
// saying how to fix the call; a Go error means the runtime itself failed.
//
// # Exactly once
//
// A finished task's result reaches the conversation once. task_wait, a
// foreground bash command and task_inspect of a finished task take the
// result (task.View.Wait), so the runtime's reflow will not repeat it; a
// result reflowed earlier is reported as delivered before, without its
// text.
//
// # Shell tasks
//
// SpawnShell runs a proc.Config as a task (shell:N) of a view's owner and
// returns its id and its *proc.Process at once; the bash tool is built on
// it, and an embedder may call it directly. The task owns the process:
// cancelling the task, its owner's end, its timeout and the table's Close
// stop it, and a stop sent through the process (Process.Stop) ends the
// task canceled as well. Shell(v, id) gets a shell task's process later,
// from a view or the table. While it runs, a shell posts notices to its
// owner when it seems to wait for input (NoticeWaitingForInput) and, with
// ShellOptions.NotifyOn, when its output matches (NoticeWatch).
//
// # Concurrency properties
//
// A Set and its tools are safe for concurrent use by many callers, of one
// task table or of many. The set keeps one piece of state: where each
// caller (an owner in one table) last stopped reading each task's output,
// and what it was last shown (bounded; the oldest are forgotten). It is
// kept per table, so one Set may serve many conversations; it holds no
// table alive.
package tools
