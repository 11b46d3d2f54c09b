package agent_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// TestASessionWithoutAModelServesTools: a nil model gives the tools
// without spawn_agent, and a turn says why it cannot run, instead of a
// surface keeping a session of its own to list them.
func TestASessionWithoutAModelServesTools(t *testing.T) {
	s, err := agent.Open(t.Context(), agent.Config{Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}}, agent.Surface{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var names []string
	for _, tl := range s.Tools() {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "bash") || slices.Contains(names, "spawn_agent") {
		t.Errorf("tools = %v, want bash and no spawn_agent", names)
	}
	if _, err := s.Turn(t.Context(), "hi", agent.Discard); !errors.Is(err, agent.ErrNoModel) {
		t.Errorf("Turn() = %v, want ErrNoModel", err)
	}
	defs, err := agent.ToolDefs(agent.Config{Model: modelFunc(func(provider.Request) provider.Response { return text("x") })})
	if err != nil || !slices.ContainsFunc(defs, func(tl *tools.Tool) bool { return tl.Name == "spawn_agent" }) {
		t.Errorf("ToolDefs with a model = %d tools, %v; want spawn_agent among them", len(defs), err)
	}
	if _, err := agent.ToolDefs(agent.Config{Profiles: []agent.Profile{{Name: "a"}, {Name: "a"}}}); err == nil {
		t.Error("ToolDefs with a repeated profile name = nil error")
	}
}

// TestOpenReadsTheProjectInstructions: AGENTS.md of the working directory
// reaches the model's system prompt, unless the surface turns it off.
func TestOpenReadsTheProjectInstructions(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("Always run make lint."), 0o644)
	for _, off := range []bool{false, true} {
		var system string
		model := modelFunc(func(req provider.Request) provider.Response { system = req.System; return text("ok") })
		s, err := agent.Open(t.Context(), agent.Config{Model: model, Tools: tools.Config{Process: proc.Config{Dir: dir}}}, agent.Surface{NoProjectInstructions: off})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Turn(t.Context(), "hi", agent.Discard); err != nil {
			t.Fatal(err)
		}
		s.Close(context.Background())
		if got := strings.Contains(system, "Always run make lint."); got == off {
			t.Errorf("NoProjectInstructions=%v: system prompt has the instructions = %v", off, got)
		}
	}
}

