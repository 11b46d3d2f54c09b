package journal_test

import (
	"context"
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// The journal keeps what an agent task and its session spent, and a
// resumed session goes on from its totals: in SQLite and PostgreSQL.
func TestAResumedSessionKeepsItsTokens(t *testing.T) { suite(t, testResumedTokens) }

func testResumedTokens(t *testing.T, connect func(*testing.T) *journal.DB) {
	dir, work := t.TempDir(), t.TempDir()
	model := scriptedModel(t, `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "helper", "prompt": "look"}}], "usage": {"input_tokens": 1000, "output_tokens": 10, "cached_input_tokens": 900}},
		{"text": "It looked.", "usage": {"input_tokens": 1200, "output_tokens": 20}},
		{"text": "Again.", "usage": {"input_tokens": 1300, "output_tokens": 30}}
	], "agents": {"helper": [
		{"tool_calls": [{"name": "task_list", "input": {}}], "usage": {"input_tokens": 200, "output_tokens": 5}},
		{"text": "Nothing here.", "usage": {"input_tokens": 250, "output_tokens": 7, "cached_input_tokens": 200}}
	]}}`)
	cfg := agent.Config{Model: model, Profiles: []agent.Profile{{Name: "helper", Description: "h", Tools: []string{"task_list"}}},
		Tools: tools.Config{Process: proc.Config{Dir: work}}}
	call := func(in, out, cached int64) task.Usage {
		return task.Usage{InputTokens: in, OutputTokens: out, CachedInputTokens: cached, ModelCalls: 1}
	}
	helper := call(200, 5, 0).Add(call(250, 7, 200))
	first := call(1000, 10, 900).Add(call(1200, 20, 0)).Add(helper)

	store := connect(t)
	rec := recorderOn(t, store, dir)
	s, err := agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Turn(t.Context(), "look", agent.Discard); err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := store.Task(t.Context(), id, "agent:1")
	if err != nil || got.Usage != helper {
		t.Errorf("agent:1 in the journal: %+v, %v; want %+v", got.Usage, err, helper)
	}
	sess, err := store.Session(t.Context(), id)
	if err != nil || sess.Usage != first {
		t.Errorf("the session in the journal: %+v, %v; want %+v", sess.Usage, err, first)
	}

	if err := rec.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	store = connect(t)
	rec = recorderOn(t, store, dir)
	defer rec.Close(context.Background())
	s, err = agent.Open(t.Context(), cfg, agent.Surface{Name: "embed", Journal: rec, ID: id, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if got := s.Usage().Total; got != first {
		t.Errorf("resumed session's Usage = %+v, want what it had spent, %+v", got, first)
	}
	if _, err := s.Turn(t.Context(), "again", agent.Discard); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := first.Add(call(1300, 30, 0))
	if sess, err := store.Session(t.Context(), id); err != nil || sess.Usage != want || s.Usage().Total != want {
		t.Errorf("after a resumed turn: journal %+v, session %+v, %v; want %+v", sess.Usage, s.Usage().Total, err, want)
	}
}
