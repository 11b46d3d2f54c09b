package tools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

func Example() {
	table := task.New(context.Background(), task.Options{})
	defer table.Close(context.Background())
	set := tools.New(tools.Config{})
	caller := table.View("") // the top level; a sub-agent passes its own view

	res, err := set.Tool("bash").Call(context.Background(), caller, json.RawMessage(`{"command": "echo hello"}`))
	if err != nil {
		panic(err) // the runtime itself failed
	}
	var out tools.BashOutput
	json.Unmarshal([]byte(res.Text), &out)
	fmt.Println(out.TaskID, out.Status, *out.ExitCode)
	fmt.Printf("%q\n", out.Output)

	res, _ = set.Tool("task_cancel").Call(context.Background(), caller, json.RawMessage(`{"task_id": "shell:9"}`))
	fmt.Println(res.IsError, res.Text)
	// Output:
	// shell:1 completed 0
	// "hello\n"
	// true {"error":"There is no task \"shell:9\" (it never existed or was cleared after it finished); task_list shows your tasks."}
}
