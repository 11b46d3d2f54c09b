package tools

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

//go:embed task_output.md
var taskOutputMD string

type outputInput struct {
	TaskID    string `json:"task_id" jsonschema:"the shell task id, such as shell:3"`
	Since     *int64 `json:"since,omitempty" jsonschema:"read from this cursor; default your last read"`
	TailLines int    `json:"tail_lines,omitempty" jsonschema:"instead, the last this many lines"`
	Filter    string `json:"filter,omitempty" jsonschema:"only lines matching this regular expression"`
}

// TaskOutputResult is the task_output tool's result.
type TaskOutputResult struct {
	TaskID       string `json:"task_id"`
	Status       string `json:"status"`
	Output       string `json:"output"`
	NextCursor   int64  `json:"next_cursor"`
	TotalBytes   int64  `json:"total_bytes"`
	SkippedBytes int64  `json:"skipped_bytes,omitempty"`
	More         bool   `json:"more,omitempty"`
	Note         string `json:"note,omitempty"`
}

func (s *Set) taskOutput(_ context.Context, v *task.View, in outputInput) (TaskOutputResult, error) {
	id, err := resolve(v, in.TaskID)
	if err != nil {
		return TaskOutputResult{}, err
	}
	switch {
	case in.Since != nil && in.TailLines != 0:
		return TaskOutputResult{}, fail("Pass either since or tail_lines, not both.")
	case in.Since != nil && *in.Since < 0:
		return TaskOutputResult{}, fail("since must be a cursor of 0 or more (0 is the start of the output).")
	case in.TailLines < 0:
		return TaskOutputResult{}, fail("tail_lines must be a positive number of lines.")
	}
	var re *regexp.Regexp
	if in.Filter != "" {
		if re, err = regexp.Compile(in.Filter); err != nil {
			return TaskOutputResult{}, fail("filter is not a valid regular expression: %s.", shorten(err.Error(), 200))
		}
	}
	p, err := processOf(v, id)
	if err != nil {
		return TaskOutputResult{}, err
	}
	// What it shows is summed up before reading, so what arrives meanwhile
	// is news next time.
	info, _ := v.Info(id)
	poll := s.taskPollNote(v, info)
	out := TaskOutputResult{TaskID: id, Status: info.State.String()}
	if p == nil {
		out.Note = joinNotes("It has no output: it has not started yet (it is queued behind other tasks), or it could not start.", poll)
		return out, nil
	}
	var ch proc.Chunk
	if in.TailLines > 0 {
		ch = p.TailLines(proc.Combined, in.TailLines, outputBytes)
		ch.Next = ch.Total // the next read goes on from here
	} else {
		since := s.cursor(v, id)
		if in.Since != nil {
			since = *in.Since
		}
		ch = p.Read(proc.Combined, since, outputBytes)
		ch = wholeLines(ch)
	}
	s.setCursor(v, id, ch.Next)
	out.Output = filterLines(proc.Clean(ch.Data), re)
	out.NextCursor, out.TotalBytes, out.SkippedBytes = ch.Next, ch.Total, ch.Skipped
	out.More = ch.Next < ch.Total
	switch {
	case ch.Skipped > 0:
		out.Note = skippedNote(ch.Skipped, p.Log())
	case out.More:
		out.Note = "There is more output after next_cursor; call again to read it."
	}
	out.Note = joinNotes(out.Note, poll)
	return out, nil
}

// logStopped says why a log stopped: "writing it failed (no space left on
// device)", or "the disk is nearly full: …" when it left the reserve.
func logStopped(le *proc.LogError) string {
	if errors.Is(le, proc.ErrLogReserve) {
		return le.Reason()
	}
	return "writing it failed (" + le.Reason() + ")"
}

// skippedNote says why bytes before a read are gone: memory keeps only the
// head and the tail, and the output log, when there is one, stopped short
// of them: at its cap, or where writing it failed.
func skippedNote(skipped int64, log proc.LogState) string {
	const memory = "memory keeps only the first 64 KiB and the last 1 MiB"
	var le *proc.LogError
	switch {
	case errors.As(log.Err, &le):
		return fmt.Sprintf("%d bytes before this output are lost: the output log stopped at byte %d because %s, and %s.", skipped, log.Held, logStopped(le), memory)
	case log.Path != "" && log.Held >= log.Max:
		return fmt.Sprintf("%d bytes before this output are no longer kept: the output log keeps only the first %d bytes (its cap), and %s.", skipped, log.Max, memory)
	}
	return fmt.Sprintf("%d bytes before this output are no longer kept (only the first 64 KiB and the last 1 MiB are).", skipped)
}

// wholeLines ends a read that was cut by the byte limit after its last
// complete line, so a line (or a character) is not split between two
// reads. A read that reached the end of what was written is returned
// whole: a prompt without a newline ("Password: ") must show.
func wholeLines(ch proc.Chunk) proc.Chunk {
	if ch.Next == ch.Total {
		return ch
	}
	i := bytes.LastIndexByte(ch.Data, '\n')
	if i < 0 {
		return ch
	}
	ch.Data = ch.Data[:i+1]
	ch.Next = ch.Start + int64(i+1)
	return ch
}
