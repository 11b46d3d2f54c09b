package tools

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

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
	var tailCut string
	switch {
	case in.TailLines > 0:
		ch, tailCut = tailLines(p, in.TailLines)
		ch.Next = ch.Total // the next read goes on from here
		out.Output = filterLines(proc.Clean(ch.Data), re)
	case re != nil:
		out.Output, ch = readFiltered(p, s.since(v, id, in.Since), re)
	default:
		ch = wholeLines(p.Read(proc.Combined, s.since(v, id, in.Since), outputBytes))
		out.Output = proc.Clean(ch.Data)
	}
	s.setCursor(v, id, ch.Next)
	out.NextCursor, out.TotalBytes, out.SkippedBytes = ch.Next, ch.Total, ch.Skipped
	out.More = ch.Next < ch.Total
	switch {
	case ch.Skipped > 0:
		out.Note = skippedNote(ch.Skipped, p.Log())
	case out.More && re != nil && in.TailLines == 0 && out.Output == "":
		out.Note = fmt.Sprintf("No line from byte %d to %d matches (one call reads through at most %d MiB); there is more output after next_cursor: call again to read on.", ch.Start, ch.Next, filterScan>>20)
	case out.More:
		out.Note = "There is more output after next_cursor; call again to read it."
	}
	out.Note = joinNotes(joinNotes(tailCut, out.Note), poll)
	return out, nil
}

// tailLines reads the last n lines of p's output, or as many as one call
// shows (outputBytes). When they do not all fit, the read starts at a
// line's start, not in the middle of one, and the note it returns says
// how many lines came and where the output before them is: a read that
// began mid-line, unannounced, passed a fragment off as a line (an
// outsider's finding).
func tailLines(p *proc.Process, n int) (proc.Chunk, string) {
	ch := p.TailLines(proc.Combined, n, outputBytes)
	lines := bytes.Count(ch.Data, []byte("\n"))
	if len(ch.Data) > 0 && ch.Data[len(ch.Data)-1] != '\n' {
		lines++ // the last line, unfinished
	}
	if ch.Start == 0 || lines >= n {
		return ch, ""
	}
	if before := p.Read(proc.Combined, ch.Start-1, 1); before.Start != ch.Start-1 || string(before.Data) != "\n" {
		if i := bytes.IndexByte(ch.Data, '\n'); i >= 0 && i+1 < len(ch.Data) {
			ch.Data, ch.Start = ch.Data[i+1:], ch.Start+int64(i+1)
			lines--
		}
	}
	return ch, fmt.Sprintf("Only the last %d of the %d lines asked for fit in one call (%d bytes at most); the output before byte %d is not shown: read it with since, or find lines with a filter.", lines, n, outputBytes, ch.Start)
}

// since is where a read of task id starts: the cursor the call gave, or
// the caller's last read's end.
func (s *Set) since(v *task.View, id string, given *int64) int64 {
	if given != nil {
		return *given
	}
	return s.cursor(v, id)
}

// filterScan is how much output one filtered read goes through at most.
// A filter is how a model finds lines without paging through the
// output, so a read goes on past pages where nothing matches, up to
// this, instead of stopping after outputBytes of output as a plain read
// does: through 1 MB of output to one matching line took 123 calls.
const filterScan = 8 << 20

// filterChunk is how much output a filtered read takes at a time.
const filterChunk = 64 << 10

// readFiltered reads the output from since on, keeping the lines that
// match re, cleaned, until they fill outputBytes, filterScan bytes have
// been read through, or the output written so far ends. The chunk it
// returns says where the read started (after what was skipped), where
// the next one goes on (the first line not read through), and what was
// skipped on the way.
func readFiltered(p *proc.Process, since int64, re *regexp.Regexp) (string, proc.Chunk) {
	var b strings.Builder
	var sum proc.Chunk
	for first := true; ; first = false {
		ch := wholeLines(p.Read(proc.Combined, since, filterChunk))
		if first {
			sum.Start = ch.Start
		}
		sum.Skipped += ch.Skipped
		sum.Total, sum.Next = ch.Total, ch.Next
		at := ch.Start
		for line := range bytes.Lines(ch.Data) {
			if m := filterLines(proc.Clean(line), re); m != "" {
				if b.Len() > 0 && b.Len()+len(m) > outputBytes {
					sum.Next = at // the next read starts with this line
					return b.String(), sum
				}
				b.WriteString(m)
			}
			at += int64(len(line))
		}
		if ch.Next <= since || ch.Next >= ch.Total || ch.Next-sum.Start >= filterScan || b.Len() >= outputBytes {
			return b.String(), sum
		}
		since = ch.Next
	}
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
