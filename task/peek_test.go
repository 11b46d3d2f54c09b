package task_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/task"
)

// history is a History an agent appends to while Peek snapshots it.
type history struct {
	mu     sync.Mutex
	blocks []task.Block
}

func (h *history) add(b task.Block) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.blocks = append(h.blocks, b)
}

func (h *history) Snapshot() []task.Block {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]task.Block(nil), h.blocks...)
}

type tail string

func (t tail) Tail(n int) string { return fmt.Sprintf("%s (last %d lines)", string(t), n) }

func TestPeekShowsRecentBlocksCut(t *testing.T) {
	for _, tc := range []struct {
		limit int
		want  []task.Block
	}{
		{0, []task.Block{
			{Kind: task.BlockToolCall, Tool: "bash"},
			{Kind: task.BlockToolResult, Tool: "bash", Text: "…(+4 more chars)"},
			{Kind: task.BlockText, Text: "…(+11 more chars)"},
		}},
		{3, []task.Block{
			{Kind: task.BlockToolCall, Tool: "bash"},
			{Kind: task.BlockToolResult, Tool: "bash", Text: "ok\n…(+1 more chars)"},
			{Kind: task.BlockText, Text: "日本語…(+8 more chars)"},
		}},
	} {
		t.Run(fmt.Sprint("limit=", tc.limit), func(t *testing.T) {
			run(t, task.Options{PeekTextLimit: tc.limit}, func(t *testing.T, tb *task.Table) {
				h := &history{}
				h.add(task.Block{Kind: task.BlockUser, Text: "review the diff"})
				h.add(task.Block{Kind: task.BlockToolCall, Tool: "bash"})
				h.add(task.Block{Kind: task.BlockToolResult, Tool: "bash", Text: "ok\n2"})
				h.add(task.Block{Kind: task.BlockText, Text: "日本語のテキストです。"})
				release := make(chan struct{})
				id := mustSpawn(t, tb.View(""), "agent", func(ctx context.Context, hd *task.Handle) (string, error) {
					hd.AttachHistory(h)
					return gate(release, "")(ctx, hd)
				})
				synctest.Wait()
				p, err := tb.View("").Peek(id, 3)
				if err != nil {
					t.Fatal(err)
				}
				if p.TotalBlocks != 4 || p.State != task.Running {
					t.Errorf("Peek = total %d state %v, want 4 running", p.TotalBlocks, p.State)
				}
				if diff := cmp.Diff(tc.want, p.Blocks); diff != "" {
					t.Errorf("Blocks (-want +got):\n%s", diff)
				}
				close(release)
			})
		})
	}
}

func TestPeekDefaultsAndOutput(t *testing.T) {
	run(t, task.Options{PeekBlocks: 2}, func(t *testing.T, tb *task.Table) {
		h := &history{}
		for i := range 5 {
			h.add(task.Block{Kind: task.BlockToolCall, Tool: fmt.Sprint("tool", i)})
		}
		top := tb.View("")
		release := make(chan struct{})
		agent := mustSpawn(t, top, "agent", func(ctx context.Context, hd *task.Handle) (string, error) {
			hd.AttachHistory(h)
			return gate(release, "")(ctx, hd)
		})
		shell := mustSpawn(t, top, "shell", func(ctx context.Context, hd *task.Handle) (string, error) {
			hd.AttachOutput(tail("output"))
			return "", nil
		})
		synctest.Wait()
		p, _ := top.Peek(agent, 0)
		if len(p.Blocks) != 2 || p.Blocks[1].Tool != "tool4" {
			t.Errorf("Peek(n=0) blocks = %v, want the last 2", p.Blocks)
		}
		// A finished task stays peekable, and its output survives.
		p, _ = top.Peek(shell, 7)
		if p.Output != "output (last 7 lines)" || p.State != task.Completed || p.Blocks != nil {
			t.Errorf("Peek(shell) = %+v", p)
		}
		close(release)
	})
}

