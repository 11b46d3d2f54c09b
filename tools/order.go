package tools

import (
	"context"
	"sync"
)

// A model's parallel calls run at once, so without more their tasks
// would take their ids in whichever order their goroutines reached the
// table: three bash calls in one turn made the third one shell:1. A
// surface that runs a turn's calls at once chains the calls that may
// start a task (Tool.StartsTasks) with InCallOrder; each of them, just
// before it starts its task, waits for the one before it to have started
// its own or returned. Only the start is ordered: a call waits for
// nothing but the start of the one before, never for its end.

type orderKey struct{}

// order is one call's place in the chain.
type order struct {
	prev <-chan struct{} // closed when the call before has started its task or returned; nil for the first
	mine chan struct{}   // closed when this one has
	once sync.Once
}

func (o *order) started() { o.once.Do(func() { close(o.mine) }) }

// InCallOrder returns the context for a call that may start a task, the
// channel the next such call passes as prev, and done, which the caller
// calls once the call has returned (calling it again does nothing). prev
// is nil for a turn's first call.
func InCallOrder(ctx context.Context, prev <-chan struct{}) (_ context.Context, next <-chan struct{}, done func()) {
	o := &order{prev: prev, mine: make(chan struct{})}
	return context.WithValue(ctx, orderKey{}, o), o.mine, o.started
}

// TurnToStart waits until the calls before this one (see InCallOrder)
// have started their tasks or returned, or ctx ends, and returns the
// function to call once this call has started its own (or given up). A
// context without a place in a chain starts at once.
func TurnToStart(ctx context.Context) (started func()) {
	o, _ := ctx.Value(orderKey{}).(*order)
	if o == nil {
		return func() {}
	}
	if o.prev != nil {
		select {
		case <-o.prev:
		case <-ctx.Done():
		}
	}
	return o.started
}
