package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/offstage/offstage/internal/tracing"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// Profile describes a kind of sub-agent the model can start with
// spawn_agent.
type Profile struct {
	Name        string
	Description string // what it is for, shown to the model
	System      string // its system prompt
	// Tools names the tools it may use; nil means all of them. The task_*
	// tools always act on its own tasks only.
	Tools []string
	// MaxIterations caps its turn; 0 means Config.MaxIterations.
	MaxIterations int
	// Budget bounds what each of its sub-agents may spend, with the
	// sub-agents it starts (see Budget); spawn_agent's budget_tokens,
	// budget_calls and budget_seconds can only tighten it. A sub-agent
	// that reaches it ends failed with a *BudgetError, its partial
	// answer kept as its result.
	Budget Budget
	// Model answers for it; nil means Config.Model.
	Model provider.Model
	// ModelName is the model its file named, for a surface to resolve
	// into Model (see LoadProfiles); the runtime does not read it.
	ModelName string
	// NoProjectInstructions leaves Config.ProjectInstructions out of its
	// system prompt.
	NoProjectInstructions bool
	// Env is applied on top of the session's environment policy
	// (Config.Tools.Process.EnvPolicy, with environ.Policy.Then) for the
	// shells of this sub-agent: it can keep a variable the session
	// withholds, or withhold more.
	Env environ.Policy
	// Limits caps each shell of this sub-agent, within the session's
	// (Config.Tools.Process.Limits, with resource.Limits.Narrow): a profile
	// can only tighten them.
	Limits resource.Limits
	// Sandbox and SandboxNetwork fence each shell of this sub-agent
	// within the session's sandbox (Config.Tools.Process.Sandbox, with
	// sandbox.Policy.Narrow): a profile can make it stricter (read-only
	// under workspace-write, the network off), never wider. "" and nil
	// keep the session's.
	Sandbox        sandbox.Mode
	SandboxNetwork *bool
}

// narrowSandbox is the sandbox of p's shells under the session's s.
func (p Profile) narrowSandbox(s sandbox.Policy) sandbox.Policy {
	t := sandbox.Policy{Mode: p.Sandbox, Network: s.Network}
	if !s.On() {
		t.Network = false // a mode's default
	}
	if p.SandboxNetwork != nil {
		t.Network = *p.SandboxNetwork
	}
	if t.Mode == "" || t.Mode == sandbox.Off {
		if !s.On() {
			return s
		}
		t.Mode = s.Mode
	}
	return s.Narrow(t)
}

// DefaultProfiles returns the profiles used when Config.Profiles is nil:
// one general-purpose sub-agent.
func DefaultProfiles() []Profile {
	return []Profile{{
		Name:        "general",
		Description: "A general-purpose agent for a self-contained task: investigating a question, running commands, reporting back.",
		System: "You are a sub-agent started by another agent for one task. Do it with the tools you have, " +
			"then answer with a short report of what you found or did; the other agent sees only that report.",
	}}
}

