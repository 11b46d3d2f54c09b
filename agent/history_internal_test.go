package agent

import (
	"strings"
	"testing"

	"github.com/offstage/offstage/provider"
)

func textMsg(role provider.Role, text string) provider.Message {
	return provider.Message{Role: role, Content: []provider.Block{{Type: provider.Text, Text: text}}}
}

// TestHistoryViewIsFlatAndStaysAsItWas (issue 35, item 6): each model
// call copied the whole conversation, so a prompt late in a long one
// cost 1.7-2.4x one in a new session and allocated 10x more. The model
// gets a view that shares the history's arrays, allocates nothing, and
// does not change as the history is appended to, merged into, or cut by
// its guard.
func TestHistoryViewIsFlatAndStaysAsItWas(t *testing.T) {
	long := strings.Repeat("x", 400)
	h := newHistory(3000)
	for range 3 {
		h.append(textMsg(provider.User, long))
		h.append(textMsg(provider.Assistant, long))
	}
	if n := testing.AllocsPerRun(10, func() { h.view() }); n != 0 {
		t.Errorf("view allocates %v times, want 0", n)
	}
	v := h.view()
	want := h.messages()
	h.append(textMsg(provider.Assistant, "merged into the last message")) // same role: merged
	h.append(textMsg(provider.User, long))
	for range 6 { // over the budget: the guard cuts the oldest texts
		h.append(textMsg(provider.Assistant, long))
		h.append(textMsg(provider.User, long))
	}
	if got := h.messages(); !strings.HasPrefix(got[0].Content[0].Text, "[cut") {
		t.Fatalf("the guard cut nothing: %.40q", got[0].Content[0].Text)
	}
	if len(v) != len(want) {
		t.Fatalf("the view has %d messages, want %d", len(v), len(want))
	}
	for i := range want {
		if len(v[i].Content) != len(want[i].Content) || v[i].Content[0].Text != want[i].Content[0].Text {
			t.Errorf("message %d of the view changed: %d blocks, %.40q", i, len(v[i].Content), v[i].Content[0].Text)
		}
	}
}
