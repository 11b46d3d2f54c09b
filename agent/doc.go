// Package agent is offstage's reference agent runtime: a Session holds a
// conversation with a provider.Model, the model's tools (package tools plus
// spawn_agent) and a task table, and puts background work to use.
//
//	s, _ := agent.New(ctx, agent.Config{Model: model, System: "You are a coding agent."})
//	defer s.Close(context.Background())
//	answer, err := s.Turn(ctx, "Run the tests in the background and tell me about the README.", agent.Discard)
//
// # Opening a session for a surface
//
// New is the runtime alone. Open is how every surface starts a session:
// the CLI, the MCP server, the ACP agent and an embedder's own. It reads
// the project's AGENTS.md, records the session into a Journal (package
// journal's Recorder: SQLite, or PostgreSQL for a fleet) and, with
// Surface.Resume, continues a recorded one: its history, the results it
// never saw (told once, however often it is resumed) and the tasks a
// crash orphaned.
//
//	store, _ := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
//	rec, _ := journal.NewRecorder(ctx, store, journal.RecorderOptions{LogDir: filepath.Join(dir, "logs")})
//	defer rec.Close(context.Background())
//	s, _ := agent.Open(ctx, cfg, agent.Surface{Name: "mine", Journal: rec})              // new
//	s, _ := agent.Open(ctx, cfg, agent.Surface{Name: "mine", Journal: rec, ID: id, Resume: true}) // after a restart
//	defer s.Close(context.Background())
//
// # Lifecycle
//
// Session.Close does the whole shutdown, once: the turn in progress is
// cancelled, Run returns, every task is cancelled and every process
// reaped (each shell's stop grace, then SIGKILL; at most 20 seconds in
// all), and the record ends. Close the session before its Journal. The
// session's tasks descend from the ctx given to New or Open: cancelling it
// cancels them, but only Close waits for them.
//
// # Turns
//
// A turn appends the user's message, calls the model, runs the tool calls
// it asks for concurrently, appends their results, and repeats until the
// model stops calling tools or Config.MaxIterations. Before every model
// request the top level's (or sub-agent's) finished background results
// are drained from the table and added to the history as clearly framed
// background results ("[offstage] A background task finished…" and a
// <background-result> element with id, label, status and result), never
// as the user's words. Each result reaches the history exactly once:
// tools that show a result (task_wait, a foreground bash or spawn_agent,
// task_inspect) take it, and the drain takes the rest. Notices that
// running tasks post (task.Handle.Notify: a shell that seems to wait for
// input, lines a watch looked for) are drained the same way, first, framed
// as notices ("[offstage] A background task has something to tell you…"
// and <background-notice> elements), never as results.
//
// Cancelling a turn's context stops the model call and the foreground
// tools; background tasks go on. Session.Close cancels and reaps
// everything.
//
// # Active continuation
//
// Run drives a session from a channel of user input: when the session is
// idle and background work finishes or posts a notice, it waits Config.Settle (250ms) for
// more to finish and runs one autonomous turn on the batch, so the model
// reacts without being prompted. User and autonomous turns never overlap;
// none starts after Close; at most Config.MaxAutonomousTurns (50) run,
// after which results wait for the next user turn.
//
// Wake-ups that bring only notices (a watch's lines, a shell's prompt)
// are coalesced: Run waits Config.NoticeSettle (30s) after the first, so
// one model call hears them all; a result or user input ends the wait.
//
// # Tokens and budgets
//
// Every model call's usage (provider.Usage: input, cached input, output
// tokens) is added once, right after the call: to the sub-agent's task
// and every task above it (task.Handle.AddUsage, task.Info.Usage), to the
// session (Session.Usage: in all, and the top level's autonomous turns
// apart, which is what waiting cost; Config.OnUsage records it, a resume
// goes on from Resume.Usage), and to the turn (TurnEnd's Event.Usage).
//
// A Budget bounds tokens, model calls and wall time: a profile's and
// spawn_agent's (budget_tokens, budget_calls, budget_seconds; the
// tighter holds) for each sub-agent with its own sub-agents,
// Config.Budget for the session, Config.AutonomousBudget for each chain
// of autonomous turns. Budgets are checked before each model call; a
// sub-agent's time budget also interrupts the call it is in (what it
// runs in the foreground ends by the limit, task.ByLimit). A
// sub-agent that reaches its own ends failed with a *BudgetError ("token
// budget of 200k reached after 31 calls"; errors.Is(err, ErrBudget)), its
// partial answer kept as its result; the session's stops every further
// call; either stops autonomous turns, which the sink hears (BudgetStop).
//
// # Sub-agents
//
// spawn_agent starts a sub-agent from a Profile (DefaultProfiles gives a
// general-purpose one) as an agent:N task owned by its caller: its context
// descends from the caller's, it reports an iteration heartbeat and
// activity lines, shares its history for task_inspect, records a trace of
// its tool calls, and its own tasks are cancelled when it ends. Its task_*
// tools see only its own tasks. Sub-agents may start sub-agents one level
// down; those may not.
//
// # Tools of your own
//
// Config.ExtraTools adds tools beside offstage's: made with tools.Define
// from a Go type, or with tools.DefineSchema from a schema that arrives as
// data (the ACP agent offers an editor's MCP servers' tools this way,
// named mcp__SERVER__TOOL). They are offered to the top level and to the
// sub-agents whose profile allows them, and go through Permit like every
// call.
//
// # Permission
//
// Config.Permit, when set, is asked before every tool call runs, the top
// level's and each sub-agent's alike (ToolCall.Agent and Profile name the
// sub-agent), so allowing spawn_agent allows starting the sub-agent, not
// whatever it then runs. A call to an unknown tool or whose arguments do
// not fit the tool's input is refused before Permit is asked. A refusal
// is the call's error result, which the calling model (top level or
// sub-agent) reads and can act on.
//
// # History guard
//
// The history is kept under Config.HistoryBytes (2 MiB of text): past it,
// the oldest tool and background results are cut to a short note, then the
// oldest other texts, never the last two messages. It bounds memory; it
// does not summarise.
//
// # Concurrency properties
//
// Turn and Run are not to be called concurrently on one session; the
// session serialises turns itself anyway. Sink.Event is called from the
// turn's goroutine, from tool goroutines and from the task-event follower,
// so a Sink must be safe for concurrent use.
package agent
