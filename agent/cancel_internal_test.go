package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/offstage/offstage/provider/scripted"
)

// TestACancelBeforeTheTurnStartsIsItsTurns: a cancel that comes after Run
// took a line from its input but before that line's turn started cancels
// that turn (ACP's session/cancel, run's Ctrl-C); it found no turn and
// was lost, and the turn ran to its end. Without a line taken, a cancel
// still finds nothing, and the next turn runs.
func TestACancelBeforeTheTurnStartsIsItsTurns(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"turns": [{"text": "answered"}, {"text": "answered"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), Config{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	}()
	s.take() // as Run does on receiving a line
	if !s.CancelTurn() {
		t.Fatal("CancelTurn() = false for a taken line whose turn has not started")
	}
	if _, err := s.Turn(t.Context(), "the prompt", SinkFunc(func(Event) {})); !errors.Is(err, ErrTurnCanceled) {
		t.Errorf("the turn of a line cancelled before it started: %v, want ErrTurnCanceled", err)
	}
	if s.CancelTurn() {
		t.Error("CancelTurn() = true between turns, with no line taken")
	}
	if text, err := s.Turn(t.Context(), "the next", SinkFunc(func(Event) {})); err != nil || text != "answered" {
		t.Errorf("the next turn: %q, %v; a cancel must not carry over", text, err)
	}
}
