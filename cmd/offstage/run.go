package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/chanctx"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

const runUsage = `Usage: offstage run [flags] [prompt]

With a prompt, runs one turn (and the turns background work leads to) and
prints the answer; without, starts a conversation. The prompt is the
arguments, or stdin for "offstage run -", or a file (--prompt-file FILE).
Without any, stdin is the conversation, from a terminal or a pipe; a line
of it is at most 1 MiB (a longer one is refused and the conversation
goes on). The model comes from
the flags and the environment: OPENAI_API_KEY and OPENAI_BASE_URL for
OpenAI and compatible servers (Ollama, vLLM, LM Studio, OpenRouter),
ANTHROPIC_API_KEY for Anthropic. The commands it runs do not see
variables that look like secrets (names holding KEY, SECRET, TOKEN,
PASSWORD, PASSWD or CREDENTIAL, URLs with a password); --env-keep NAME
passes one, --env-drop NAME withholds another, and so does
~/.config/offstage/config.yaml (env: {keep: [...], drop: [...]}).

In a conversation: Ctrl-C interrupts the current turn (background work
goes on); a second Ctrl-C or /quit cancels everything, reaps every process
and leaves. Commands: /tasks, /inspect ID, /output ID, /cancel ID,
/wait ID, /help, /quit.

Without a key, --script FILE puts a scripted model in place of the
model: a JSON file {"turns": [TURN, …], "agents": {"PROFILE": [TURN, …]}}
whose turns play in order, one per call to the model (a sub-agent plays
its profile's turns, from the first). A TURN has, all optional, "text",
"thinking", "tool_calls": [{"name": "bash", "input": {"command": "ls"}}],
"expect": a regular expression the last message sent to the model must
match, "delay_ms", "stream_delay_ms", and "stop": end_turn, refusal or
max_tokens. docs/cli.md's "Trying it without a key" has an example.

The session is recorded in the journal (--state-dir, --no-journal; see
offstage tasks), and each shell's output in a log there. --resume
continues the latest recorded conversation, or --resume SESSION that one
(SESSION is an id or its start, which must name one session; an argument
after --resume that starts with a digit and has only digits, a-f and
dashes is taken for SESSION, anything else for the prompt):
its history comes back, results it never saw are delivered once, and the
model is told which tasks a crash or restart orphaned.

When offstage serve runs for the state directory, the session is hosted
there and outlives this run: leaving (end of input, Ctrl-C twice, a
closed terminal, a one-shot run whose --wait runs out) detaches, and its
work goes on; /quit ends it. --attach [SESSION] joins a live session
again; --no-serve keeps the session in this process (docs/serve.md).`

const runExamples = `  OPENAI_API_KEY=sk-... offstage run "run the tests in the background and summarise the README"
  offstage run --provider anthropic --model claude-sonnet-4-5
  offstage run --base-url http://localhost:11434/v1 --model qwen3:8b
  offstage run --script examples/scripted/hello.json "run the tests"     # no key: a scripted model
  offstage run --script examples/demo/demo.json --agents examples/demo/agents "go"
  offstage run --json "list the files" | jq -c .
  offstage run --resume "what came of the tests?"
  offstage run --prompt-file review-request.md
  (echo "review this diff:"; git diff) | offstage run -
`

func runCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return runFace(ctx, localFace(stdin, stdout, stderr), args, stdin, stdout, stderr)
}

