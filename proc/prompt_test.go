package proc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/offstage/offstage/proc"
)

func TestLooksLikePrompt(t *testing.T) {
	for line, want := range map[string]bool{
		"Overwrite? [y/N] ":                        true,
		"Password: ":                               true,
		"[sudo] password for ana: ":                true,
		"Enter passphrase for key '/k/id_ed25519'": true,
		"Are you sure you want to continue connecting (yes/no/[fingerprint])? ": true,
		"Proceed (y/n)":                true,
		"Continue [Y/n/q]":             true,
		"Name: ":                       true,
		">>> ":                         true,
		"> ":                           true,
		"":                             false,
		"   ":                          false,
		"working":                      false,
		"Downloading... 45%":           false,
		"[=====>":                      false,
		"step 3 ->":                    false,
		"a => b =>":                    false,
		"$ ":                           false,
		"Compiling foo (3/10)":         false,
		"two\nlines?":                  false,
		strings.Repeat("x", 200) + "?": false,
	} {
		if got := proc.LooksLikePrompt(line); got != want {
			t.Errorf("LooksLikePrompt(%q) = %v, want %v", line, got, want)
		}
	}
}

func FuzzLooksLikePrompt(f *testing.F) {
	for _, s := range []string{"Overwrite? [y/N] ", "Password:", "[(/)]", "=>", "\xff?"} {
		f.Add(s)
	}
	// Invariants a wrong rule breaks (issue 20: one that always said false
	// passed): after any short single line, known prompts match; with a
	// newline after them, past 200 characters, or ending in "." or "=>"
	// without mentioning a password, nothing does.
	known := []string{"Overwrite? [y/N] ", "Password: ", "Continue (yes/no)? ", "Name: ", ">>> ", "Proceed (y/n)"}
	f.Fuzz(func(t *testing.T, s string) {
		got := proc.LooksLikePrompt(s)
		if got && (strings.TrimSpace(s) == "" || strings.Contains(s, "\n") || utf8.RuneCountInString(s) > 10000) {
			t.Errorf("LooksLikePrompt(%q) = true", s)
		}
		line := strings.ReplaceAll(s, "\n", " ")
		for _, p := range known {
			if utf8.RuneCountInString(line) <= 150 && !proc.LooksLikePrompt(line+p) {
				t.Errorf("LooksLikePrompt(%q) = false, want true (a known prompt)", line+p)
			}
			if proc.LooksLikePrompt(line + p + "\n") {
				t.Errorf("LooksLikePrompt(%q) = true for a finished line", line+p+"\n")
			}
			if long := strings.Repeat("x", 201) + line + p; proc.LooksLikePrompt(long) {
				t.Errorf("LooksLikePrompt(%q) = true for a line over 200 characters", long)
			}
		}
		lower := strings.ToLower(line)
		if strings.Contains(lower, "password") || strings.Contains(lower, "passphrase") {
			return
		}
		for _, end := range []string{" done.", " =>", " ->"} {
			if proc.LooksLikePrompt(line + end) {
				t.Errorf("LooksLikePrompt(%q) = true, want false (no question)", line+end)
			}
		}
	})
}

// prompts records OnPrompt calls.
type prompts struct {
	mu    sync.Mutex
	lines []string
}

func (r *prompts) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, s)
}

func (r *prompts) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

