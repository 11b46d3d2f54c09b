package chanctx_test

import (
	"context"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/internal/chanctx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCancelOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan int, 1)
		ctx, cancel := chanctx.CancelOn(context.Background(), ch)
		defer cancel()
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatal("cancelled before the channel delivered")
		}
		ch <- 1
		synctest.Wait()
		if ctx.Err() == nil {
			t.Fatal("not cancelled after the channel delivered")
		}
		if len(ch) != 0 {
			t.Error("the value was not consumed")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		done := make(chan struct{})
		ctx, cancel := chanctx.CancelOn(context.Background(), done)
		defer cancel()
		close(done)
		synctest.Wait()
		if ctx.Err() == nil {
			t.Fatal("not cancelled after the channel closed")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		parent, stop := context.WithCancel(context.Background())
		ctx, cancel := chanctx.CancelOn(parent, make(chan int))
		defer cancel()
		stop()
		synctest.Wait() // the goroutine ended with the context: synctest would report it blocked otherwise
		if ctx.Err() == nil {
			t.Fatal("not cancelled with its parent")
		}
	})
}
