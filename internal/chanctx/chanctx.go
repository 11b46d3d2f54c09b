// Package chanctx turns a channel into a context's cancellation: a signal,
// a session/cancel notification or a closed "done" channel cancels what
// waits on the context.
package chanctx

import "context"

// CancelOn returns a copy of ctx that is cancelled as soon as ch delivers
// a value or is closed, or when cancel is called, whichever comes first.
// A value it receives is consumed. Its goroutine ends with the returned
// context: call cancel when done with it.
func CancelOn[T any](ctx context.Context, ch <-chan T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
