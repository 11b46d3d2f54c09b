// Package acpserver serves offstage as an agent over the Agent Client
// Protocol (with github.com/coder/acp-go-sdk, protocol version 1), so an
// editor such as Zed can drive it on stdio: send prompts, watch its
// messages, thoughts and tool calls stream, and see background work
// arrive while no prompt runs.
//
//	err := acpserver.Serve(ctx, acpserver.Config{Agent: agent.Config{Model: m}}, os.Stdin, os.Stdout)
//
// Config.Agent and Config.Surface are the template of every session:
// what agent.Open is given, with only the session's own fields (its
// directory, id, permission requests and the editor's tools) set per
// session, so an ACP session runs with the same system prompt, profiles,
// limits, sandbox, environment policy and journal as any other surface
// built from the same template.
//
// # Sessions
//
// Every session/new makes an agent.Session with its own task table, its
// shells running in the session's cwd (absolute; checked). Sessions of one
// connection are independent and see only their own tasks. session/close
// (advertised) and the connection closing cancel the running turn and
// every task of the session and reap every process. With
// Config.Surface.Journal (the CLI gives it the journal), session/list and session/load are
// offered: a loaded session replays its recorded conversation as updates
// (user messages, answers, thoughts, tool calls with their results;
// background results and notices as thoughts) before session/load
// answers, numbers its tasks on, and its next prompt brings the model the
// results it never saw and the tasks a restart orphaned. The journal
// records each session as it runs. session/resume is not offered. A
// connection holds at most Config.MaxSessions (64) sessions at once, open
// or being opened; a session/new or session/load past that is refused
// (-32000), saying to close one, before it starts anything. Requests are
// taken in the order sent: what follows a session/close finds the session
// closed. A request sent as a notification (session/new without an id)
// is dropped; session/cancel is the client's one notification.
// $/cancel_request naming a session/new that waits on the editor's MCP
// servers stops their start, and it is answered cancelled (-32800).
//
// With Config.Keep (a Keeper, which offstage serve holds), sessions outlive
// their connection: one that ends detaches its sessions (the turn in
// progress is cancelled and no turn runs; tasks, shells and the editor's
// MCP servers go on), and session/load of a live session, from any later
// connection, attaches to it instead of loading a copy: its conversation
// is replayed from the live session, the editor's MCP servers of the load
// are not started (it has its own), the cards of its background tasks end
// as the tasks do, and the results its model has not seen are delivered
// once by the turn that follows the load (an autonomous one).
// One connection holds a session at a time; while none does, a call that
// needs permission is refused. session/close ends it; Keeper.CloseIdle
// those with no connection and no unfinished task for a while;
// Keeper.Close all of them with its cause (offstage serve's: ended_by
// supervisor).
//
// # The editor's MCP servers
//
// The mcpServers of session/new and session/load are connected with the
// MCP go-sdk's client as the session opens: stdio servers, and HTTP and
// SSE ones (mcpCapabilities says so) with the editor's headers. They
// start at once, each within Config.MCPTimeout (30s); the request is
// answered when all have. Their tools reach the model as
// mcp__SERVER__TOOL (Claude Code's convention; characters model APIs
// refuse in a tool name become _), at most 200 per session, their
// descriptions capped at 2 KiB, through agent.Config.ExtraTools: calls
// get cards and permission requests as offstage's own do (see
// Permission), and results are capped to the tool result budget, saying
// so. A server's error result, a JSON-RPC error or a server that died is
// the call's error result, which the model reads. A stdio server runs in
// the session's directory, with the host's environment less what
// Config.Agent.Tools.Process.EnvPolicy withholds, plus the variables the editor
// gave, as a proc.Process (MCP over its stdin and stdout, Config.Stdout
// feeding the SDK): contained as the model's shells are, by a cgroup or
// marks, not by its process group alone, so what it starts in a session
// of its own (setsid, a daemon) is its too, and the keeper ends all of it
// if offstage dies, SIGKILL included. Closing the session closes its
// input, gives it 2s to exit, then sends SIGTERM to all it started, and
// SIGKILL 2s later, and returns once it is reaped and nothing of it is
// left; one that has not answered when Config.MCPTimeout is up is killed
// at once, with all it started. A server that fails to
// start (or a tool of it that cannot be offered) is told to the user as
// an agent message after the session's commands, with the end of what it
// wrote to stderr, and logged; the session goes on without it.
//
// # Turns and updates
//
// One pump per session, for the session's whole life: the session's Run
// loop (agent.Session.Run) and its task follower add every event to one
// ordered buffer of session/update notifications, written within 1 ms of
// being added (at once with the prompt's response when the turn ends
// sooner). So a background shell or sub-agent finishing while no
// prompt runs reaches the editor at once, and the autonomous turn it
// starts (active continuation) streams exactly like a prompted one: text
// as agent_message_chunk, reasoning as agent_thought_chunk, each tool call
// as tool_call then tool_call_update (pending, in_progress, completed or
// failed) with a title ("Run: npm test"), a kind, rawInput, rawOutput, and
// text the editor can show. A prompt's response is written only after
// every update of its turn.
//
// Kinds: bash, task_input and spawn_agent are execute; task_list,
// task_inspect and task_output read; task_wait other; task_cancel delete;
// an MCP tool read when read-only, other otherwise, titled "SERVER: its
// title".
//
// A call that starts background work (bash with run_in_background, a
// foreground command adopted into the background, spawn_agent in the
// background) keeps its card in_progress, updated with the shell's latest
// output or the sub-agent's current step (one line, replaced; the
// sub-agent's own tool calls are not streamed, except those the user is
// asked about: see Permission), until the task ends; then
// the card gets its final status, exit code and output tail or answer.
// Cancelling the task (task_cancel, /cancel) ends the card the same way.
// When the session's last running or queued task ends, after that task's
// card, one session_info_update arrives with _meta
// {"offstage/backgroundIdle": true} ([IdleMeta]) and updatedAt: the task
// table's background_idle event, for an editor to show "idle" instead of
// polling.
//
// A prompt that arrives during an autonomous turn waits for it, up to
// Config.PromptWait (30s), then cancels that turn and runs. A second
// prompt while one runs cancels it, as the SDK does (the first ends
// cancelled), and runs once it has ended; it is refused only if the
// first has not ended within PromptWait. session/cancel cancels the running
// turn only (stopReason cancelled): background work goes on, as over MCP
// and in the CLI. Stop reasons: end_turn, cancelled, max_turn_requests
// (the iteration cap), refusal and max_tokens (as the provider reports).
// A budget reached (the session's, an autonomous chain's) ends the turn
// with max_tokens for a token budget and max_turn_requests for a call or
// time budget, its usage in the response, and a last message chunk
// naming the budget. A turn that fails (the model's API is down) is a
// JSON-RPC error.
//
// A prompt that is one of agent.Commands (/tasks, /inspect ID, /output
// ID, /cancel ID, /wait ID, /help), which available_commands_update
// offers, runs that command instead of a turn, as in the CLI.
//
// # Permission
//
// Before a call that is not read-only (tools.Safety: offstage's execute
// and destructive tools, and every MCP tool whose annotations do not say
// readOnlyHint) runs, the client is asked with session/request_permission, whoever makes the call: the
// top level, or a sub-agent (agent.ToolCall.Agent), foreground or in the
// background, also while no prompt runs. A sub-agent's call, which the
// client has not seen (sub-agents' calls are not streamed), first gets a
// card of its own, attributed ("agent:1 (general) wants to run: ls", id
// "agent:1/<call id>"); once answered it fails (rejected) or stays
// in_progress until the sub-agent moves past that step. A call whose
// arguments do not fit its tool is refused before anyone is asked.
//
// One request is open at a time per session: the others wait, in the
// order they asked (a waiting request whose agent is cancelled leaves the
// queue), and are asked in turn unless an earlier answer already allowed
// them.
//
// Options: allow once; always allow that tool in this session; for a
// sub-agent's call also always allow that tool for this sub-agent (and
// the sub-agents it starts); reject. "Always" given at the top level
// covers every sub-agent of the session: the top level, allowed to run
// the tool unasked, could run whatever a sub-agent would, so asking the
// sub-agent protects nothing. "Always" given to a sub-agent covers it
// and its descendants only, since the user judged that one sub-agent's
// task. A rejection becomes the call's error result, which the calling
// model (top level or sub-agent) reads and can act on. Config.AllowAll
// (offstage acp --yolo) asks nothing.
//
// # Bad input
//
// A line that is not JSON gets a parse error, one that is not a JSON-RPC
// object (a batch, an id that is not a string or an integer, JSON nested
// too deep) an invalid-request error (internal/rpcline, shared with the
// MCP surface). Params are checked before the SDK decodes them (its own
// errors name Go types, in data only): a field of the wrong type, a
// missing one, a prompt block or MCP server that is not one, an unknown
// session id or a relative cwd get an invalid-params error whose message
// says what is wrong and gives an example of what to send; a method
// offstage does not serve gets method-not-found naming it and listing
// those it serves. The connection goes on.
// When the input ends, the requests already read are answered (for up to
// DrainGrace) before the sessions close.
//
// # Concurrency properties
//
// Serve blocks until the connection ends and every session is closed.
// Each session has two goroutines (its agent.Session.Run loop and the
// task-event follower that Run starts), besides those of its running
// tasks, and a bounded buffer of updates not yet written (64 KB): when
// the client reads slowly, the goroutine that adds an update to a full
// buffer writes it, at the client's pace, and the session waits; nothing
// is dropped. Updates are written by the goroutine whose turn ends, by a
// timer's 1 ms after they were added, or by that adder. A client that
// reads nothing does not stall a session's close: it waits 5 s for a
// stuck write, then goes on without it. A slash command (/wait) runs with
// one more goroutine, which ends with it. session/prompt is answered by
// offstage, not the SDK's dispatch: the goroutine that reads the
// connection decodes it once and, when the session is idle, hands it to
// the Run loop, whose goroutine writes the response with the turn's last
// updates when the turn ends; a prompt that must wait (for an autonomous
// turn, or a slash command) waits on a goroutine of its own.
package acpserver