func TestCutCharsIsUnicodeSafe(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"", 0, ""},
		{"abc", 3, "abc"},
		{"abc", 0, "…(+3 more chars)"},
		{"héllo", 2, "hé…(+3 more chars)"},
		{"🎉🎉🎉", 1, "🎉…(+2 more chars)"},
		{"a\xffb", 2, "a\xff…(+1 more chars)"}, // invalid bytes count as one char each
	} {
		if got := task.CutChars(tc.in, tc.limit); got != tc.want {
			t.Errorf("cutChars(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

func FuzzCutChars(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Add("\xff\xfe日本", 1)
	f.Add(strings.Repeat("ab", 40), 10)
	// The bounds a wrong cut breaks (issue 20: a CutChars that never cut
	// passed): s itself when it has at most limit characters, otherwise
	// exactly its first limit characters and a note with the rest's count.
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = max(limit%64, 0) // a negative limit keeps nothing
		got := task.CutChars(s, limit)
		n := utf8.RuneCountInString(s)
		if n <= limit {
			if got != s {
				t.Fatalf("cutChars(%q, %d) = %q, want it whole (%d chars)", s, limit, got, n)
			}
			return
		}
		i := strings.LastIndex(got, "…(+") // s may hold one too
		if i < 0 {
			t.Fatalf("cutChars(%q, %d) = %q: no note", s, limit, got)
		}
		kept, note := got[:i], got[i+len("…(+"):]
		switch {
		case !strings.HasPrefix(s, kept):
			t.Fatalf("cutChars(%q, %d) = %q: not a prefix plus a note", s, limit, got)
		case utf8.RuneCountInString(kept) != limit:
			t.Fatalf("cutChars(%q, %d) kept %q, %d chars, want %d", s, limit, kept, utf8.RuneCountInString(kept), limit)
		case note != strconv.Itoa(n-limit)+" more chars)":
			t.Fatalf("cutChars(%q, %d) = %q, want a note of %d more chars", s, limit, got, n-limit)
		}
	})
}

func TestEventsRecordEveryChangeInOrder(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		id := mustSpawn(t, top, "shell", func(_ context.Context, h *task.Handle) (string, error) {
			h.Progress(1, "step one")
			h.OutputArrived(42)
			return "", errors.New("exit 1")
		})
		synctest.Wait()
		top.Drain()
		evs, err := tb.Events().After(0)
		if err != nil {
			t.Fatal(err)
		}
		type ev struct {
			Seq   uint64
			Type  string
			Kind  string
			State task.State
			Text  string
		}
		var got []ev
		for _, e := range evs {
			if e.ID != id && e.Type != task.EventIdle {
				t.Errorf("event for %s, want %s", e.ID, id)
			}
			got = append(got, ev{e.Seq, e.Type.String(), e.Kind, e.State, e.Text})
		}
		want := []ev{
			{1, "spawned", "shell", task.Queued, ""},
			{2, "started", "shell", task.Running, ""},
			{3, "progress", "shell", task.Running, "step one"},
			{4, "output", "shell", task.Running, "42"},
			{5, "finished", "shell", task.Failed, "exit 1"},
			{6, "background_idle", "", task.Queued, ""}, // no task: the zero State
			{7, "delivered", "shell", task.Failed, ""},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if last := tb.Events().Last(); last != 7 {
			t.Errorf("Last() = %d, want 7", last)
		}
	})
}

func TestEventLogSaysWhenAReaderFellBehind(t *testing.T) {
	run(t, task.Options{EventLogSize: 4}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release := make(chan struct{})
		for range 3 {
			mustSpawn(t, top, "shell", gate(release, ""))
		}
		synctest.Wait()
		close(release)
		synctest.Wait() // 3 × (spawned, started, finished) + background_idle = 10 events
		evs, err := tb.Events().After(2)
		if !errors.Is(err, task.ErrEventsDropped) || !strings.Contains(err.Error(), "4 events") {
			t.Fatalf("After(2) error = %v, want ErrEventsDropped saying 4 events", err)
		}
		if len(evs) != 4 || evs[0].Seq != 7 || evs[3].Seq != 10 {
			t.Errorf("After(2) = seqs %d..%d (%d), want 7..10", evs[0].Seq, evs[len(evs)-1].Seq, len(evs))
		}
		if evs, err := tb.Events().After(6); err != nil || len(evs) != 4 {
			t.Errorf("After(6) = %d events, %v; want 4, nil", len(evs), err)
		}
		if evs, err := tb.Events().After(10); err != nil || evs != nil {
			t.Errorf("After(10) = %v, %v; want nil, nil", evs, err)
		}
	})
}