// runFace is offstage run on a face: this process's terminal, or, under
// offstage serve, a client's (f.host set: the session is the
// supervisor's, and it outlives the face).
func runFace(ctx context.Context, f *face, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var sf sessionFlags
	sf.register(fs, "")
	asJSON := fs.Bool("json", false, "print the event stream as JSON lines")
	dir := fs.String("dir", "", "working directory of the shells (default: the current one)")
	wait := fs.Duration("wait", 5*time.Minute, "with a prompt: how long to wait for background work after the answer")
	promptFile := fs.String("prompt-file", "", "read the prompt from `FILE` (- for stdin), for a prompt too long for an argument")
	var resume, attach resumeFlag
	fs.Var(&resume, "resume", "continue a recorded conversation: the latest, or --resume SESSION, an id or its start (offstage tasks lists them)")
	fs.Var(&attach, "attach", "join a live session of offstage serve: the latest with no client, or --attach SESSION; it shows what happened meanwhile and delivers the results the model has not seen, once")
	noServe := fs.Bool("no-serve", false, "host the session in this process even when offstage serve runs (it then ends with this process)")
	if f.served() {
		args = absPaths(fs, args, f.abs)
	}
	rest, err := parse(fs, args, runUsage, runExamples, stdout)
	if err != nil {
		return err
	}
	if !f.served() && !*noServe && !sf.journal.noJournal {
		if conn, sock, _, err := dialLive(sf.journal); err == nil {
			return relay(ctx, conn, "run", args, stdin, stdout, stderr)
		} else if stopped := (*serveStopped)(nil); attach.set && errors.As(err, &stopped) {
			return usagef("--attach joins a session of offstage serve, which does not answer at %s (%v)", sock, err)
		} else if attach.set {
			return usagef("--attach joins a session of offstage serve, and none answers at %s (%v): start one with offstage serve (a session whose supervisor stopped cannot be joined again: offstage run --resume continues its conversation)", sock, err)
		} else if !errors.Is(err, errNoServe) {
			fmt.Fprintf(stderr, "offstage: offstage serve does not answer at %s (%v); the session runs in this process.\n", sock, err)
		}
	}
	switch {
	case attach.set && resume.set:
		return usagef("--attach joins a live session and --resume continues a recorded one: give one of them")
	case attach.set && !f.served():
		return usagef("--attach joins a session of offstage serve; drop --no-serve and --no-journal")
	case attach.set:
		if shaping := sessionShaping(fs); len(shaping) > 0 {
			return usagef("--attach joins a session as it was started: %s would not change it (its budgets, sandbox, limits, environment, profiles and directory were set at its start; with --attach, only the model's flags, --script among them, --json, --wait and --prompt-file apply)", strings.Join(shaping, ", "))
		}
	}
	for _, r := range []*resumeFlag{&resume, &attach} {
		if r.set && r.id == "" && len(rest) > 0 && sessionArgPattern.MatchString(rest[0]) {
			r.id, rest = rest[0], rest[1:] // --resume SESSION: it resolves or errors, as --resume=SESSION
		}
	}
	prompt, err := promptOf(rest, *promptFile, stdin)
	if err != nil {
		return err
	}
	sf.readFrom(f.getenv)
	mf, af := sf.model, sf.agents
	var model provider.Model
	if !attach.set || providerName(mf, f.getenv) != "" { // an attach without model flags keeps the session's
		if model, err = newModel(mf, f.getenv); err != nil {
			return err
		}
	}
	policy, err := sf.policy()
	if err != nil {
		return err
	}
	if !f.served() { // the supervisor hid its own at its start; a face's environment is not in its block
		hideWithheld(policy.env, stderr)
	}
	if *dir == "" {
		*dir = f.cwd
	}
	if *dir, err = workDir(*dir); err != nil {
		return err
	}
	pr := pricing{model: mf.describe(f.getenv), prices: policy.prices}
	if f.served() {
		return servedRun(ctx, f, &sf, servedOptions{model: model, policy: policy, dir: *dir, prompt: prompt,
			attach: attach, resume: resume, json: *asJSON, wait: *wait, pricing: pr}, stdin, stdout, stderr)
	}
	// Running a command outside the sandbox: asked in the conversation
	// (its next line answers), or, one-shot, on the terminal.
	asks := make(chan escalation)
	escalate := sf.sandbox.escalate(prompt == "" && f.tty[0] || prompt != "" && f.device)
	if escalate != nil && prompt == "" && sf.sandbox.escalation != "allow" {
		escalate = askInConversation(asks)
	}
	tp, closeTracing, err := openTracing(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeTracing()
	rec, err := openRecorder(ctx, sf.journal, stderr)
	if err != nil {
		return err
	}
	defer rec.closeInto(&err)
	cfg, surface := sf.template(model, af.profiles(*dir, mf, stderr), policy, *dir, rec.journal())
	cfg.Tools.Escalate, cfg.Tracer = escalate, tp
	surface.Name, surface.Logger = "run", warnings(stderr)
	if resume.set {
		if surface.ID, err = rec.resumeID(ctx, resume); err != nil {
			return err
		}
		surface.Resume = true
	}
	// The session outlives a signal: the run closes it, naming why
	// ("run: stopped by SIGTERM (one-shot)"), rather than a cancelled
	// context ending its tasks first.
	// What the signal ends in the run's turns (a foreground command)
	// names the run, as its other tasks do.
	suffix := ""
	if prompt != "" {
		suffix = " (one-shot)"
	}
	ctx, unname := nameStop(ctx, "run: ", suffix)
	defer unname()
	s, err := agent.Open(context.WithoutCancel(ctx), cfg, surface)
	if err != nil {
		return openError(err)
	}
	if res := s.Resumed(); res != nil {
		sayResumed(stderr, s)
		if resume.id == "" && len(rest) > 0 {
			// --resume WORD "prompt": WORD was not taken for a session
			// (see sessionArgPattern); say so before the model gets it.
			fmt.Fprintf(stderr, "offstage: the latest session, since %q is not a session id; the prompt is %q (--resume=SESSION picks another session).\n", rest[0], text.OneLine(prompt, 200))
		}
	}
	rs := &runSession{s: s, face: f}
	if prompt != "" {
		explain := func(ctx context.Context, err error) error { return modelError(ctx, err, model, mf) }
		return oneShot(ctx, rs, explain, prompt, *asJSON, *wait, pr, stdout, stderr)
	}
	return interactive(ctx, rs, stdin, stdout, *asJSON, s.ID(), asks, pr)
}

// sessionArgPattern matches an argument after a bare --resume that is
// taken for a session id or a prefix of one (every id starts with its
// date): one word of digits, hex and dashes, starting with a digit. Any
// other argument is the prompt.
var sessionArgPattern = regexp.MustCompile(`^[0-9][0-9a-f-]*$`)

// taskFlags declares the flags of a session's task table (run, mcp and
// acp): --max-running, how many of its tasks run at once.
func taskFlags(fs *flag.FlagSet) *task.Options {
	o := &task.Options{MaxRunning: 8} // the table's default, said in the help
	fs.Func("max-running", "how many tasks of a session run at once; more wait, queued (default 8)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errors.New("want a whole number, at least 1")
		}
		o.MaxRunning = n
		return nil
	})
	return o
}