// Config configures a Session.
type Config struct {
	// Model answers the top level (and sub-agents without their own).
	Model provider.Model
	// System is the top level's system prompt.
	System string
	// ProjectInstructions (AGENTS.md; see FindProjectInstructions) are
	// added to the top level's system prompt, and to each sub-agent's
	// unless its profile says NoProjectInstructions.
	ProjectInstructions string
	// Tools configures the model's tools (the shell template and budgets).
	// The session's working directory is Tools.Process.Dir (default: the
	// process's): the shells run there, and Open reads AGENTS.md from it.
	Tools tools.Config
	// Tasks configures the task table.
	Tasks task.Options
	// ExtraTools are offered beside the tool set's and spawn_agent: to the
	// top level, and to each sub-agent whose Profile.Tools allows them (nil
	// allows all), through Permit like every call. Build them with
	// tools.Define, or tools.DefineSchema for a tool another program
	// serves (the ACP agent offers the editor's MCP servers' tools so).
	// Their names must differ from each other's and the built-in tools'.
	// Their calls may run concurrently, from any agent of the session;
	// closing what they call is their owner's business, after
	// Session.Close.
	ExtraTools []*tools.Tool
	// Profiles are the sub-agent profiles; nil means DefaultProfiles, and
	// an empty non-nil slice disables spawn_agent.
	Profiles []Profile
	// MaxIterations caps the model calls of one turn. Default 20.
	MaxIterations int
	// Settle batches results finishing this close together into one
	// autonomous turn. Default 250ms.
	Settle time.Duration
	// NoticeSettle coalesces wake-ups that bring only notices (a watch's
	// matched lines) and no finished result: Run waits this long after
	// the first of them before it starts an autonomous turn, so that one
	// model call hears every notice of the window. A result finishing, a
	// shell waiting for input (its prompt is a question to answer now),
	// or user input ends the wait at once. Default
	// 30s; negative: no coalescing (a turn per wake-up, after Settle).
	NoticeSettle time.Duration
	// MaxAutonomousTurns caps the turns Run starts by itself in a session;
	// after it, results wait for the next user turn. Default 50.
	MaxAutonomousTurns int
	// NoContinuation turns active continuation off: finished background
	// work then reaches the model only with the next user turn.
	NoContinuation bool
	// HistoryBytes is the history guard's budget (see the package doc).
	// Default 2 MiB.
	HistoryBytes int
	// Permit, when set, is asked before each tool call runs: the top
	// level's and every sub-agent's (ToolCall.Agent says whose), so
	// allowing spawn_agent does not allow what the sub-agent then does. A
	// call to an unknown tool or with arguments that do not fit the tool's
	// input (tools.Tool.Check) is refused first, without asking. Permit may
	// block, to ask a person; an error refuses the call, and the calling
	// model gets it as the call's error result. It is called concurrently
	// (the calls of one model response, and sub-agents running at once),
	// also while no turn runs (a background sub-agent's calls).
	Permit func(ctx context.Context, call ToolCall) error
	// OnMessage, if set, is called with each message added to the top
	// level's conversation, in order, as it is added (a journal records
	// them; Resume.History gives them back). It must not block.
	OnMessage func(provider.Message)
	// Resume, if set, continues a conversation recorded before a restart.
	Resume *Resume
	// Tracer, if set, traces each turn as OpenTelemetry spans named by
	// the GenAI conventions: the turn (invoke_agent), its model calls
	// (chat), its tool calls (execute_tool) and the tasks they start, which
	// a traced command joins through TRACEPARENT. nil traces nothing.
	Tracer trace.TracerProvider
	// Budget bounds the whole session: every model call, the top
	// level's and every sub-agent's, and the wall time since New (for a
	// resumed session, its usage counts from what it had spent before).
	// Once it is reached no further model call is made: a turn fails
	// with a *BudgetError, sub-agents end failed with it, autonomous
	// turns stop and the sink hears so (BudgetStop). Zero: none.
	Budget Budget
	// AutonomousBudget bounds each chain of autonomous turns (those Run
	// starts between two user turns): the top level's model calls in
	// them, and the wall time since the chain's first turn began. Once
	// reached, no autonomous turn starts (nor makes a further call) until
	// the next user turn, and the sink hears so (BudgetStop). Zero: none.
	AutonomousBudget Budget
	// OnUsage, if set, is called after each model call of the session
	// (any agent's) with the session's usage so far (a journal records
	// it; Resume.Usage gives it back). Calls may come from several
	// goroutines at once, and out of order: the larger Total.ModelCalls
	// is the newer. It must not block.
	OnUsage func(Usage)
	// OnModelCall, if set, is called after each model call of the
	// session with whose it was and what it spent (metrics count tokens
	// by profile). Calls may come from several goroutines at once. It
	// must not block.
	OnModelCall func(ModelCall)
}

// ModelCall is one model call, as Config.OnModelCall hears of it.
type ModelCall struct {
	// Agent is the sub-agent's task id, "" for the top level; Profile
	// its profile.
	Agent, Profile string
	// Usage is the call's: ModelCalls is 1.
	Usage task.Usage
}

// Usage is what a session spent calling models.
type Usage struct {
	// Total is every model call's: the top level's and every
	// sub-agent's.
	Total task.Usage `json:"total"`
	// Autonomous is the top level's calls in autonomous turns (those that
	// background results and notices started): what waiting cost.
	Autonomous task.Usage `json:"autonomous"`
}

