package proc

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// defaultPromptAfter is how long output must have stopped, on a line that
// looks like a question, before a process counts as waiting for input.
const defaultPromptAfter = 4 * time.Second

// Bounds of the prompt rule.
const (
	maxPromptChars = 200  // a longer last line is output, not a question
	promptWindow   = 1024 // the bytes of output looked at for the last line
)

// choiceEnd matches a line ending in a bracketed choice: [y/N], (yes/no),
// [Y/n/q].
var choiceEnd = regexp.MustCompile(`[\[(] *\[?[[:alpha:]]+\]?( */ *\[?[[:alpha:]]+\]?)+ *[\])]$`)

// looksLikePrompt reports whether line, the last line of a program's
// output when that output ends without a newline, looks like a question
// for a human: the rule WaitingForInput's doc states.
func looksLikePrompt(line string) bool {
	s := strings.TrimRight(line, " \t")
	if s == "" || utf8.RuneCountInString(s) > maxPromptChars || strings.ContainsAny(s, "\n") {
		return false
	}
	lower := strings.ToLower(s)
	switch {
	case strings.Contains(lower, "password"), strings.Contains(lower, "passphrase"):
		return true
	case strings.HasSuffix(s, "->"), strings.HasSuffix(s, "=>"):
		return false
	case strings.HasSuffix(s, "?"), strings.HasSuffix(s, ":"), strings.HasSuffix(s, ">"):
		return true
	}
	return choiceEnd.MatchString(s)
}

// lastLineLocked returns the cleaned unfinished last line of the output,
// if there is one that fits the window; p.mu is held.
func (p *Process) lastLineLocked() (string, bool) {
	c := p.out
	if c.total == 0 {
		return "", false
	}
	from := max(c.ringStart(), c.total-promptWindow)
	held := c.copyRing(from, c.total)
	if held[len(held)-1] == '\n' {
		return "", false
	}
	i := bytes.LastIndexByte(held, '\n')
	if i < 0 && from > 0 {
		return "", false // a line longer than the window: not a question
	}
	return Clean(held[i+1:]), true
}