// TestCloseEndsRunAndIsIdempotent: Close stops Run (without its ctx
// ending or its input closing), reaps the tasks and can be called again.
func TestCloseEndsRunAndIsIdempotent(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"turns": [{"tool_calls": [{"name": "bash", "input": {"command": "sleep 60", "run_in_background": true}}]}, {"text": "started"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := agent.Open(t.Context(), agent.Config{Model: m, Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}}, agent.Surface{})
	if err != nil {
		t.Fatal(err)
	}
	input := make(chan string, 1)
	input <- "go"
	ran := make(chan struct{})
	go func() { s.Run(context.Background(), input, agent.Discard); close(ran) }()
	waitFor(t, func() bool { return len(s.Table().List()) == 1 })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if info := s.Table().List()[0]; info.State.String() != "canceled" {
		t.Errorf("the shell is %s after Close, want canceled", info.State)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("a second Close() = %v", err)
	}
}

// TestOpenRefusesAResumeWithoutAJournal: Resume needs somewhere to read.
func TestOpenRefusesAResumeWithoutAJournal(t *testing.T) {
	if _, err := agent.Open(t.Context(), agent.Config{}, agent.Surface{ID: "x", Resume: true}); err == nil {
		t.Error("Open with Resume and no Journal = nil error")
	}
}

// TestAToolWhoseSchemaCannotBeSentIsRefused (issue 21, E4): a schema that
// cannot be marshalled is New's error, not a null schema sent with every
// model request.
func TestAToolWhoseSchemaCannotBeSentIsRefused(t *testing.T) {
	bad := tools.Define("odd", "A tool with a schema JSON cannot carry.", 0, func(context.Context, *task.View, struct {
		N float64 `json:"n"`
	}) (any, error) {
		return nil, nil
	})
	nan := math.NaN()
	bad.InputSchema.Properties["n"].Minimum = &nan
	_, err := agent.New(t.Context(), agent.Config{Model: modelFunc(func(provider.Request) provider.Response { return text("x") }), ExtraTools: []*tools.Tool{bad}})
	if err == nil || !strings.Contains(err.Error(), "tool odd: its input schema cannot be marshalled") {
		t.Errorf("New with an unmarshallable schema = %v", err)
	}
}

// binding is a Journal whose Record asks for the session's table.
type binding struct{ table *task.Table }

func (b *binding) Record(_ context.Context, info agent.SessionInfo, _ *agent.Config) (agent.Record, error) {
	return &bindingRecord{b: b, id: info.ID}, nil
}
func (*binding) Load(context.Context, string) (*agent.Resume, error) {
	return nil, agent.ErrUnknownSession
}
func (*binding) List(context.Context, string, int) ([]agent.SessionSummary, error) {
	return nil, nil
}

type bindingRecord struct {
	b  *binding
	id string
}

func (r *bindingRecord) ID() string              { return r.id }
func (*bindingRecord) Delivered(...string)       {}
func (*bindingRecord) End()                      {}
func (r *bindingRecord) BindTable(t *task.Table) { r.b.table = t }

// TestOpenBindsTheTableToARecordThatAsks: a journal that carries out
// requests made outside the session (an operator's cancel) is given the
// session's table by Open (agent.TableBinder).
func TestOpenBindsTheTableToARecordThatAsks(t *testing.T) {
	j := &binding{}
	s, err := agent.Open(t.Context(), agent.Config{Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}}, agent.Surface{Name: "test", ID: "s1", Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if j.table == nil || j.table != s.Table() {
		t.Errorf("the record was given table %p, want the session's %p", j.table, s.Table())
	}
}

// ending is a Journal whose record says when it ends.
type ending struct{ ended chan struct{} }

func (j *ending) Record(_ context.Context, info agent.SessionInfo, _ *agent.Config) (agent.Record, error) {
	return endingRecord{j}, nil
}
func (*ending) Load(context.Context, string) (*agent.Resume, error) {
	return nil, agent.ErrUnknownSession
}
func (*ending) List(context.Context, string, int) ([]agent.SessionSummary, error) { return nil, nil }

type endingRecord struct{ j *ending }

func (endingRecord) ID() string          { return "s" }
func (endingRecord) Delivered(...string) {}
func (r endingRecord) End()              { close(r.j.ended) }

// TestOpenWithAContextAlreadyEnded: a session opened with a ctx that has
// ended already closes at once, its record ended, and under -race nothing
// of it is read by that Close while Open still sets it (the Close that
// ctx's end runs read the session's record and its stop before Open had
// set them: acpserver met it when a session/new raced the end of its
// connection).
func TestOpenWithAContextAlreadyEnded(t *testing.T) {
	for range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		j := &ending{ended: make(chan struct{})}
		s, err := agent.Open(ctx, agent.Config{Model: modelFunc(func(provider.Request) provider.Response { return text("done") }), Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}}, agent.Surface{Journal: j})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-j.ended:
		case <-time.After(30 * time.Second):
			t.Fatal("the session's record did not end: a session opened with an ended ctx was not closed")
		}
		if _, err := s.Turn(context.Background(), "hello", agent.Discard); !errors.Is(err, agent.ErrClosed) {
			t.Errorf("Turn on a session opened with an ended ctx = %v, want ErrClosed", err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}
}

// TestOpenContextEndedClosesTheSession pins the half-alive session of the
// embedder's trial: once the ctx given to Open ends, the session closes
// (its tasks reaped, its record ended) and a turn fails with ErrClosed
// instead of calling the model and finding every tool broken.
func TestOpenContextEndedClosesTheSession(t *testing.T) {
	called := make(chan struct{}, 1)
	m := modelFunc(func(provider.Request) provider.Response {
		called <- struct{}{}
		return text("done")
	})
	ctx, cancel := context.WithCancel(t.Context())
	j := &ending{ended: make(chan struct{})}
	s, err := agent.Open(ctx, agent.Config{Model: m, Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}}, agent.Surface{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := s.Turn(context.Background(), "hello", agent.Discard); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Turn after Open's ctx ended = %v, want ErrClosed", err)
	}
	select {
	case <-called:
		t.Error("the model was called on a closed session")
	default:
	}
	select {
	case <-j.ended: // the session closed by itself: its record ended
	case <-time.After(30 * time.Second):
		t.Fatal("the session's record did not end after Open's ctx ended")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close() = %v", err)
	}
}