// Resume is a conversation recorded before a restart, to continue (see
// Open and Journal.Load, which make one).
type Resume struct {
	// ID is the recorded session's id, which the session keeps.
	ID string
	// History is restored as the top level's conversation before anything
	// else (Config.OnMessage does not see it again).
	History []provider.Message
	// Notices (what the restart orphaned, say) and Results (tasks that
	// finished before the restart but never reached the conversation) are
	// added, framed as background notices and results, before the first
	// model request, once.
	Notices []task.Notice
	Results []task.Result
	// Delivered are the ids of the tasks whose results and notices the
	// resume tells; Open records them delivered.
	Delivered []string
	// FirstID is the number the old session's task ids reached: new ones
	// continue after it (task.Options.FirstID).
	FirstID uint64
	// Seq is how many messages the old conversation recorded: new ones
	// are numbered on after it.
	Seq int
	// Usage is what the session had spent: its totals go on from it.
	Usage Usage
	// Claim is what the Journal's Load saw of who last held the session,
	// in the Journal's own terms (journal.Recorder: its host and end).
	// Record takes the session over only if that is still so, in one
	// step, and refuses the resume otherwise: of two processes resuming
	// one session at once, exactly one goes on, and the other records
	// nothing. Empty in a Resume made by hand: Record then looks itself.
	Claim string
}

// ToolCall is a call the model asked for, as Config.Permit sees it.
type ToolCall struct {
	ID    string // the provider's tool call id, unique within its agent's conversation
	Tool  *tools.Tool
	Input json.RawMessage
	// Agent is the task id of the sub-agent making the call ("agent:3"),
	// empty for the top level; Profile is that sub-agent's profile. Its
	// owner (the top level, or the sub-agent that started it) is
	// Table().Info(Agent).Owner.
	Agent, Profile string
}

const (
	defaultMaxIterations = 20
	defaultSettle        = 250 * time.Millisecond
	defaultNoticeSettle  = 30 * time.Second
	defaultAutonomous    = 50
	defaultHistoryBytes  = 2 << 20
	// maxDepth: the top level is depth 0; its sub-agents (1) may start
	// shells and agents; theirs (2) may not start agents.
	maxDepth = 2
)

func (c Config) withDefaults() Config {
	if c.MaxIterations <= 0 {
		c.MaxIterations = defaultMaxIterations
	}
	if c.Settle <= 0 {
		c.Settle = defaultSettle
	}
	if c.NoticeSettle == 0 {
		c.NoticeSettle = defaultNoticeSettle
	}
	if c.MaxAutonomousTurns <= 0 {
		c.MaxAutonomousTurns = defaultAutonomous
	}
	if c.HistoryBytes <= 0 {
		c.HistoryBytes = defaultHistoryBytes
	}
	if c.Profiles == nil {
		c.Profiles = DefaultProfiles()
	}
	return c
}

// Session is one conversation with a model, with its own task table. Turn
// and Run must not be called concurrently with each other (a session has
// one conversation); everything else is safe for concurrent use.
type Session struct {
	cfg     Config
	table   *task.Table
	toolset *tools.Set // the top level's
	// subset is the sub-agents' tool set: toolset, unless results do not
	// come back to the top level by themselves (Config.Tools.NoPush, over
	// MCP), when it is one whose descriptions say that they come back to
	// a sub-agent, as they do (reflow). profileSets are the sets of
	// profiles with an Env policy of their own, by profile name; the
	// others use subset.
	subset      *tools.Set
	profileSets map[string]*tools.Set
	top         *loop

	turnMu     sync.Mutex  // held for the length of a turn: user and autonomous turns never overlap
	turning    atomic.Bool // set while turnMu is held (InTurn)
	cancelMu   sync.Mutex
	cancelTurn context.CancelCauseFunc // guarded by cancelMu: cancels the running turn, nil between turns
	// taken: Run has taken a line from its input whose turn has not
	// started yet; cancelNext is a cancel that came meanwhile, for that
	// turn. Guarded by cancelMu.
	taken      bool
	cancelNext error
	closing    atomic.Bool
	// readyHeld is set when a Run took the table's ready token and
	// returned without acting on it (its input had closed): the token
	// fires once, so the next Run acts on it at once, or results that
	// finished during a detached turn waited for another task's end.
	readyHeld  atomic.Bool
	autonomous atomic.Int64  // autonomous turns run so far
	carried    *carried      // what a resumed conversation still has to hear; nil when none
	spans      tracing.Spans // the top level's tasks' spans, for the autonomous turns they start to link to

	started time.Time // when New made it: the session budget's time starts here

	usageMu sync.Mutex
	usage   Usage       // guarded by usageMu
	turn    task.Usage  // guarded by usageMu: the running turn's top-level calls
	chain   chain       // guarded by usageMu
	inAuto  atomic.Bool // an autonomous turn is running

	id       string          // set by Open
	record   Record          // set by Open when recorded; ended by Close
	closed   chan struct{}   // closed by Close: Run returns
	life     context.Context // New's ctx: the session's lifetime
	lifeMu   sync.Mutex
	stopLife func() bool // guarded by lifeMu: stops the Close that life's end runs; nil until watchLife has it

	closeOnce sync.Once
	closeErr  error
}