// WaitingForInput reports whether the process seems to wait for input: its
// output stopped Config.PromptAfter ago or longer on an unfinished line
// that looks like a question for a human, and nothing came since. It
// returns that line. New
// output, and input written to the process, clear it; a finished process
// waits for nothing. A timer that follows the last output does the
// watching, one goroutine per process, which sleeps between checks and
// ends with the process.
//
// The rule for a question is deliberately narrow, because a false
// positive sends the model a notice about a program that is merely busy:
//
//   - the line, without trailing blanks, is 1 to 200 characters long;
//   - and it ends in "?", ":" or ">" (but not "->" or "=>", which end
//     arrows and progress bars), or in a bracketed choice with a slash
//     ("[y/N]", "(yes/no)"), or it mentions "password" or "passphrase" in
//     any case.
//
// That covers "Overwrite? [y/N] ", "Password: ", "Enter passphrase for
// key: ", "Continue (yes/no)? ", "Name: " and REPL prompts (">>> ", "> ").
// A finished line (one ending with a newline) is never a question, nor is
// a shell's "$ " prompt. Known false positives: a program that prints an
// unfinished line ending in ":" or ">" ("Compiling:"), then works
// silently for longer than PromptAfter.
//
// A process with an input (Config.Stdin or Config.TTY) is also seen from
// the kernel, on Linux: when its output has been quiet for PromptAfter and
// its last line is no question, each quiet period looks at its processes
// for one asleep in read or readv (/proc/PID/syscall) on the stdin pipe,
// or, on a terminal, the terminal (or /dev/tty) from the terminal's
// foreground process group. Then it waits for input, marked with its
// unfinished last line or "(NAME is reading its input)": cat or read with
// no prompt, a pager (less), a REPL at its prompt (which is right). The
// read must be one read, seen twice 50 ms apart with the process not run
// in between: a program that reads its input often, in short reads, and
// works between them is not marked. Known false positives: a program
// that reads its input only for optional keys while it works silently
// on other threads or processes (a dev server's "press r to restart",
// ffmpeg's "q" when its progress is off): it is marked, once per quiet
// stall, though nobody needs to answer; the mark clears when output
// resumes or the read ends. Only each process's main thread is looked at. Not seen: a
// program that waits in poll or select rather than read (some editors),
// and commands without an input, whose stdin is /dev/null. Where
// /proc/PID/syscall cannot be read, or off Linux, the prompt-line rule
// alone applies, silently.
func (p *Process) WaitingForInput() (prompt string, ok bool) {
	p.serveSoon()
	select {
	case <-p.done:
		return "", false
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prompt, p.prompt != ""
}

// InputOpen reports whether something can still be written to the
// process: it has stdin (Config.Stdin or Config.TTY), not closed.
func (p *Process) InputOpen() bool {
	if p.stdin == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.stdinClosed
}

// watchPrompts marks the process as waiting for input each time its output
// stops for Config.PromptAfter on a prompt-like line, and calls
// Config.OnPrompt once per such stall. It is woken by a timer that follows
// the last output and by output itself, and ends with the process.
//
// A process with an input (Config.Stdin or Config.TTY) whose last line is
// no question gets the kernel rule instead (see blockedReading): on each
// quiet period of PromptAfter, as long as the quiet lasts, it counts as
// waiting for input while one of its processes sleeps reading that input
// (cat, read or a pager with no prompt), once per stall and again after
// input that left it still reading.
//
// It is started PromptAfter after the start (by startDuePrompts, up to
// promptBatch later), so its first look is at once, and only where
// firstLook finds a question or an input to watch: a command that ends
// sooner (most do), or runs on quiet without either, never has the
// goroutine.
func (p *Process) watchPrompts() {
	after := p.cfg.PromptAfter
	timer := time.NewTimer(0)
	defer timer.Stop()
	kernelPrompt := "" // the mark the kernel rule set, to clear when the read ends
	var seen reader    // a read the kernel rule saw once; a second look at the same read marks it
	for {
		select {
		case <-timer.C:
		case <-p.done:
			return
		}
		p.mu.Lock()
		if quiet := time.Since(p.lastOutput); quiet < after {
			p.mu.Unlock()
			seen = reader{}
			timer.Reset(after - quiet)
			continue
		}
		line, unfinished := p.lastLineLocked()
		ok := unfinished && looksLikePrompt(line)
		if ok {
			p.prompt = strings.TrimRight(line, " \t")
			line = p.prompt
		}
		if p.grew == nil {
			p.grew = make(chan struct{})
		}
		grew := p.grew
		kernel := !ok && p.stdin != nil && !p.stdinClosed
		p.mu.Unlock()
		if kernel {
			kernelPrompt, seen = p.kernelRule(line, unfinished, kernelPrompt, seen)
			if seen.pid != 0 {
				timer.Reset(confirmRead)
			} else {
				timer.Reset(after)
			}
			continue
		}
		if ok && p.cfg.OnPrompt != nil {
			p.cfg.OnPrompt(line)
		}
		select { // the stall lasts until output resumes
		case <-grew:
		case <-p.done:
			return
		}
		timer.Reset(after)
	}
}

// promptStarts lists the processes whose prompt watch is still to start,
// each with the time it is due (PromptAfter after its start), and starts
// them from one timer (startDuePrompts).
//
// One timer for them all, not one each: a timer wakes a thread of the
// runtime when it fires, and the first looks of 1,000 shells started
// within a second or two, 4 s later, were 1,000 such wake-ups, half a
// percent of a core over the 10 s after (the IdleCPU benchmark,
// mcpserver). Started in rounds at least promptBatch apart, they cost a
// few. The timer is stopped when the list is empty (a timer, not a
// goroutine that sleeps: nothing is left running).
var promptStarts promptStartList

type promptStartList struct {
	mu    sync.Mutex
	due   map[*Process]time.Time // guarded by mu
	peak  int                    // guarded by mu: the most due has held since it was made
	timer *time.Timer            // guarded by mu: runs startDuePrompts; nil until the first start
	armed time.Time              // guarded by mu: when timer fires; zero when it is stopped
}

// promptBatch is the shortest time between two rounds of
// startDuePrompts: how late a watch may start, for fewer wake-ups.
const promptBatch = 100 * time.Millisecond

// watchPromptsLater has p's prompt watch started PromptAfter after its
// start.
func watchPromptsLater(p *Process) { watchPromptsAt(p, p.started.Add(p.cfg.PromptAfter)) }

// watchPromptsAt lists p for a look at due.
func watchPromptsAt(p *Process, due time.Time) {
	s := &promptStarts
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.due == nil {
		s.due = make(map[*Process]time.Time)
	}
	s.due[p] = due
	s.peak = max(s.peak, len(s.due))
	if s.armed.IsZero() || due.Before(s.armed) {
		armPromptStartsLocked(due)
	}
}

// armPromptStartsLocked sets the timer to fire at at.
func armPromptStartsLocked(at time.Time) {
	s := &promptStarts
	s.armed = at
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(at), startDuePrompts)
		return
	}
	s.timer.Reset(time.Until(at))
}