func TestEventLogWaitBlocksUntilAnEvent(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		got := make(chan []task.Event)
		go func() {
			evs, _ := tb.Events().Wait(t.Context(), 0)
			got <- evs
		}()
		synctest.Wait()
		mustSpawn(t, tb.View(""), "shell", block)
		if evs := <-got; len(evs) == 0 || evs[0].Type != task.EventSpawned {
			t.Errorf("Wait() = %v, want the spawned event", evs)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		last := tb.Events().Last()
		if _, err := tb.Events().Wait(ctx, last); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait() with nothing new = %v, want DeadlineExceeded", err)
		}
		tb.CancelAll()
	})
}

func TestRetentionEvictsDeliveredTasksOnly(t *testing.T) {
	run(t, task.Options{MaxRetained: 2, RetainFor: time.Hour}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		var all []string
		for range 4 {
			all = append(all, mustSpawn(t, top, "shell", returns("x")))
			synctest.Wait() // finish in id order
		}
		// Undelivered results are never evicted, however many.
		if n := len(tb.List()); n != 4 {
			t.Fatalf("List() has %d tasks before delivery, want 4", n)
		}
		top.Drain()
		// Delivered: only the newest two stay.
		if diff := cmp.Diff(all[2:], infoIDs(tb.List())); diff != "" {
			t.Errorf("List() after Drain (-want +got):\n%s", diff)
		}
		if _, err := tb.Info(all[0]); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Info(evicted) = %v, want ErrNotFound", err)
		}
		// Age: an hour after delivery they go too.
		time.Sleep(time.Hour)
		if n := len(tb.List()); n != 0 {
			t.Errorf("List() an hour after delivery has %d tasks, want 0", n)
		}
		evs, _ := tb.Events().After(0)
		evicted := 0
		for _, e := range evs {
			if e.Type == task.EventEvicted {
				evicted++
			}
		}
		if evicted != 4 {
			t.Errorf("%d evicted events, want 4", evicted)
		}
	})
}

func TestRetentionKeepsTheTableSmallOverManyTasks(t *testing.T) {
	run(t, task.Options{MaxRetained: 3}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		for range 500 {
			mustSpawn(t, top, "shell", returns("x"))
			synctest.Wait()
			top.Drain()
		}
		if got := tb.List(); len(got) != 3 || got[2].ID != "shell:500" {
			t.Errorf("List() = %v, want the last 3", infoIDs(got))
		}
		if n := task.HeldInAll(tb); n > 3+33 {
			t.Errorf("the id-ordered slice holds %d entries, want it compacted", n)
		}
	})
}

// FuzzLookup feeds ids as a model might type them: only an exact id of a
// task in the table is found, and nothing panics.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"shell:1", "agent:2", "shell:01", "shell:+1", ":1", "shell:", "1", " shell:1", "shell:18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		tb := task.New(context.Background(), task.Options{})
		defer tb.Close(context.Background())
		top := tb.View("")
		known := map[string]bool{}
		for _, kind := range []string{"shell", "agent"} {
			id, err := top.Spawn(task.Spec{Kind: kind}, noop)
			if err != nil {
				t.Fatal(err)
			}
			known[id] = true
		}
		_, err := top.Info(id)
		if known[id] != (err == nil) {
			t.Fatalf("Info(%q) = %v, known %v", id, err, known[id])
		}
		if err != nil && !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("Info(%q) = %v, want ErrNotFound", id, err)
		}
	})
}