// carried is what Resume brought that the top level has not heard yet.
type carried struct {
	mu      sync.Mutex
	notices []task.Notice
	results []task.Result
}

// take returns what is carried, once.
func (c *carried) take() ([]task.Notice, []task.Result) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, r := c.notices, c.results
	c.notices, c.results = nil, nil
	return n, r
}

// ErrClosed is the error of a turn on a closed session: closed by Close,
// or because the ctx it was opened with ended.
var ErrClosed = errors.New("agent: the session is closed")

// ErrNoModel is the error of a turn in a session without a model.
var ErrNoModel = errors.New("agent: this session has no model (Config.Model is nil); it serves tools only")

// New returns a session whose tasks descend from ctx: the runtime alone,
// with nothing recorded and nothing read from disk (Open does that). A nil
// Config.Model gives the tools without spawn_agent; its turns fail with
// ErrNoModel. ctx is the session's lifetime, not a time limit for New:
// when it ends, the session closes as by Close, and its turns fail with
// ErrClosed.
func New(ctx context.Context, cfg Config) (*Session, error) {
	s, err := build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.watchLife(ctx)
	return s, nil
}

// build is New without the watch on ctx: Open sets what is its own
// before that watch, which may close the session at once.
func build(ctx context.Context, cfg Config) (*Session, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Session{cfg: cfg, profileSets: make(map[string]*tools.Set), closed: make(chan struct{}), started: time.Now()}
	s.toolSets()
	if err := s.checkSchemas(); err != nil {
		return nil, err
	}
	s.table = task.New(ctx, cfg.Tasks)
	for _, p := range cfg.Profiles {
		if len(p.Env.Keep) > 0 || len(p.Env.Drop) > 0 || p.Env.KeepAll || !p.Limits.IsZero() || p.Sandbox != "" || p.SandboxNetwork != nil {
			tc := cfg.Tools
			tc.NoPush = false // a sub-agent's results come back to it
			tc.Process.EnvPolicy = tc.Process.EnvPolicy.Then(p.Env)
			tc.Process.Limits = tc.Process.Limits.Narrow(p.Limits)
			tc.Process.Sandbox = p.narrowSandbox(tc.Process.Sandbox)
			s.profileSets[p.Name] = tools.New(tc)
		}
	}
	s.top = s.newLoop("", withInstructions(cfg.System, cfg.ProjectInstructions), cfg.Model, s.table.View(""), nil, 0, nil, cfg.MaxIterations)
	if r := cfg.Resume; r != nil {
		for _, m := range r.History {
			s.top.hist.append(m)
		}
		s.carried = &carried{notices: r.Notices, results: r.Results}
		s.usage = r.Usage
	}
	s.top.hist.onAppend = cfg.OnMessage
	s.life = ctx
	return s, nil
}

// watchLife closes the session when ctx, its lifetime, ends: at once, on
// a goroutine of its own, when it has ended already. It is the last
// thing New and Open do: that Close reads what they set.
func (s *Session) watchLife(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { s.Close(context.Background()) })
	s.lifeMu.Lock()
	s.stopLife = stop
	s.lifeMu.Unlock()
}

// toolSets makes the top level's tool set and the sub-agents'.
func (s *Session) toolSets() {
	s.toolset = tools.New(s.cfg.Tools)
	s.subset = s.toolset
	if s.cfg.Tools.NoPush {
		tc := s.cfg.Tools
		tc.NoPush = false
		s.subset = tools.New(tc)
	}
}

