package task_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/task"
)

// finished spawns the results named and waits until each has finished,
// in that order.
func finished(t *testing.T, v *task.View, texts ...string) []string {
	t.Helper()
	var out []string
	for _, s := range texts {
		id := mustSpawn(t, v, "shell", returns(s))
		done, _ := v.Done(id)
		<-done
		out = append(out, id)
	}
	return out
}

// Regression: a task_wait answer that never reached the client (it died
// as the answer was written) left its results delivered, and lost.
func TestReceiptReturnMakesResultsUndeliveredAgain(t *testing.T) {
	rec := &changes{}
	run(t, task.Options{Recorder: rec}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		ids := finished(t, top, "a", "b", "c")
		ctx, rc := task.WithReceipt(t.Context())
		got, err := top.Wait(ctx, ids[:2], task.All)
		if err != nil || len(got.Done) != 2 {
			t.Fatalf("Wait() = %v, %v; want a and b done", got, err)
		}
		if info, _ := top.Info(ids[0]); !info.Delivered {
			t.Errorf("held result: Delivered = false, want true until the receipt settles")
		}
		<-top.Ready() // the finishes' token
		if back := rc.Return(); !slices.Equal(back, ids[:2]) {
			t.Errorf("Return() = %v, want %v", back, ids[:2])
		}
		if info, _ := top.Info(ids[0]); info.Delivered {
			t.Errorf("returned result: Delivered = true, want false")
		}
		select {
		case <-top.Ready():
		default:
			t.Errorf("Return did not wake the owner")
		}
		if d := ids2(top.Drain()); !slices.Equal(d, ids) {
			t.Errorf("Drain() after Return = %v, want %v in finish order", d, ids)
		}
		if d := top.Drain(); d != nil {
			t.Errorf("second Drain() = %v, want nil: exactly once", ids2(d))
		}
		if back := rc.Return(); back != nil {
			t.Errorf("second Return() = %v, want nil", back)
		}
	})
	var undelivered []string
	for _, c := range rec.all {
		if c.Type == task.EventUndelivered {
			undelivered = append(undelivered, c.ID)
		}
	}
	if len(undelivered) != 2 {
		t.Errorf("recorded EventUndelivered for %v, want the two results taken back", undelivered)
	}
}

func ids2(rs []task.Result) []string { return ids(rs) }

func TestReceiptCommitKeepsResultsDelivered(t *testing.T) {
	run(t, task.Options{MaxRetained: 1}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		ids := finished(t, top, "a", "b")
		ctx, rc := task.WithReceipt(t.Context())
		if got, err := top.Wait(ctx, ids, task.All); err != nil || len(got.Done) != 2 {
			t.Fatalf("Wait() = %v, %v", got, err)
		}
		// Held results are not evictable, whatever retention says.
		finished(t, top, "c", "d")
		top.Drain()
		for _, id := range ids {
			if _, err := top.Info(id); err != nil {
				t.Errorf("held %s was evicted: %v", id, err)
			}
		}
		rc.Commit()
		if back := rc.Return(); back != nil {
			t.Errorf("Return() after Commit = %v, want nil", back)
		}
		if d := top.Drain(); d != nil {
			t.Errorf("Drain() after Commit = %v, want nil", ids2(d))
		}
		again, err := top.Wait(t.Context(), ids[:1], task.Any)
		if err == nil && len(again.Done) != 0 {
			t.Errorf("Wait() after Commit delivered %v again", ids2(again.Done))
		}
	})
}

// A Wait under a receipt that was settled delivers for good.
func TestReceiptSettledHoldsNothing(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		ids := finished(t, top, "a")
		ctx, rc := task.WithReceipt(t.Context())
		rc.Commit()
		if got, _ := top.Wait(ctx, ids, task.Any); len(got.Done) != 1 {
			t.Fatalf("Wait() delivered %v", ids2(got.Done))
		}
		if back := rc.Return(); back != nil || rc.IDs() != nil {
			t.Errorf("Return() = %v, IDs() = %v; want nothing held", back, rc.IDs())
		}
	})
}

// A result taken back after its owner finished stays undelivered and
// evictable: nothing will deliver it.
func TestReceiptReturnAfterOwnerEnded(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release := make(chan struct{})
		var child string
		var rc *task.Receipt
		agent := mustSpawn(t, top, "agent", func(ctx context.Context, h *task.Handle) (string, error) {
			v := h.View()
			child = mustSpawn(t, v, "shell", returns("x"))
			var wctx context.Context
			wctx, rc = task.WithReceipt(ctx)
			v.Wait(wctx, []string{child}, task.All)
			<-release
			return "", nil
		})
		synctest.Wait()
		close(release)
		done, _ := top.Done(agent)
		<-done
		if back := rc.Return(); len(back) != 1 {
			t.Errorf("Return() = %v, want [%s]", back, child)
		}
		if info, _ := tb.Info(child); info.Delivered {
			t.Errorf("Delivered = true after Return, want false")
		}
	})
}

// WaitReceipts waits while a result is held by a receipt, and not once
// every receipt is settled (committed or returned), nor where none ever
// held one; it gives up when its context ends.
func TestWaitReceiptsWaitsForHeldResults(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		if !tb.WaitReceipts(t.Context()) {
			t.Fatal("WaitReceipts with nothing held = false")
		}
		top := tb.View("")
		ids := finished(t, top, "a", "b")
		ctx1, rc1 := task.WithReceipt(t.Context())
		top.Wait(ctx1, ids[:1], task.All)
		ctx2, rc2 := task.WithReceipt(t.Context())
		top.Wait(ctx2, ids[1:], task.All)
		short, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if tb.WaitReceipts(short) {
			t.Fatal("WaitReceipts with two results held = true before its context ended")
		}
		waited := make(chan bool, 1)
		go func() { waited <- tb.WaitReceipts(t.Context()) }()
		rc1.Commit()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("WaitReceipts returned with one result still held")
		default:
		}
		rc2.Return()
		if !<-waited {
			t.Error("WaitReceipts = false once every receipt was settled")
		}

		// A Wait under a receipt, under way, counts as the hold it will
		// make: no gap between a session's close and its delivery.
		release := make(chan struct{})
		id := mustSpawn(t, top, "shell", gate(release, "c"))
		ctx3, rc3 := task.WithReceipt(t.Context())
		go top.Wait(ctx3, []string{id}, task.All)
		synctest.Wait()
		go func() { waited <- tb.WaitReceipts(t.Context()) }()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("WaitReceipts returned with a Wait under a receipt under way")
		default:
		}
		close(release)
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("WaitReceipts returned with a Wait's delivery held")
		default:
		}
		rc3.Commit()
		if !<-waited {
			t.Error("WaitReceipts = false once the Wait's receipt was committed")
		}
	})
}