func startPrompting(t *testing.T, command string, rec *prompts) *proc.Process {
	t.Helper()
	p, err := proc.Start(t.Context(), proc.Config{Command: command, Stdin: true, PromptAfter: 200 * time.Millisecond, OnPrompt: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(time.Second)
		p.Wait(context.Background())
	})
	return p
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAPromptIsNoticedOncePerStallAndAnswered(t *testing.T) {
	rec := &prompts{}
	p := startPrompting(t, `printf 'Overwrite? [y/N] '; read a; echo "got $a"; printf 'Password: '; read b; echo "second $b"`, rec)
	waitUntil(t, "the first prompt is noticed", func() bool { return len(rec.get()) == 1 })
	if got, ok := p.WaitingForInput(); !ok || got != "Overwrite? [y/N]" {
		t.Errorf("WaitingForInput() = %q, %v, want the prompt", got, ok)
	}
	time.Sleep(600 * time.Millisecond) // the same stall goes on: no second call
	if got := rec.get(); len(got) != 1 || got[0] != "Overwrite? [y/N]" {
		t.Fatalf("OnPrompt calls = %q, want one with the prompt", got)
	}
	if _, err := p.Input(t.Context(), []byte("y\n")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the second prompt is noticed", func() bool { return len(rec.get()) == 2 })
	if got := rec.get()[1]; got != "Password:" {
		t.Errorf("second prompt = %q", got)
	}
	if _, err := p.Input(t.Context(), []byte("s3cret\n")); err != nil {
		t.Fatal(err)
	}
	e, err := p.Wait(t.Context())
	if err != nil || e.Code != 0 {
		t.Fatalf("Wait() = %+v, %v", e, err)
	}
	if _, ok := p.WaitingForInput(); ok {
		t.Error("a finished process still waits for input")
	}
	if out := p.Tail(10); !strings.Contains(out, "got y") || !strings.Contains(out, "second s3cret") {
		t.Errorf("output %q does not show both answers", out)
	}
}

func TestOutputResumingClearsTheMark(t *testing.T) {
	rec := &prompts{}
	p := startPrompting(t, `printf 'Continue? '; sleep 0.6; echo; echo resumed; sleep 30`, rec)
	waitUntil(t, "the prompt is noticed", func() bool { _, ok := p.WaitingForInput(); return ok })
	waitUntil(t, "the output resumes", func() bool { return strings.Contains(p.Tail(5), "resumed") })
	if got, ok := p.WaitingForInput(); ok {
		t.Errorf("WaitingForInput() = %q after output resumed", got)
	}
}

func TestAPauseWithoutAPromptIsNotNoticed(t *testing.T) {
	for _, command := range []string{
		`printf 'working'; sleep 0.8; echo ' done'`,      // unfinished line, not a question
		`echo 'step 1:'; sleep 0.8; echo 'step 2'`,       // a finished line
		`printf 'progress [=====>'; sleep 0.8; echo ']'`, // a progress bar
		`sleep 0.8`, // no output at all
	} {
		rec := &prompts{}
		p := startPrompting(t, command, rec)
		if _, err := p.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := rec.get(); len(got) != 0 {
			t.Errorf("%s: OnPrompt calls %q, want none", command, got)
		}
	}
}

func TestPromptWatchCanBeTurnedOff(t *testing.T) {
	rec := &prompts{}
	p, err := proc.Start(t.Context(), proc.Config{Command: `printf 'Sure? '; sleep 0.5`, PromptAfter: -1, OnPrompt: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	p.Wait(t.Context())
	if got := rec.get(); len(got) != 0 {
		t.Errorf("OnPrompt calls %q with the watch off", got)
	}
}

// TestNoPromptWatchBeforePromptAfter: a command has no goroutine
// watching for prompts until it has run for PromptAfter (most commands
// end sooner, and starting one cost a start about 1% of its CPU); then
// the watch notices a prompt as before (TestAPromptIsNoticedOncePerStallAndAnswered).
func TestNoPromptWatchBeforePromptAfter(t *testing.T) {
	p, err := proc.Start(t.Context(), proc.Config{Command: "exec sleep 1000", PromptAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(t.Context())
	defer p.Stop(0)
	p.Done() // a look: the process is served by a goroutine of its own from now
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	// Its goroutines: the one that serves its pipe and reaps it (or a
	// reader of its pipe and the reaper), and none watching for prompts.
	n := strings.Count(stacks, "created by github.com/offstage/offstage/proc.(*Process).watch ") +
		strings.Count(stacks, "created by github.com/offstage/offstage/proc.(*Process).serveSoon ")
	if n < 1 || n > 2 || strings.Contains(stacks, "watchPrompts") {
		t.Errorf("the process has %d goroutines an hour before its first look for a prompt, want 1 serving it (or a reader and the reaper), none watching:\n%s", n, stacks)
	}
}

// TestAQuietCommandHasNoPromptWatch: a command without an input that has
// been quiet on no question for PromptAfter has no goroutine watching it
// (1,000 such shells, 4 s after their start, were 1,000 goroutines and
// wake-ups: the IdleCPU benchmark); its next output puts the watch back,
// which notices the question that output ends on.
func TestAQuietCommandHasNoPromptWatch(t *testing.T) {
	rec := &prompts{}
	gate := filepath.Join(t.TempDir(), "go")
	p, err := proc.Start(t.Context(), proc.Config{
		Command:     `echo starting; while [ ! -e "$GO" ]; do sleep 0.02; done; printf 'Continue? [y/N] '; exec sleep 1000`,
		Env:         append(os.Environ(), "GO="+gate),
		PromptAfter: 100 * time.Millisecond, OnPrompt: rec.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(context.Background())
	defer p.Stop(0)
	waitUntil(t, "the watch leaves the quiet command stalled", func() bool { return proc.PromptStalled(p) })
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "watchPrompts") {
		t.Errorf("a goroutine watches the quiet command for prompts:\n%s", stacks)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the question is noticed", func() bool { return len(rec.get()) == 1 })
	if got := rec.get()[0]; got != "Continue? [y/N]" {
		t.Errorf("prompt = %q", got)
	}
	if prompt, ok := p.WaitingForInput(); !ok || prompt != "Continue? [y/N]" {
		t.Errorf("WaitingForInput() = %q, %v after the question", prompt, ok)
	}
}

// TestAShortPromptAfterIsNotHeldByALongOne: the prompt watches share one
// timer; a process whose first look is due before the one the timer is
// set for (another's PromptAfter of an hour) is still looked at on time.
func TestAShortPromptAfterIsNotHeldByALongOne(t *testing.T) {
	long, err := proc.Start(t.Context(), proc.Config{Command: "exec sleep 1000", PromptAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer long.Wait(context.Background())
	defer long.Stop(0)
	rec := &prompts{}
	p, err := proc.Start(t.Context(), proc.Config{Command: `printf 'Proceed? [y/N] '; exec sleep 1000`, PromptAfter: 100 * time.Millisecond, OnPrompt: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(context.Background())
	defer p.Stop(0)
	waitUntil(t, "the question is noticed", func() bool { return len(rec.get()) == 1 })
}

func TestAPromptOnATerminalIsNoticed(t *testing.T) {
	rec := &prompts{}
	p, err := proc.Start(t.Context(), proc.Config{Command: `read -p 'Overwrite? [y/N] ' x; echo "x=$x"`, TTY: true, PromptAfter: 200 * time.Millisecond, OnPrompt: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(context.Background())
	defer p.Stop(time.Second)
	waitUntil(t, "the prompt is noticed", func() bool { return len(rec.get()) == 1 })
	if got := rec.get()[0]; got != "Overwrite? [y/N]" {
		t.Errorf("prompt = %q", got)
	}
	p.Input(t.Context(), []byte("y\r"))
	if e, _ := p.Wait(t.Context()); e.Code != 0 || !strings.Contains(p.Tail(5), "x=y") {
		t.Errorf("exit %+v, output %q", e, p.Tail(5))
	}
}

// TestBlockedOnInputIsNoticed: a process asleep reading its input, with
// no prompt-like last line, waits for input once its output has been
// quiet for PromptAfter (the kernel rule); one asleep otherwise does not.
// Each command sleeps first: a false mark during the sleep would be the
// first OnPrompt call, naming sleep.
func TestBlockedOnInputIsNoticed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the kernel rule reads /proc")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, command string
		tty           bool
		want          string // the first mark; "" for any
		answer        string // written once it waits; it must then exit 0
	}{
		{"cat", `sleep 0.8; echo ready; cat`, false, "(cat is reading its input)", ""},
		{"read", `sleep 0.8; printf 'ready'; read x; echo "x=$x"`, false, "ready", "y\n"},
		{"read on a terminal", `sleep 0.8; printf 'ready'; read x; echo "x=$x"`, true, "ready", "y\r"},
		{"less on a terminal", `sleep 0.8; less ` + file, true, "", "q"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.command, "sleep 0.8; less") {
				if _, err := exec.LookPath("less"); err != nil {
					t.Skip("no less")
				}
			}
			rec := &prompts{}
			p, err := proc.Start(t.Context(), proc.Config{Command: c.command, Stdin: !c.tty, TTY: c.tty, PromptAfter: 200 * time.Millisecond, OnPrompt: rec.add})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Wait(context.Background())
			defer p.Stop(time.Second)
			waitUntil(t, "it waits for input", func() bool { return len(rec.get()) > 0 })
			first := rec.get()[0]
			t.Logf("marked waiting for input: %q", first)
			if strings.Contains(first, "sleep") || c.want != "" && first != c.want {
				t.Fatalf("first mark %q, want %q (output %q)", first, c.want, p.Tail(5))
			}
			// A program may draw once more after it was marked (less redraws
			// its status line): the mark comes back once it is quiet again.
			waitUntil(t, "WaitingForInput says so", func() bool { _, ok := p.WaitingForInput(); return ok })
			if got, _ := p.WaitingForInput(); !slices.Contains(rec.get(), got) {
				t.Errorf("WaitingForInput() = %q, want one of the marks %q", got, rec.get())
			}
			if c.answer == "" { // cat: an answer is echoed, then it reads again
				if _, err := p.Input(t.Context(), []byte("hello\n")); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, "it waits again after echoing", func() bool { return len(rec.get()) == 2 })
				if err := p.CloseInput(t.Context()); err != nil {
					t.Fatal(err)
				}
			} else if _, err := p.Input(t.Context(), []byte(c.answer)); err != nil {
				t.Fatal(err)
			}
			if e, err := p.Wait(t.Context()); err != nil || e.Code != 0 {
				t.Fatalf("Wait() = %+v, %v; output %q", e, err, p.Tail(5))
			}
			if _, ok := p.WaitingForInput(); ok {
				t.Error("a finished process still waits for input")
			}
		})
	}
}