// newLoop assembles an agent: its tools are the toolset's (filtered by
// allowed, nil meaning all) plus spawn_agent below the nesting limit.
func (s *Session) newLoop(agent, system string, model provider.Model, view *task.View, allowed []string, depth int, h *task.Handle, maxIter int) *loop {
	l := &loop{s: s, agent: agent, system: system, model: model, view: view, maxIter: maxIter, hist: newHistory(s.cfg.HistoryBytes), handle: h}
	set := s.toolset
	if depth > 0 {
		set = s.subset
	}
	if ps, ok := s.profileSets[agent]; ok {
		set = ps
	}
	all := append(slices.Clone(set.Tools()), s.cfg.ExtraTools...)
	if s.spawnAllowed(depth) {
		all = append(all, s.spawnTool(depth))
	}
	for _, t := range all {
		if allowed == nil || slices.Contains(allowed, t.Name) {
			l.tools = append(l.tools, t)
			schema, err := t.InputJSON() // shared by every session
			if err != nil {
				panic(fmt.Sprintf("agent: tool %s: %v", t.Name, err)) // checkSchemas let it through
			}
			l.defs = append(l.defs, provider.Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
		}
	}
	return l
}

// spawnAllowed reports whether an agent at depth may start sub-agents.
func (s *Session) spawnAllowed(depth int) bool {
	return depth < maxDepth && len(s.cfg.Profiles) > 0 && s.cfg.Model != nil
}

// checkSchemas refuses tools whose input schema cannot be marshalled,
// once, rather than sending null as their schema on every model request,
// and extra tools that are nil or take a name already given.
func (s *Session) checkSchemas() error {
	all := slices.Clone(s.toolset.Tools())
	if s.subset != s.toolset {
		all = append(all, s.subset.Tools()...)
	}
	for _, ps := range s.profileSets {
		all = append(all, ps.Tools()...)
	}
	// spawn_agent is not among them: its schemas, shared by every
	// session, were marshalled when first made (tools.DefineShared).
	names := map[string]bool{"spawn_agent": true}
	for _, t := range s.toolset.Tools() {
		names[t.Name] = true
	}
	for i, t := range s.cfg.ExtraTools {
		switch {
		case t == nil:
			return fmt.Errorf("agent: ExtraTools[%d] is nil", i)
		case t.Name == "":
			return fmt.Errorf("agent: ExtraTools[%d] has no name", i)
		case names[t.Name]:
			return fmt.Errorf("agent: ExtraTools[%d] is named %s, a name another tool has", i, t.Name)
		}
		names[t.Name] = true
		all = append(all, t)
	}
	for _, t := range all {
		if _, err := t.InputJSON(); err != nil { // built once per process for offstage's own
			return fmt.Errorf("agent: tool %s: its input schema cannot be marshalled: %w", t.Name, err)
		}
	}
	return nil
}

// ToolDefs returns the tools the top level of a session with cfg would
// have (spawn_agent included when there is a model and profiles), for a
// surface to list them before it opens a session (an MCP server's tool
// list). They are definitions: call tools through a session's Tools.
func ToolDefs(cfg Config) ([]*tools.Tool, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg.withDefaults()}
	s.toolSets()
	if err := s.checkSchemas(); err != nil {
		return nil, err
	}
	list := append(slices.Clone(s.toolset.Tools()), s.cfg.ExtraTools...)
	if s.spawnAllowed(0) {
		list = append(list, s.spawnTool(0))
	}
	return list, nil
}

// Tools returns the top level's tools: the tool set, Config.ExtraTools
// and, when profiles are configured, spawn_agent. Another surface (the MCP server) serves
// these same tools, calling them with the session's views.
func (s *Session) Tools() []*tools.Tool { return slices.Clone(s.top.tools) }

// ID returns the session's id: Surface.ID, or the one its journal gave
// it; empty for a session made with New.
func (s *Session) ID() string { return s.id }

// Resumed returns the recorded conversation the session continues (see
// Surface.Resume), or nil.
func (s *Session) Resumed() *Resume { return s.cfg.Resume }

// Table returns the session's task table, for UIs.
func (s *Session) Table() *task.Table { return s.table }

// History returns a copy of the top level's conversation.
func (s *Session) History() []provider.Message { return s.top.hist.messages() }

// Turn runs one user turn and returns the model's final answer. Finished
// background results are reflowed into the history before every model
// request. Cancelling ctx (the user's Ctrl-C) stops the model call and the
// foreground tools; background tasks go on.
func (s *Session) Turn(ctx context.Context, input string, sink Sink) (string, error) {
	if err := s.closedErr(); err != nil || s.cfg.Model == nil {
		if err == nil {
			err = ErrNoModel
		}
		s.cancelMu.Lock()
		s.taken, s.cancelNext = false, nil
		s.cancelMu.Unlock()
		emit(sink, Event{Type: TurnStart})
		emit(sink, Event{Type: TurnEnd, Err: err})
		return "", err
	}
	s.lockTurn()
	defer s.unlockTurn()
	s.usageMu.Lock()
	s.chain = chain{} // a user turn ends the chain of autonomous turns
	s.usageMu.Unlock()
	return s.runTurn(ctx, []provider.Block{{Type: provider.Text, Text: input}}, false, nil, sink)
}

