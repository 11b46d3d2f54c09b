package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/tools"
)

// crashEnv makes this program the process that crashes: it starts a
// session, leaves a background shell running and kills itself.
const crashEnv = "EMBEDDING_CRASH_IN"

// script stands in for your model: the first process starts a build and
// dies; after the restart the model is told the build was orphaned.
const script = `{"turns": [
	{"tool_calls": [{"name": "bash", "input": {"command": "echo compiling; sleep 60; echo built", "run_in_background": true}}]},
	{"text": "The build runs in the background."},
	{"expect": "(?s)orphaned.*shell:1.*compiling", "text": "offstage restarted and the build was lost; I will start it again."}
]}`

// open is all the set-up an agent with a journal needs: the journal (a
// SQLite file; journal.OpenPostgres for a fleet), a Recorder, which also
// marks what a crashed process left running orphaned and stops it, and a
// session recorded into it, new or resumed.
func open(ctx context.Context, dir, id string) (*journal.Recorder, *agent.Session, error) {
	model, err := scripted.Parse([]byte(script))
	if err != nil {
		return nil, nil, err
	}
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		return nil, nil, err
	}
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{LogDir: filepath.Join(dir, "logs")})
	if err != nil {
		return nil, nil, err
	}
	s, err := agent.Open(ctx, agent.Config{Model: model, Tools: tools.Config{Process: proc.Config{Dir: dir}}},
		agent.Surface{Name: "embedding", Journal: rec, ID: id, Resume: id != ""})
	if err != nil {
		rec.Close(context.Background())
		return nil, nil, err
	}
	return rec, s, nil
}

// crash is the first process: it opens a session, lets the model start a
// build in the background, says the session's id and dies (SIGKILL: no
// Close, no deferred call; its shell is left running). It dies once the
// journal has written the turn: records go to disk in batches about every
// 20ms, and a crash loses what was not yet written.
func crash(ctx context.Context, dir string) error {
	rec, s, err := open(ctx, dir, "")
	if err != nil {
		return err
	}
	if _, err := s.Turn(ctx, "build the project", agent.Discard); err != nil {
		return err
	}
	if err := rec.Flush(ctx); err != nil {
		return err
	}
	fmt.Println(s.ID())
	return syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// restart runs the first process, which crashes, then resumes its
// session: the model hears that its build was orphaned, once.
func restart(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "embedding")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); err == nil || !ok || ws.Signal() != syscall.SIGKILL {
		return fmt.Errorf("the first process should have died of SIGKILL: %v", err)
	}
	id := strings.TrimSpace(string(out))
	fmt.Fprintf(w, "the first process died with session %s open and its build running\n", id)

	rec, s, err := open(ctx, dir, id)
	if err != nil {
		return err
	}
	defer rec.Close(context.Background())
	defer s.Close(context.Background())
	for _, n := range s.Resumed().Notices {
		first, _, _ := strings.Cut(n.Text, "\n")
		fmt.Fprintf(w, "resumed; the model is told: %s\n", first)
	}
	answer, err := s.Turn(ctx, "what happened to the build?", agent.Discard)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "model:", answer)
	return nil
}

// crashChild runs crash when this process is the first one, and reports
// whether it was.
func crashChild() bool {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		return false
	}
	if err := crash(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, "embedding:", err)
		os.Exit(1)
	}
	return true
}
