package proc_test

import (
	"testing"

	"github.com/offstage/offstage/proc"
)

// A process with pipes is served inline (one goroutine polls its pipes
// and a pidfd of its leader) while blocking waits are free, and by
// readers and a reaper otherwise; without a pidfd, the inline reaper
// looks for the exit itself. The behaviour tests that use pipes hold
// each way.
func TestTheWaysAProcessIsServed(t *testing.T) {
	behaviours := []struct {
		name string
		test func(*testing.T)
	}{
		{"StopKillsTheWholeGroup", TestStopKillsTheWholeGroup},
		{"LeaderExitingKillsWhatIsLeft", TestLeaderExitingKillsWhatIsLeft},
		{"WaitDoesNotHangOnUnmarkedPipeHolders", TestWaitDoesNotHangOnUnmarkedPipeHolders},
		{"IgnoringSIGTERMGetsSIGKILLAfterGrace", TestIgnoringSIGTERMGetsSIGKILLAfterGrace},
		{"ExitCodesAndSignals", TestExitCodesAndSignals},
		{"OutputComesBackInTheOrderWritten", TestOutputComesBackInTheOrderWritten},
		{"StreamsAreSeparateAndInterleaved", TestStreamsAreSeparateAndInterleaved},
		{"WaitOutputFollowsTheOutput", TestWaitOutputFollowsTheOutput},
		{"CommandWithoutInputHasDevNull", TestCommandWithoutInputHasDevNull},
		{"LastWordsDuringAStopAreRead", TestLastWordsDuringAStopAreRead},
	}
	for _, way := range []struct {
		name          string
		inline, pidfd bool
	}{{"inline", true, true}, {"inline-without-pidfd", true, false}, {"readers-and-reaper", false, true}} {
		t.Run(way.name, func(t *testing.T) {
			restore, before := proc.InlineReaper(way.inline, way.pidfd)
			defer restore()
			for _, b := range behaviours {
				t.Run(b.name, b.test)
			}
			_, after := proc.InlineReaper(way.inline, way.pidfd)
			if served := after - before; (served > 0) != way.inline {
				t.Errorf("%d processes served inline", served)
			}
		})
	}
}

// A terminal, and output copied to a writer, are served by readers and a
// reaper: the inline reaper polls pipes whose output goes nowhere else.
func TestATerminalIsNotServedInline(t *testing.T) {
	restore, before := proc.InlineReaper(true, true)
	defer restore()
	p := mustStart(t, proc.Config{Command: "echo hi", TTY: true})
	mustWait(t, p)
	if _, after := proc.InlineReaper(true, true); after != before {
		t.Errorf("a terminal was served inline")
	}
}