// closedErr returns an error wrapping ErrClosed if the session is closed
// or its ctx has ended (its Close may not have run yet), or nil.
func (s *Session) closedErr() error {
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	if s.life.Err() != nil {
		return fmt.Errorf("%w: the context it was opened with ended (%v)", ErrClosed, context.Cause(s.life))
	}
	return nil
}

// ErrTurnCanceled is the cause CancelTurn gives the turn it cancels.
var ErrTurnCanceled = errors.New("turn canceled")

// runTurn runs a turn on blocks: a user's turn, or an autonomous one,
// whose span links to caused (the spans of the tasks whose results or
// notices it carries).
func (s *Session) runTurn(ctx context.Context, blocks []provider.Block, autonomous bool, caused []trace.Link, sink Sink) (string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	s.cancelMu.Lock()
	s.cancelTurn = cancel
	if !autonomous {
		if s.cancelNext != nil { // cancelled before it started
			cancel(s.cancelNext)
		}
		s.taken, s.cancelNext = false, nil
	}
	s.cancelMu.Unlock()
	defer func() {
		s.cancelMu.Lock()
		s.cancelTurn = nil
		s.cancelMu.Unlock()
		cancel(nil)
	}()
	s.inAuto.Store(autonomous)
	defer s.inAuto.Store(false)
	s.usageMu.Lock()
	s.turn = task.Usage{}
	s.usageMu.Unlock()
	ctx, span := tracing.Root(ctx, s.cfg.Tracer, "invoke_agent offstage", caused, tracing.OperationName.String("invoke_agent"),
		tracing.AgentName.String("offstage"), tracing.Conversation(s.id), tracing.Autonomous.Bool(autonomous))
	if s.cfg.Tracer != nil {
		ctx = tracing.WithSpans(ctx, &s.spans) // the tasks this turn's calls start
	}
	defer span.End()
	emit(sink, Event{Type: TurnStart, Autonomous: autonomous})
	turn := tools.NewTurn() // the tasks started with lifetime "turn"
	text, stop, err := s.top.turn(tools.WithTurn(ctx, turn), blocks, sink)
	turn.End(context.WithoutCancel(ctx), turnEndCause(ctx))
	tracing.Fail(span, err)
	s.usageMu.Lock()
	used := s.turn
	s.usageMu.Unlock()
	span.SetAttributes(tracing.InputTokens.Int64(used.InputTokens), tracing.OutputTokens.Int64(used.OutputTokens))
	emit(sink, Event{Type: TurnEnd, Autonomous: autonomous, Text: text, Stop: stop, Err: err, Usage: &used})
	return text, err
}

// turnEndCause is why the tasks of lifetime "turn" end with a turn: the
// session closing names itself; a turn that ended, or was cancelled,
// ends them by their declared lifetime (nil: Turn.End's default, a
// limit).
func turnEndCause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return task.EndCause(context.Cause(ctx), task.ByLimit, "lifetime turn: the turn that started it was cancelled")
}