// maxPrompt bounds a prompt read from stdin or a file.
const maxPrompt = 16 << 20

// promptOf is the one-shot prompt: the arguments; stdin for a lone "-" or
// --prompt-file -; the file --prompt-file names. "" means a conversation.
func promptOf(args []string, file string, stdin io.Reader) (string, error) {
	var r io.Reader
	from := "stdin"
	switch {
	case file != "" && len(args) > 0:
		return "", usagef("give the prompt as an argument or with --prompt-file, not both (got %q too)", args[0])
	case file == "-" || (file == "" && len(args) == 1 && args[0] == "-"):
		r = stdin
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return "", usagef("cannot read the prompt file: %v", err)
		}
		defer f.Close()
		r, from = f, file
	default:
		return strings.TrimSpace(strings.Join(args, " ")), nil
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPrompt+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("reading the prompt from %s: %w", from, err)
	case len(b) > maxPrompt:
		return "", usagef("the prompt in %s is over %d MiB", from, maxPrompt>>20)
	}
	prompt := strings.TrimSpace(string(b))
	if prompt == "" {
		return "", usagef("the prompt in %s is empty", from)
	}
	return prompt, nil
}

const systemPrompt = `You are a capable agent working in a shell on the user's machine. Long-running work (builds, tests, servers, research by sub-agents) goes to the background so the conversation can go on: results come back to you by themselves when they finish. Do not poll with sleep; keep working, or use one task_wait.`

