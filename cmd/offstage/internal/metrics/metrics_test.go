package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/cmd/offstage/internal/metrics"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// passOn is the journal's recorder: it must keep getting every change,
// and its backpressure, through the tally.
type passOn struct {
	changes []task.EventType
	paced   int
}

func (p *passOn) Record(c *task.Change) { p.changes = append(p.changes, c.Type) }
func (p *passOn) Pace()                 { p.paced++ }

// open gives a table recording through m's tally into next, as Wrap
// hooks a session up.
func open(t *testing.T, m *metrics.Metrics, next task.Recorder, opts task.Options) *task.Table {
	t.Helper()
	var cfg agent.Config
	cfg.Tasks = opts
	cfg.Tasks.Recorder = next
	if _, err := m.Wrap(nil).Record(t.Context(), agent.SessionInfo{ID: "s"}, &cfg); err != nil {
		t.Fatal(err)
	}
	return task.New(context.Background(), cfg.Tasks)
}

// TestTasksAreCountedByKindAndState: queued and running gauges follow the
// table, finishes are counted by state, durations observed, notices by a
// bounded kind; the next recorder sees every change.
func TestTasksAreCountedByKindAndState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := metrics.New(metrics.Sources{})
		next := &passOn{}
		tb := open(t, m, next, task.Options{MaxRunning: 1})
		v := tb.View("")
		release := make(chan struct{})
		v.Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, h *task.Handle) (string, error) {
			h.Notify("watch", "a line")
			h.Notify("made-up-kind-"+h.ID(), "x") // an unbounded kind is "other"
			<-release
			time.Sleep(2 * time.Second)
			return "", nil
		})
		v.Spawn(task.Spec{Kind: "some-embedder-kind"}, func(ctx context.Context, h *task.Handle) (string, error) {
			return "", errors.New("boom")
		})
		synctest.Wait()
		check(t, m, map[string]float64{
			`offstage_tasks_running{kind="shell"}`:       1,
			`offstage_tasks_queued{kind="other"}`:        1,
			`offstage_tasks_started_total{kind="shell"}`: 1,
			`offstage_task_notices_total{kind="watch"}`:  1,
			`offstage_task_notices_total{kind="other"}`:  1,
		})
		close(release)
		synctest.Wait()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		check(t, m, map[string]float64{
			`offstage_tasks_running{kind="shell"}`:                                        0,
			`offstage_tasks_queued{kind="other"}`:                                         0,
			`offstage_tasks_started_total{kind="other"}`:                                  1,
			`offstage_tasks_finished_total{kind="shell",reason="self",state="completed"}`: 1,
			`offstage_tasks_finished_total{kind="other",reason="self",state="failed"}`:    1,
		})
		if n := testutil.CollectAndCount(m.Registry(), "offstage_task_duration_seconds"); n != 2 {
			t.Errorf("duration series = %d, want 2 (shell, other)", n)
		}
		if next.paced != 2 || len(next.changes) < 6 {
			t.Errorf("the next recorder was paced %d times and got %v, want 2 paces and every change", next.paced, next.changes)
		}
		tb.Close(context.Background())
	})
}

// TestJournalAndSessionsAreReadAtScrape: the sources are read when
// scraped, not copied at start.
func TestJournalAndSessionsAreReadAtScrape(t *testing.T) {
	st := journal.Stats{Queued: 7, WriteErrors: 3, Lost: 2}
	sessions := 4
	m := metrics.New(metrics.Sources{Sessions: func() int { return sessions }, Journal: func() journal.Stats { return st }})
	check(t, m, map[string]float64{
		"offstage_journal_queue_records":      7,
		"offstage_journal_write_errors_total": 3,
		"offstage_journal_records_lost_total": 2,
		"offstage_sessions_open":              4,
	})
	st.Queued, sessions = 0, 1
	check(t, m, map[string]float64{"offstage_journal_queue_records": 0, "offstage_sessions_open": 1})
}

// check compares samples of m (name{labels} as the text format writes
// them, labels in order) with want.
func check(t *testing.T, m *metrics.Metrics, want map[string]float64) {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case s.Counter != nil:
				got[name] = s.GetCounter().GetValue()
			case s.Gauge != nil:
				got[name] = s.GetGauge().GetValue()
			}
		}
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
}

// TestFinishesAreCountedByWhoEndedThem: the reason label is who ended a
// task (task.Enders), and anything else a cause names is "other", so the
// label stays bounded (issue 38).
func TestFinishesAreCountedByWhoEndedThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := metrics.New(metrics.Sources{})
		tb := open(t, m, nil, task.Options{})
		v := tb.View("")
		block := func(ctx context.Context, _ *task.Handle) (string, error) { <-ctx.Done(); return "", nil }
		byModel, _ := v.Spawn(task.Spec{Kind: "shell"}, block)
		madeUp, _ := v.Spawn(task.Spec{Kind: "shell"}, block)
		synctest.Wait()
		v.Cancel(byModel)
		v.CancelCause(madeUp, task.Ended("budget-of-"+madeUp, "a name outside task.Enders"))
		synctest.Wait()
		check(t, m, map[string]float64{
			`offstage_tasks_finished_total{kind="shell",reason="model",state="canceled"}`: 1,
			`offstage_tasks_finished_total{kind="shell",reason="other",state="canceled"}`: 1,
		})
		tb.Close(context.Background())
	})
}

// TestTokensAreCountedByKindAndProfile: a session's model calls count
// under their profile, the top level as "top", a profile the session was
// not configured with as "other" (labels stay bounded).
func TestTokensAreCountedByKindAndProfile(t *testing.T) {
	m := metrics.New(metrics.Sources{})
	cfg := agent.Config{Profiles: []agent.Profile{{Name: "reviewer"}}}
	if _, err := m.Wrap(nil).Record(t.Context(), agent.SessionInfo{ID: "s"}, &cfg); err != nil {
		t.Fatal(err)
	}
	call := task.Usage{InputTokens: 100, CachedInputTokens: 60, OutputTokens: 10, ModelCalls: 1}
	cfg.OnModelCall(agent.ModelCall{Usage: call})
	cfg.OnModelCall(agent.ModelCall{Agent: "agent:1", Profile: "reviewer", Usage: call})
	cfg.OnModelCall(agent.ModelCall{Agent: "agent:2", Profile: "reviewer", Usage: call})
	cfg.OnModelCall(agent.ModelCall{Agent: "agent:3", Profile: "made-up", Usage: call})
	check(t, m, map[string]float64{
		`offstage_model_calls_total{profile="top"}`:                           1,
		`offstage_model_calls_total{profile="reviewer"}`:                      2,
		`offstage_model_calls_total{profile="other"}`:                         1,
		`offstage_model_tokens_total{kind="input",profile="reviewer"}`:        200,
		`offstage_model_tokens_total{kind="cached_input",profile="reviewer"}`: 120,
		`offstage_model_tokens_total{kind="output",profile="top"}`:            10,
	})
}
