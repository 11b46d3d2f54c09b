package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/creack/pty"
)

// runPiped runs offstage run with a script and stdin from a pipe, and
// returns its stdout and stderr.
func runPiped(t *testing.T, script, stdin string, args ...string) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(path, []byte(script), 0o644)
	cmd, mark := offstage(t, nil, append([]string{"run", "--script", path}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if code := exitOf(t, cmd.Run()); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	noSurvivors(t, mark)
	return out.String(), errOut.String()
}

// Piped lines run in order: a command waits for the answer to the message
// before it, and /quit does not cut the turn short.
func TestPipedConversationRunsInOrder(t *testing.T) {
	out, errOut := runPiped(t, `{"turns": [
		{"expect": "^hello$", "text": "Hello to you.", "delay_ms": 300}
	]}`, "hello\n/tasks\n/quit\n")
	answer, tasks := strings.Index(out, "Hello to you."), strings.Index(out, "no tasks")
	if answer < 0 || tasks < answer {
		t.Errorf("want the answer, then /tasks; stdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

// The end of piped input waits for the last message's answer.
func TestPipedConversationAnswersTheLastLine(t *testing.T) {
	out, errOut := runPiped(t, `{"turns": [
		{"text": "One.", "delay_ms": 100},
		{"expect": "^two$", "text": "Two.", "delay_ms": 200}
	]}`, "one\ntwo\n")
	if !strings.Contains(out, "One.") || !strings.Contains(out, "Two.") || !strings.Contains(out, "bye.") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

func TestReadLinesRefusesALongLineAndGoesOn(t *testing.T) {
	in := "short\n" + strings.Repeat("x", 100) + "\n" + strings.Repeat("y", 9) + "\r\nlast without newline"
	lines := make(chan inputLine, 10)
	// A reader that hands out 7 bytes at a time, so lines span reads.
	if err := readLines(iotest.HalfReader(strings.NewReader(in)), 10, lines, nil); err != nil {
		t.Fatal(err)
	}
	close(lines)
	var got []inputLine
	for l := range lines {
		got = append(got, l)
	}
	want := []inputLine{{text: "short"}, {tooLong: 100}, {text: strings.Repeat("y", 9) + "\r"}, {tooLong: 20}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lines = %+v, want %+v", got, want)
	}
}

// TestTheLineReaderEndsWithTheConversation (issue 21, G1): a
// conversation that ends (/quit) before its input leaves no reader
// goroutine blocked forever handing over the next line.
func TestTheLineReaderEndsWithTheConversation(t *testing.T) {
	lines := make(chan inputLine) // nobody reads after the first line
	done := make(chan struct{})
	returned := make(chan error, 1)
	go func() { returned <- readLines(strings.NewReader("/quit\nmore\nlines\n"), 10, lines, done) }()
	if l := <-lines; l.text != "/quit" {
		t.Fatalf("first line = %+v", l)
	}
	close(done)
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("readLines still blocks on the next line after the conversation ended")
	}
}

// A line over 1 MiB is refused with a message, and the conversation goes
// on with the lines after it.
func TestPipedConversationRefusesAnOverlongLine(t *testing.T) {
	out, errOut := runPiped(t, `{"turns": [
		{"expect": "^after$", "text": "Still here."}
	]}`, strings.Repeat("x", 1<<20+1)+"\nafter\n")
	if !strings.Contains(out, "refused a line of 1048577 bytes: a message is at most 1048576 bytes") || !strings.Contains(out, "Still here.") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

// A one-shot prompt comes from stdin with "-", and from a file with
// --prompt-file, even when it is longer than the OS lets an argument be.
func TestPromptFromStdinAndFile(t *testing.T) {
	out, errOut := runPiped(t, `{"turns": [{"expect": "^say hi$", "text": "Hi."}]}`, "say hi\n", "-")
	if out != "Hi.\n" {
		t.Errorf("run -: stdout %q\nstderr:\n%s", out, errOut)
	}
	long := strings.Repeat("p", 300<<10) + " end" // over MAX_ARG_STRLEN (128 KiB)
	file := filepath.Join(t.TempDir(), "prompt.txt")
	os.WriteFile(file, []byte(long), 0o644)
	out, errOut = runPiped(t, `{"turns": [{"expect": "^p+ end$", "text": "Read it."}]}`, "", "--prompt-file", file)
	if out != "Read it.\n" {
		t.Errorf("--prompt-file: stdout %q\nstderr:\n%s", out, errOut)
	}
}

// --max-running bounds how many of a session's tasks run at once: with 1,
// the second shell waits, queued, for the first.
func TestMaxRunningQueuesTheRest(t *testing.T) {
	out, errOut := runPiped(t, `{"turns": [
		{"tool_calls": [
			{"name": "bash", "input": {"command": "sleep 0.2; echo one", "run_in_background": true}},
			{"name": "bash", "input": {"command": "echo two", "run_in_background": true}}]},
		{"text": "Both started."},
		{"text": "Both done."},
		{"text": "Done."}
	]}`, "", "--json", "--max-running", "1", "go") // the results may come back in one autonomous turn or two
	var events []string // "shell:1 finished", in order
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Task struct {
				Event  string `json:"event"`
				TaskID string `json:"task_id"`
			} `json:"task"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if e.Task.TaskID != "" {
			events = append(events, e.Task.TaskID+" "+e.Task.Event)
		}
	}
	finished, started := slices.Index(events, "shell:1 finished"), slices.Index(events, "shell:2 started")
	if finished < 0 || started < finished {
		t.Errorf("shell:2 did not wait for shell:1: %q\nstderr:\n%s", events, errOut)
	}
}

// On a terminal a one-shot run prints its answer once: the trace has it,
// so stdout does not repeat it (a pipe still gets it; see
// TestRunOneShotAgainstAFakeOpenAIServer).
func TestOneShotOnATerminalPrintsTheAnswerOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(path, []byte(`{"turns": [{"text": "The answer is 42."}]}`), 0o644)
	cmd, mark := offstage(t, nil, "run", "--script", path, "what is it?")
	f, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() { // until the terminal closes: EIO once offstage has exited
		defer close(read)
		io.Copy(&out, f)
	}()
	if code := exitOf(t, cmd.Wait()); code != 0 {
		t.Fatalf("exit %d", code)
	}
	<-read
	if n := strings.Count(out.String(), "The answer is 42."); n != 1 {
		t.Errorf("the answer printed %d times:\n%s", n, out.String())
	}
	noSurvivors(t, mark)
}