// modelError turns a failed turn into the CLI's error: a model endpoint
// that cannot be reached, refuses the key, has no such path or no such
// model is a configuration problem (exit 2, one sentence); anything else
// a runtime failure.
func modelError(ctx context.Context, err error, model provider.Model, mf modelFlags) error {
	var se *provider.StatusError
	switch {
	case errors.As(err, &se) && se.Status >= 500:
		// Reached, and failed: not a connection problem, and not ours.
		return fmt.Errorf("%w (see the server's logs)", err)
	case errors.Is(err, provider.ErrUnavailable):
		return usagef("cannot reach the model endpoint: check --base-url or OPENAI_BASE_URL and that the server is running (%v)", err)
	case errors.Is(err, provider.ErrAuth):
		return usagef("the model endpoint refused the key: check OPENAI_API_KEY or ANTHROPIC_API_KEY (%v)", err)
	case errors.Is(err, provider.ErrUnknownModel):
		return usagef("%s (%v)", noSuchModel(ctx, model, mf), err)
	case se != nil && se.Hint != "":
		return usagef("%v", err)
	}
	return err
}

// noSuchModel is the advice for a model the endpoint does not have: pass
// --model, naming the ones it lists at /models, where it does.
func noSuchModel(ctx context.Context, model provider.Model, mf modelFlags) string {
	advice := "the model endpoint has no model of that name: pass --model NAME"
	if mf.model == "" {
		advice = fmt.Sprintf("the model endpoint has no model %q, the default for --model: pass --model NAME", strings.TrimPrefix(mf.describe(os.Getenv), providerName(mf, os.Getenv)+" "))
	}
	lister, ok := model.(interface {
		Models(context.Context) ([]string, error)
	})
	if !ok {
		return advice
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	names, err := lister.Models(ctx)
	if err != nil || len(names) == 0 {
		return advice
	}
	const most = 20
	more := ""
	if len(names) > most {
		more = fmt.Sprintf(" and %d more", len(names)-most)
		names = names[:most]
	}
	return fmt.Sprintf("%s; the server lists %s%s", advice, strings.Join(names, ", "), more)
}

// warnings logs warnings and errors to stderr for a person: no time, no
// level, the message first.
func warnings(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, slog.LevelKey:
				return slog.Attr{}
			case slog.MessageKey:
				return slog.String("offstage", a.Value.String())
			}
			return a
		}}))
}

// openError is the CLI's error for a session that could not be opened:
// each cause (an unknown or running session to resume, a journal that
// cannot be read, bad profiles) is the user's to mend.
func openError(err error) error {
	if errors.Is(err, agent.ErrUnknownSession) {
		return usagef("%v; offstage tasks lists them", err)
	}
	return usagef("%v", err)
}