// Run drives the session: it runs a turn for each input line and, while
// idle, an autonomous turn when background tasks finish (results finishing
// within Config.Settle of each other are batched into one turn). User
// turns and autonomous turns never overlap; none starts after Close; at
// most Config.MaxAutonomousTurns autonomous turns run, after which results
// wait for the next user turn. Task events are forwarded to sink while Run
// runs. A failed turn is reported to sink (TurnEnd with Err) and Run goes
// on. Run returns when input is closed, ctx ends or Close is called; it
// has no error to return (a turn's goes to sink). Run may be called
// again once it has returned (a surface that detaches and attaches): a
// result that finished while no Run listened, or that the Run before
// took note of and left unanswered, wakes the next Run at once. At most
// one Run may run at a time: a caller starts the next once the last has returned.
func (s *Session) Run(ctx context.Context, input <-chan string, sink Sink) {
	followCtx, stopFollow := context.WithCancel(ctx)
	followed := make(chan struct{})
	from := s.table.Events().Last() // now, not when the goroutine gets to run
	go func() {
		defer close(followed)
		s.followTasks(followCtx, from, sink)
	}()
	defer func() {
		stopFollow()
		<-followed
	}()
	ready := s.top.view.Ready()
	var held chan struct{} // the token a Run before this one took
	if s.readyHeld.Swap(false) {
		held = make(chan struct{}, 1)
		held <- struct{}{}
	}
	defer func() {
		if held != nil { // still not acted on: the next Run's
			s.readyHeld.Store(true)
		}
	}()
	// woken acts on a ready token: false when Run is to return.
	woken := func() bool {
		if s.cfg.NoContinuation {
			return true // the next user turn reflows them
		}
		line, ok, more := s.settle(ctx, input, ready)
		if !more && !s.resultsWaiting() && !s.promptWaiting() {
			line, ok, more = s.gatherNotices(ctx, input, ready)
		}
		if more {
			if !ok {
				s.readyHeld.Store(true)
				return false
			}
			s.take()
			s.Turn(ctx, line, sink) // user input arrived meanwhile: its turn reflows the results
			return true
		}
		s.autonomousTurn(ctx, sink)
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closed:
			return
		case line, ok := <-input:
			if !ok {
				return
			}
			s.take()
			s.Turn(ctx, line, sink)
		case <-held:
			held = nil
			if !woken() {
				return
			}
		case <-ready:
			if !woken() {
				return
			}
		}
	}
}

// settle waits Config.Settle for more results to finish, unless user input
// arrives first (then it returns it, with more set).
func (s *Session) settle(ctx context.Context, input <-chan string, ready <-chan struct{}) (line string, ok, more bool) {
	timer := time.NewTimer(s.cfg.Settle)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return "", false, false
		case <-ready: // another finished within the window: same batch
		case line, ok := <-input:
			return line, ok, true
		case <-ctx.Done():
			return "", false, false
		}
	}
}

// resultsWaiting reports whether a finished result waits for the top
// level (not only notices).
func (s *Session) resultsWaiting() bool {
	if c := s.carried; c != nil {
		c.mu.Lock()
		n := len(c.results)
		c.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	for _, i := range s.top.view.List() {
		if i.State.Finished() && !i.Delivered {
			return true
		}
	}
	return false
}

// promptWaiting reports whether one of the top level's shells seems to
// wait for input: a prompt is a question to answer now, not a watch's
// line to batch with the next ones.
func (s *Session) promptWaiting() bool {
	for _, i := range s.top.view.List() {
		if i.State != task.Running || i.Kind != "shell" {
			continue
		}
		if p, ok := tools.Shell(s.top.view, i.ID); ok {
			if _, waiting := p.WaitingForInput(); waiting {
				return true
			}
		}
	}
	return false
}

// gatherNotices waits Config.NoticeSettle for more notices to batch with
// those waiting, unless a result finishes (then it settles as for
// results) or user input arrives (then it returns it, with more set).
func (s *Session) gatherNotices(ctx context.Context, input <-chan string, ready <-chan struct{}) (line string, ok, more bool) {
	if s.cfg.NoticeSettle < 0 {
		return "", false, false
	}
	timer := time.NewTimer(s.cfg.NoticeSettle)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return "", false, false
		case <-ready:
			if s.resultsWaiting() || s.promptWaiting() {
				return s.settle(ctx, input, ready)
			}
		case line, ok := <-input:
			return line, ok, true
		case <-ctx.Done():
			return "", false, false
		case <-s.closed:
			return "", false, false
		}
	}
}

// autonomousTurn runs a turn on the finished results, if there are any and
// the session is neither closing nor over its cap.
func (s *Session) autonomousTurn(ctx context.Context, sink Sink) {
	if s.cfg.Model == nil || s.closing.Load() || ctx.Err() != nil || s.autonomous.Load() >= int64(s.cfg.MaxAutonomousTurns) {
		return
	}
	s.lockTurn()
	defer s.unlockTurn()
	if s.autonomousStopped(sink) {
		return // the results wait for the next user turn
	}
	blocks, ids, noticeIDs := drainBackground(s.top.view, s.carried)
	if len(blocks) == 0 {
		return // a stale wake-up: a wait already took them
	}
	s.autonomous.Add(1)
	emit(sink, Event{Type: Reflow, TaskIDs: ids, NoticeIDs: noticeIDs, Autonomous: true})
	s.runTurn(ctx, blocks, true, s.spans.Links(ids, noticeIDs), sink)
}