// forgetPromptWatch takes p off the list, once it is done: a watch not
// started never will be, and the list does not keep p. The last one
// taken off stops the timer.
func forgetPromptWatch(p *Process) {
	s := &promptStarts
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.due[p]; !ok {
		return
	}
	delete(s.due, p)
	if len(s.due) == 0 {
		s.timer.Stop()
		s.emptiedLocked()
	}
}

// emptiedLocked forgets the timer's time, and the map where a burst grew
// it (a map does not shrink); a small one is kept for the next start.
func (s *promptStartList) emptiedLocked() {
	s.armed = time.Time{}
	if s.peak > keptPromptMap {
		s.due, s.peak = nil, 0
	}
}

// keptPromptMap is the most processes due at once whose map is kept
// once empty.
const keptPromptMap = 64

// startDuePrompts starts the watches that are due, and sets the timer for
// the next, promptBatch from now at the soonest. (A run the timer started
// before a Reset finds nothing due, or less, and sets it again.)
func startDuePrompts() {
	s := &promptStarts
	now := time.Now()
	var next time.Time
	var due []*Process
	s.mu.Lock()
	for p, at := range s.due {
		switch {
		case !at.After(now):
			delete(s.due, p)
			due = append(due, p)
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	if len(s.due) == 0 {
		s.emptiedLocked()
	} else {
		if batch := now.Add(promptBatch); next.Before(batch) {
			next = batch
		}
		armPromptStartsLocked(next)
	}
	s.mu.Unlock()
	for _, p := range due { // each off the list: only this round has it
		p.firstLook()
	}
}

// firstLook is watchPrompts' first look at p, taken where it needs no
// goroutine: with output in the last PromptAfter, p is listed again for
// when it will have been quiet that long; quiet on no question, without an
// input to watch, it is left stalled, for its next output to list it
// again (a command asleep, a server waiting for requests: most of what
// runs long). Otherwise, a question or an input to watch, watchPrompts
// takes it on.
func (p *Process) firstLook() {
	after := p.cfg.PromptAfter
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return
	default:
	}
	if last := p.lastOutput; time.Since(last) < after {
		p.mu.Unlock()
		watchPromptsAt(p, last.Add(after))
		return
	}
	line, unfinished := p.lastLineLocked()
	if !(unfinished && looksLikePrompt(line)) && (p.stdin == nil || p.stdinClosed) {
		p.promptStalled = true
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	go p.watchPrompts()
}

// kernelRule marks the process as waiting for input, and calls
// Config.OnPrompt, when one of its processes is blocked reading its input
// and it is not marked yet (a new stall, or input was written that left it
// reading); it clears its own earlier mark once no process reads. The
// mark is the unfinished last line, or "(NAME is reading its input)". It
// returns the mark it leaves (or "").
//
// A read seen for the first time is not marked at once: again is that
// reader, and the caller looks again confirmRead later (seen). The output
// a program wrote just before it began to read ("ready" then read) may
// not have reached our reader yet when the read is seen, and the mark
// would miss its prompt line; and a program that reads its input often,
// working between its reads, is not waiting for it. The second look marks
// it if it finds the same process in a read, not having run in between,
// and no output came.
func (p *Process) kernelRule(line string, unfinished bool, prev string, seen reader) (mark string, again reader) {
	r, blocked := p.blockedReading()
	name := r.name
	mark = strings.TrimRight(line, " \t")
	if !unfinished || mark == "" || len(mark) > maxPromptChars {
		mark = "(" + name + " is reading its input)"
	}
	p.mu.Lock()
	quiet := time.Since(p.lastOutput) >= p.cfg.PromptAfter // no output came while we looked
	switch {
	case !blocked || !quiet:
		if prev != "" && p.prompt == prev {
			p.prompt = ""
		}
		p.mu.Unlock()
		return "", reader{}
	case p.prompt != "":
		mark = p.prompt // still the same stall
		p.mu.Unlock()
		return mark, reader{}
	case seen.pid == 0 || seen != r:
		p.mu.Unlock()
		return prev, r
	}
	p.prompt = mark
	p.mu.Unlock()
	if p.cfg.OnPrompt != nil {
		p.cfg.OnPrompt(mark)
	}
	return mark, reader{}
}

// confirmRead is how long after first seeing a read the kernel rule looks
// again before it marks the process as waiting for input.
const confirmRead = 50 * time.Millisecond