// oneShot runs the prompt's turn, then keeps the session alive (running
// autonomous turns) until its background work is done, at most wait.
func oneShot(ctx context.Context, rs *runSession, explain func(context.Context, error) error, prompt string, asJSON bool, wait time.Duration, pr pricing, stdout, stderr io.Writer) error {
	s := rs.s
	parent := ctx
	ctx, cancel := rs.face.cancelOnInterrupt(ctx)
	defer cancel()
	out := stderr // progress; the answer goes to stdout
	if asJSON {
		out = stdout
	}
	p := &printer{w: out, json: asJSON, table: s.Table(), usage: s.Usage, pricing: pr, errorsLater: true}
	if rs.served() {
		p.seen = s.Table().Events().Last() // an attach tells what happened before in a few lines (caughtUp)
	}
	p.session(s.ID())
	var (
		mu      sync.Mutex
		inTurn  bool
		lastEnd time.Time
		failed  error
		stopped error // a budget stopped autonomous turns: results wait for a turn a one-shot run never takes
	)
	ended := make(chan struct{}, 1)
	sink := agent.SinkFunc(func(e agent.Event) {
		p.Event(e)
		mu.Lock()
		defer mu.Unlock()
		switch e.Type {
		case agent.TurnStart:
			inTurn = true
		case agent.TurnEnd:
			inTurn, lastEnd = false, time.Now()
			if e.Err != nil && failed == nil {
				failed = e.Err
			}
			select {
			case ended <- struct{}{}:
			default:
			}
		case agent.BudgetStop:
			if stopped == nil {
				stopped = e.Err
			}
		}
	})
	// printAnswers writes the model's answers to stdout: on a terminal
	// the trace on stderr has already shown them; a pipe or file gets
	// them on stdout, alone.
	printAnswers := func() error {
		if asJSON || rs.face.tty[1] && rs.face.tty[2] {
			return nil
		}
		if _, err := fmt.Fprintln(stdout, strings.TrimSpace(strings.Join(p.answers, "\n\n"))); err != nil {
			return fmt.Errorf("the answer could not be written: %w", err) // a script must not take the run for a success
		}
		return nil
	}
	input := make(chan string, 1)
	input <- prompt
	ran := make(chan struct{})
	go func() { s.Run(rs.runContext(ctx), input, sink); close(ran) }()

	select {
	case <-ended:
	case <-ctx.Done():
	}
	deadline := time.Now().Add(wait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		mu.Lock()
		stop := failed != nil // a failed turn ends the session
		quiet := !inTurn && time.Since(lastEnd) > time.Second
		budgetStopped := stopped != nil
		mu.Unlock()
		// Settled first, then whether a turn holds the session: an
		// autonomous turn takes the results (they count as delivered)
		// before its TurnStart reaches the sink, and ending the run then
		// interrupted it.
		done := quiet && settled(s.Table()) && !s.InTurn()
		// Once a budget stopped autonomous turns, no turn will hear the
		// results that wait: the run ends when nothing runs any more.
		if stop || done || (quiet && budgetStopped && running(s.Table()) == 0 && !s.InTurn()) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var unheard []string // results a budget kept from the model
	mu.Lock()
	if stopped != nil {
		for _, i := range s.Table().View("").List() {
			if i.State.Finished() && !i.Delivered {
				unheard = append(unheard, i.ID)
			}
		}
	}
	mu.Unlock()
	close(input)
	why := "run: the one-shot prompt was answered and its background work was done"
	mu.Lock()
	turnFailed := failed != nil
	mu.Unlock()
	interrupted := ctx.Err() != nil && parent.Err() == nil // Ctrl-C, not the end of --wait
	// SIGTERM or SIGHUP (told by the relay under serve): the run did not
	// do what it was asked, and says so in its exit code (an outsider's
	// finding: 0, with no answer).
	stop, signalled := stoppedBy(parent)
	if rs.served() && !turnFailed && !interrupted && (parent.Err() != nil || running(s.Table()) > 0) {
		// Under offstage serve, work that outlasts --wait, and a face that
		// went away, leave the session running: it detaches, nothing ends.
		if parent.Err() != nil { // gone: free it now (see interactive)
			done := make(chan struct{})
			rs.h.finishing(done)
			go func() { <-ran; close(done) }()
			if err := rs.detach(stderr); err != nil || !signalled {
				return err
			}
			return exitStatus(128 + int(stop.sig)) // the detach line, last, said it all
		}
		<-ran // a turn in progress finishes (its Run is the session's)
		// The answers given so far are the run's, as in process: a
		// script's answer=$(offstage run --wait 0 ...) got nothing (an
		// outsider's finding).
		if err := printAnswers(); err != nil {
			rs.detach(stderr)
			return err
		}
		return rs.detach(stderr)
	}
	if n := running(s.Table()); n > 0 {
		what := fmt.Sprintf("--wait %s ran out", wait)
		advice := " (a longer --wait, or a conversation without a prompt, lets them finish)"
		switch {
		case signalled:
			what, advice = stop.Error(), ""
		case ctx.Err() != nil:
			what = "interrupted"
		case turnFailed:
			// Not a wait that ran out: the turn failed (below), and a
			// one-shot run ends with it.
			what, advice = "the turn failed", ""
		}
		why = "run: " + what + " (one-shot)"
		fmt.Fprintf(stderr, "offstage: %s with %s still running: cancelled, and every process reaped%s.\n", what, text.Plural(n, "task"), advice)
	}
	if interrupted {
		s.CancelTurn() // under serve, Run's context is the session's
	}
	cancel()
	<-ran
	mu.Lock()
	if failed != nil {
		why = "run: the one-shot prompt's turn failed"
	}
	mu.Unlock()
	if signalled {
		why = "run: " + stop.Error() + " (one-shot)"
	}
	closeErr := rs.close(why)
	if line := sessionUsageLine(s.Usage(), pr.model, pr.prices); line != "" && !asJSON {
		fmt.Fprintln(stderr, line)
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case signalled && closeErr == nil:
		return stop
	case interrupted && closeErr == nil:
		return errInterrupted
	case failed != nil:
		return explain(ctx, failed)
	case closeErr != nil:
		return closeErr
	}
	if err := printAnswers(); err != nil {
		return err
	}
	if len(unheard) > 0 {
		return fmt.Errorf("%v, so the results of %s reached no turn of the model (offstage run --resume delivers them)", stopped, strings.Join(unheard, ", "))
	}
	return nil
}

// running counts the table's unfinished tasks.
func running(tb *task.Table) int {
	n := 0
	for _, i := range tb.List() {
		if !i.State.Finished() {
			n++
		}
	}
	return n
}

// settled reports whether every task has finished and every top-level
// result has reached the conversation.
func settled(tb *task.Table) bool {
	for _, i := range tb.List() {
		if !i.State.Finished() || (i.Owner == "" && !i.Delivered) {
			return false
		}
	}
	return true
}

// interactive runs a conversation on stdin. From a terminal a command
// runs at once, even while a turn streams (the person sees it); from a
// pipe or a file each line waits until the turns of the messages before
// it have ended, and so does the end of the input, so a script's lines
// run in order and its last message is answered before it leaves.
func interactive(ctx context.Context, rs *runSession, stdin io.Reader, stdout io.Writer, asJSON bool, sessionID string, asks <-chan escalation, pr pricing) error {
	s, f := rs.s, rs.face
	tty := f.tty[1]
	ordered := !f.tty[0]
	p := &printer{w: stdout, json: asJSON, table: s.Table(), width: f.width, live: tty, usage: s.Usage, pricing: pr}
	if rs.served() {
		p.seen = s.Table().Events().Last() // an attach tells what happened before in a few lines (caughtUp)
	}
	resized, stopResized := f.resizes()
	defer stopResized()
	p.session(sessionID)
	p.line("offstage: type a message; /help for commands; Ctrl-C interrupts a turn; /quit leaves.")
	var refuse <-chan escalation // requests no one may answer: refused at once
	switch {
	case rs.served():
		// As in process: asked only where a person types the answer. A
		// piped line must not say yes to a command outside the sandbox.
		if f.tty[0] {
			asks = rs.h.asks
		} else {
			refuse = rs.h.asks
		}
		p.line("offstage: session " + sessionID + " is hosted by offstage serve: leaving (end of input, Ctrl-C twice, a closed terminal) detaches and its work goes on; /quit ends it; offstage run --attach " + sessionID + " joins it again.")
		rs.caughtUp(p.line)
	case sessionID != "":
		p.line("offstage: session " + sessionID + "; offstage run --resume " + sessionID + " continues it later.")
	}
	sigs, stopSigs := f.interrupts()
	defer stopSigs()
	runCtx, stopRun := context.WithCancel(rs.runContext(ctx))
	input := make(chan string, 32)
	// answered receives when the turn of a message sent to input ends
	// (every message gets one turn; autonomous turns do not count, but
	// the one that delivers what an attach found waiting does). At most
	// cap(input)+2 turns end while the loop is not listening (the queued
	// messages, the one in flight, the catch-up), so the send never blocks.
	answered := make(chan struct{}, cap(input)+2)
	pending := 0 // messages sent whose turn has not ended
	var catchUp atomic.Bool
	if rs.served() && resultsWaiting(s.Table()) {
		if err := s.AutonomousBlocked(); err != nil {
			p.line("offstage: no autonomous turn delivers the results that wait (" + err.Error() + "): your next message's turn does.")
		} else {
			pending++ // an attach: the autonomous turn that delivers them comes first
			catchUp.Store(true)
		}
	}
	sink := agent.SinkFunc(func(e agent.Event) {
		p.Event(e)
		if e.Type == agent.TurnEnd && !e.Autonomous || (e.Type == agent.TurnEnd || e.Type == agent.BudgetStop) && catchUp.CompareAndSwap(true, false) {
			answered <- struct{}{}
		}
	})
	ran := make(chan struct{})
	go func() { s.Run(runCtx, input, sink); close(ran) }()
	lines := make(chan inputLine)
	left := make(chan struct{}) // the conversation is over: the reader stops
	defer close(left)
	go func() {
		defer close(lines)
		if err := readLines(stdin, maxLine, lines, left); err != nil {
			p.line("offstage: reading the input: " + err.Error())
		}
	}()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	interrupted := false
	why := "run: the conversation ended" // why the session closes: set where the loop breaks
	quit := !rs.served()                 // the session ends with the loop; under serve only /quit ends it
	var asking []escalation              // requests to run outside the sandbox; the next line answers the first
loop:
	for {
		for len(asking) > 0 && asking[0].ctx.Err() != nil {
			asking = asking[1:] // its turn ended meanwhile
		}
		next := lines
		if ordered && pending > 0 && len(asking) == 0 {
			next = nil // the next line waits for the answer
		}
		select {
		case a := <-refuse:
			a.reply <- errors.New("the conversation's input is not a terminal, so no one can be asked (a piped line must not answer it): run the command in the sandbox, or the user passes --sandbox-escalation allow")
		case a := <-asks:
			if len(asking) == 0 {
				p.line(a.question())
			}
			asking = append(asking, a)
		case in, ok := <-next:
			if !ok {
				why = "run: its input ended (end of file, or the terminal closed)"
				break loop
			}
			if len(asking) > 0 && in.tooLong == 0 {
				a := asking[0]
				asking = asking[1:]
				a.answer(in.text)
				if len(asking) > 0 {
					p.line(asking[0].question())
				}
				continue
			}
			if in.tooLong > 0 {
				p.line(fmt.Sprintf("(refused a line of %d bytes: a message is at most %d bytes (1 MiB); the conversation goes on. offstage run --prompt-file takes a longer prompt)", in.tooLong, maxLine))
				continue
			}
			line := strings.TrimSpace(in.text)
			switch {
			case line == "":
			case strings.HasPrefix(line, "/"):
				if !command(ctx, s, p, line, sigs) {
					why, quit = "run: "+line, true
					break loop
				}
			default:
				interrupted = false
				select {
				case input <- line:
					pending++
				default:
					p.line("(busy: too many messages queued; wait for the current turn)")
				}
			}
		case <-answered:
			pending--
		case <-sigs:
			if interrupted {
				why = "run: Ctrl-C twice"
				break loop
			}
			interrupted = true
			again := "Ctrl-C again or /quit to leave"
			if rs.served() {
				again = "Ctrl-C again to detach, /quit to end the session"
			}
			if s.CancelTurn() {
				p.line("(turn interrupted; background tasks keep running. " + again + ")")
			} else {
				p.line("(" + again + "; background tasks keep running until then)")
			}
		case <-ticker.C:
			if tty {
				p.drawStatus()
			}
		case <-resized: // redraw at the new width at once
			if tty {
				p.drawStatus()
			}
		case <-ctx.Done():
			why = "run: " + context.Cause(ctx).Error()
			break loop
		}
	}
	if !quit {
		close(input) // a turn in progress finishes; nothing ends
		if rs.served() && ctx.Err() != nil {
			// The client is gone: the session is free for the next at
			// once, which waits for this turn to end (hosted.finishing)
			// and is shown its answer; waiting here kept it attached to
			// no one for as long as the turn ran.
			done := make(chan struct{})
			rs.h.finishing(done)
			go func() { <-ran; stopRun(); close(done) }()
			if err := rs.detach(stdout); err != nil {
				return err
			}
			if stop, ok := stoppedBy(ctx); ok {
				return exitStatus(128 + int(stop.sig)) // stopped, not ended: the detach line said where the work went
			}
			return nil
		}
		<-ran
		stopRun()
		return rs.detach(stdout)
	}
	stopRun()
	<-ran
	n := running(s.Table())
	if err := rs.close(why); err != nil {
		return err
	}
	if line := sessionUsageLine(s.Usage(), pr.model, pr.prices); line != "" && !asJSON {
		p.line(line)
	}
	were := "were"
	if n == 1 {
		were = "was"
	}
	p.line(fmt.Sprintf("offstage: bye. %s %s cancelled; every process was reaped.", text.Plural(n, "running task"), were))
	if stop, ok := stoppedBy(ctx); ok {
		return stop // a conversation a signal ended: 143 or 129, as a one-shot run
	}
	return nil
}

// sessionShaping lists the flags set on fs that shape a session at its
// start, which an attach cannot change.
func sessionShaping(fs *flag.FlagSet) []string {
	joins := map[string]bool{"attach": true, "json": true, "wait": true, "prompt-file": true, "state-dir": true,
		"provider": true, "model": true, "base-url": true, "script": true}
	var out []string
	fs.Visit(func(fl *flag.Flag) {
		if !joins[fl.Name] {
			out = append(out, "--"+fl.Name)
		}
	})
	return out
}

// maxLine is the longest line a conversation takes as a message.
const maxLine = 1 << 20

// inputLine is a line of a conversation's input: its text, or, for a line
// over the limit (dropped), its length in bytes.
type inputLine struct {
	text    string
	tooLong int
}

// readLines sends each line of r to lines, without its newline, until the
// end of r or until done is closed (a conversation that ended before its
// input: the reader then stops at its next line instead of waiting
// forever to hand it over). A line over limit bytes is not kept: its
// length is sent instead, and the lines after it go on. It returns r's
// error other than io.EOF.
func readLines(r io.Reader, limit int, lines chan<- inputLine, done <-chan struct{}) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	n := 0 // bytes of the current line so far, kept or not
	for {
		chunk, err := br.ReadSlice('\n')
		whole := err == nil // chunk ends the line
		if whole {
			chunk = chunk[:len(chunk)-1]
		}
		n += len(chunk)
		if n <= limit {
			buf = append(buf, chunk...)
		} else {
			buf = nil
		}
		if whole || (err == io.EOF && n > 0) {
			line := inputLine{text: string(buf)}
			if n > limit {
				line = inputLine{tooLong: n}
			}
			select {
			case lines <- line:
			case <-done:
				return nil
			}
			buf, n = buf[:0], 0
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// command runs a slash command (agent.Session.Command, shared with the
// ACP surface); it returns false for /quit. Ctrl-C stops a /wait.
func command(ctx context.Context, s *agent.Session, p *printer, line string, sigs <-chan os.Signal) bool {
	switch name, _, _ := strings.Cut(line, " "); name {
	case "/quit", "/exit":
		return false
	case "/help":
		s.Command(ctx, line, p.line)
		p.line(fmt.Sprintf(agent.HelpFormat, "/quit", "end the session, cancelling every task and reaping every process"))
		return true
	case "/wait":
		p.line("(Ctrl-C stops waiting)")
		var cancel context.CancelFunc
		ctx, cancel = chanctx.CancelOn(ctx, sigs)
		defer cancel()
	}
	s.Command(ctx, line, p.line)
	return true
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// sayResumed tells what a resumed session brought back.
func sayResumed(w io.Writer, s *agent.Session) {
	if res := s.Resumed(); res != nil {
		fmt.Fprintf(w, "offstage: resuming session %s: %s, %s it has not seen, %s the restart orphaned.\n",
			s.ID(), text.Plural(len(res.History), "message"), text.Plural(len(res.Results), "result"), text.Plural(len(res.Delivered)-len(res.Results), "task"))
	}
}
