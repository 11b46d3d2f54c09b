package agent_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// noisyMinute runs an idle session for a (fake) minute while a task
// posts a notice every period, as a noisy watch does, and returns the
// model calls the session made: the notices' cost.
func noisyMinute(t *testing.T, period, noticeSettle time.Duration) int64 {
	var calls int64
	synctest.Test(t, func(t *testing.T) {
		turns := strings.Repeat(`{"text": "noted"},`, 200)
		m, err := scripted.Parse([]byte(`{"turns": [` + strings.TrimSuffix(turns, ",") + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		cfg := agent.Config{Model: m, NoticeSettle: noticeSettle, MaxAutonomousTurns: 1000}
		cfg.Tools.Process.Dir = t.TempDir()
		s, err := agent.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error)
		go func() { s.Run(ctx, nil, agent.Discard); ran <- nil }()
		_, err = s.Table().View("").Spawn(task.Spec{Kind: "watch", Label: "noisy"}, func(ctx context.Context, h *task.Handle) (string, error) {
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					h.Notify("watch", "ERROR again")
				case <-ctx.Done():
					return "", nil
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		calls = s.Usage().Total.ModelCalls
		cancel()
		<-ran
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return calls
}

// Waiting costs nothing: notices alone are coalesced, so a noisy watch
// over a minute costs a model call per NoticeSettle, not one per notice.
func TestNoticesAreCoalesced(t *testing.T) {
	for _, period := range []time.Duration{time.Second, 10 * time.Second} {
		before := noisyMinute(t, period, -1)
		after := noisyMinute(t, period, 0) // the default, 30s
		t.Logf("a notice every %v for a minute: %d model calls without coalescing, %d with", period, before, after)
		if want := int64(time.Minute/period) - 1; after > 2 || before < want {
			t.Errorf("a notice every %v: %d model calls before, %d after; want at least %d before and at most 2 after", period, before, after, want)
		}
	}
}

// TestAPromptIsNotCoalesced: a shell waiting for input is a question to
// answer now. With notices coalesced for a minute, the autonomous turn
// that hears the prompt still starts as soon as the prompt is noticed.
func TestAPromptIsNotCoalesced(t *testing.T) {
	s := newSession(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "printf 'Overwrite? [y/N] '; read answer", "run_in_background": true, "interactive": true}}]},
		{"text": "started"},
		{"expect": "Overwrite", "text": "it asks"}
	]}`, agent.Config{NoticeSettle: time.Minute, Tools: tools.Config{Process: proc.Config{PromptAfter: 200 * time.Millisecond}}})
	rec := &recorder{}
	input := make(chan string)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { s.Run(ctx, input, rec); close(ran) }()
	defer func() { cancel(); <-ran }()
	start := time.Now()
	input <- "go"
	deadline := time.Now().Add(20 * time.Second) // far below the minute the notices would wait
	for rec.count(agent.TurnEnd, true) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no autonomous turn %v after the prompt (notices are coalesced for a minute)", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
