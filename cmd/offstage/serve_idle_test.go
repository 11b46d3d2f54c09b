package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

// noModel is a model the idle policy's sessions never call.
type noModel struct{}

func (noModel) Generate(context.Context, provider.Request, func(provider.Event)) (provider.Response, error) {
	return provider.Response{}, errors.New("not called")
}

// TestIdlePolicyClosesOnlySessionsWithNoClientAndNoWork: under the
// policy's clock (synctest), a session with no client and no unfinished
// task closes after --idle (within two checks); one with a client, or
// with a task running, does not, and the clock of the busy one starts
// when its task ends (issue 38 item 4's idle policy, under serve).
func TestIdlePolicyClosesOnlySessionsWithNoClientAndNoWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Hour
		sup := newSupervisor(nil, nil, idle, slog.New(slog.DiscardHandler), func(error) {})
		host := func(name string, attached bool) *hosted {
			s, err := agent.New(context.Background(), agent.Config{Model: noModel{}})
			if err != nil {
				t.Fatal(err)
			}
			h := &hosted{s: s, started: time.Now(), attached: attached}
			sup.sessions[name] = h
			return h
		}
		quiet, attached, busy := host("quiet", false), host("attached", true), host("busy", false)
		release := make(chan struct{})
		if _, err := busy.s.Table().View("").Spawn(task.Spec{Kind: "work"}, func(ctx context.Context, _ *task.Handle) (string, error) {
			<-release
			return "done", nil
		}); err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		looped := make(chan struct{})
		go func() { defer close(looped); sup.idleLoop(ctx) }()
		live := func() map[string]bool {
			synctest.Wait()
			sup.mu.Lock()
			defer sup.mu.Unlock()
			m := map[string]bool{}
			for k := range sup.sessions {
				m[k] = true
			}
			return m
		}

		time.Sleep(idle - time.Minute)
		if got := live(); !got["quiet"] || !got["attached"] || !got["busy"] {
			t.Fatalf("before --idle: live %v; want all three", got)
		}
		time.Sleep(3 * time.Minute)
		if got := live(); got["quiet"] || !got["attached"] || !got["busy"] {
			t.Fatalf("after --idle: live %v; want quiet closed, attached and busy kept", got)
		}
		if _, err := quiet.s.Turn(context.Background(), "hello", agent.Discard); !errors.Is(err, task.ErrClosed) && !errors.Is(err, agent.ErrClosed) {
			t.Errorf("a turn on the idle-closed session: %v; want it closed", err)
		}
		close(release) // the busy session's work ends: its idle clock starts
		time.Sleep(idle - time.Minute)
		if got := live(); !got["busy"] {
			t.Fatalf("%s after its work ended: live %v; want busy kept", idle-time.Minute, got)
		}
		time.Sleep(3 * time.Minute)
		if got := live(); got["busy"] || !got["attached"] {
			t.Fatalf("after --idle without work: live %v; want busy closed, attached kept", got)
		}
		stop()
		<-looped
		attached.s.Close(context.Background())
		busy.s.Close(context.Background())
		quiet.s.Close(context.Background())
	})
}
