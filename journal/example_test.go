package journal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// A program with its own model loop keeps its sessions in a journal: the
// Recorder hooks the session's task table and tools up to it, and a
// restart continues the session. The two duties agent.Open would do for
// it are the loop's: make the task table from the cfg Record amended (its
// Recorder, and after a resume its FirstID, so new tasks never overwrite
// the old ones' records), and mark the results a resume tells delivered
// once told (Record.Delivered), so a later resume does not tell them
// again.
func Example_ownLoop() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "journal-example")
	defer os.RemoveAll(dir)
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		panic(err)
	}
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{LogDir: filepath.Join(dir, "logs")})
	if err != nil {
		panic(err)
	}
	defer rec.Close(ctx)

	// One run of the program: a session, its table, one shell.
	run := func(id string, resume *agent.Resume) string {
		var cfg agent.Config
		cfg.Tools.Process.Dir = dir
		r, err := rec.Record(ctx, agent.SessionInfo{ID: id, Surface: "mine", Dir: dir, Resume: resume}, &cfg)
		if err != nil {
			panic(err)
		}
		defer r.End()
		table := task.New(ctx, cfg.Tasks)
		defer table.Close(ctx)
		if resume != nil {
			// Tell the conversation resume.Results and resume.Notices
			// here, then:
			r.Delivered(resume.Delivered...)
		}
		args, _ := json.Marshal(map[string]any{"command": "echo hello"})
		res, err := tools.New(cfg.Tools).Tool("bash").Call(ctx, table.View(""), args)
		if err != nil {
			panic(err)
		}
		var out tools.BashOutput
		json.Unmarshal([]byte(res.Text), &out)
		fmt.Printf("%s: %s %q\n", out.TaskID, out.Status, out.Output)
		return r.ID()
	}

	id := run("", nil)
	rec.Flush(ctx)
	resume, err := rec.Load(ctx, id)
	if err != nil {
		panic(err)
	}
	run(id, resume) // the next task is shell:2, not a second shell:1
	rec.Flush(ctx)
	tasks, _ := store.Tasks(ctx, journal.TaskFilter{Session: id})
	fmt.Println(len(tasks), "tasks recorded")
	// Output:
	// shell:1: completed "hello\n"
	// shell:2: completed "hello\n"
	// 2 tasks recorded
}
