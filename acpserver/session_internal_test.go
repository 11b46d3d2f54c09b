package acpserver

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"unsafe"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/internal/rpcline"
)

// TestSenderJoinsChunks: message or thought chunks queued behind each
// other go out as one chunk of their joined text (up to coalesceBytes),
// each line as appendUpdate writes the SDK's update for it; the lines
// are held while more is queued, and written at once.
func TestSenderJoinsChunks(t *testing.T) {
	var out writes
	_, w := rpcline.New(strings.NewReader(""), &out, rpcline.Options{MaxLine: 1 << 10})
	srv := &server{ctx: context.Background(), out: w, cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	s := blankSession(srv, "s-1")
	long := strings.Repeat("a", coalesceBytes-1)
	s.message("Nothing")
	s.message(" is \u2028")
	s.thought("hmm")
	s.thought("…")
	s.message(" running.")
	s.update(acp.UpdateUserMessageText("x"))
	s.message(long)
	s.message("b")
	s.message("c")
	s.thought("\xff")
	for len(s.queue) > 0 {
		s.writeCoalesced(<-s.queue)
	}
	var want []byte
	for _, u := range []acp.SessionUpdate{
		acp.UpdateAgentMessageText("Nothing is \u2028"),
		acp.UpdateAgentThoughtText("hmm…"),
		acp.UpdateAgentMessageText(" running."),
		acp.UpdateUserMessageText("x"),
		acp.UpdateAgentMessageText(long + "b"),
		acp.UpdateAgentMessageText("c"),
		acp.UpdateAgentThoughtText("\xff"),
	} {
		want, _ = appendUpdate(want, "s-1", &u)
	}
	if d := cmp.Diff([]string{string(want)}, out.each); d != "" {
		t.Errorf("writes (-want +got):\n%s", d)
	}
}

// writes records each write.
type writes struct{ each []string }

func (w *writes) Write(p []byte) (int, error) {
	w.each = append(w.each, string(p))
	return len(p), nil
}

// TestQueueBufferSmall (issue 35, item 6): every session allocates its
// queue's buffer whole when it is made, and what a new session leaves is
// collected during the prompts after it; an entry was a struct of four
// pointers, 8 KB a session.
func TestQueueBufferSmall(t *testing.T) {
	var q queued
	if size := unsafe.Sizeof(q) * queueSize; size > 4<<10 {
		t.Errorf("a session's queue buffer is %d bytes, want at most 4 KB", size)
	}
}