// lockTurn takes the session for a turn; unlockTurn gives it back.
func (s *Session) lockTurn() {
	s.turnMu.Lock()
	s.turning.Store(true)
}

func (s *Session) unlockTurn() {
	s.turning.Store(false)
	s.turnMu.Unlock()
}

// InTurn reports whether a turn holds the session: a user's, or an
// autonomous one from the moment it takes the finished results (which then
// count as delivered) until it ends. A caller that waits for the session
// to settle (no task running, every result delivered) asks it after
// seeing the results delivered: a result taken by a turn that has not
// ended yet is not settled.
func (s *Session) InTurn() bool { return s.turning.Load() }

// CancelTurn cancels the turn in progress, user or autonomous, with cause
// ErrTurnCanceled, as the user's Ctrl-C does: the model call and the
// foreground tools stop; background tasks and Run go on. It reports
// whether a turn was running.
func (s *Session) CancelTurn() bool { return s.cancelTurnCause(ErrTurnCanceled) }

// CancelTurnCause is CancelTurn for a cause that names who ended the
// turn (a *task.EndError: the client the session worked for went away):
// the foreground tasks the turn ends record it, not a user's cancel. The
// turn's error wraps ErrTurnCanceled and cause; nil is CancelTurn.
func (s *Session) CancelTurnCause(cause error) bool {
	if cause == nil {
		return s.CancelTurn()
	}
	return s.cancelTurnCause(fmt.Errorf("%w: %w", ErrTurnCanceled, cause))
}

func (s *Session) cancelTurnCause(cause error) bool {
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	if s.cancelTurn == nil {
		if s.taken { // Run took the line; its turn has not started
			s.cancelNext = cause
			return true
		}
		return false
	}
	s.cancelTurn(cause)
	return true
}

// take notes that Run took a line from its input: a cancel that comes
// before its turn starts is that turn's (it was lost).
func (s *Session) take() {
	s.cancelMu.Lock()
	s.taken, s.cancelNext = true, nil
	s.cancelMu.Unlock()
}

// AutonomousTurns returns how many autonomous turns Run has started.
func (s *Session) AutonomousTurns() int { return int(s.autonomous.Load()) }

// followTasks forwards the task table's events after from to sink until
// ctx ends. If the sink falls behind the bounded log, it says so with one
// event and goes on from the oldest event still held.
func (s *Session) followTasks(ctx context.Context, from uint64, sink Sink) {
	s.table.Events().FollowFrom(ctx, from, func(e *task.Event, err error) {
		emit(sink, Event{Type: TaskEvent, Task: e, Err: err})
	})
}

// Close stops the session: the turn in progress is cancelled, Run
// returns, no autonomous turn starts any more, every task is cancelled,
// and Close waits until every task function has returned and every
// process is reaped (each shell gets its stop grace, 3s by default), for
// at most 20 seconds or until ctx ends; then the session's record ends.
// It is idempotent: later calls return the first one's error. The tasks
// it ends record that the session closed (task.BySession); CloseCause
// says why. When the ctx the session was opened with ends, the session
// runs Close itself; calling Close then waits for that one.
func (s *Session) Close(ctx context.Context) error { return s.CloseCause(ctx, nil) }

// CloseCause is Close with why the session closed, which every task it
// ends records (Info.EndedBy, EndReason) and its turn's error wraps:
// task.Closed("the ACP client went away"), or an *task.EndError of
// another (task.BySupervisor). nil is task.ErrClosed: "the session
// closed". Only the first call's cause counts.
func (s *Session) CloseCause(ctx context.Context, cause error) error {
	if cause == nil {
		cause = task.ErrClosed
	}
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.lifeMu.Lock()
		if s.stopLife != nil { // nil: life's end runs this Close, before watchLife could keep its stop
			s.stopLife()
		}
		s.lifeMu.Unlock()
		close(s.closed)
		s.cancelTurnCause(fmt.Errorf("%w: %w", ErrTurnCanceled, cause))
		ctx, cancel := context.WithTimeout(ctx, closeTimeout)
		defer cancel()
		s.closeErr = s.table.CloseCause(ctx, cause)
		if s.record != nil {
			// A result its transport has yet to settle (the answer of a
			// task_wait this close ended, still being written or passed on
			// by a relay) is recorded delivered or not once it is.
			wctx, cancel := context.WithTimeout(ctx, receiptWait)
			s.table.WaitReceipts(wctx)
			cancel()
			s.record.End()
		}
	})
	return s.closeErr
}
