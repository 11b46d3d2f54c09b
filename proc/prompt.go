package proc

import (
	"bytes"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultPromptAfter is how long output must have stopped, on a line that
// looks like a question, before a process counts as waiting for input.
const DefaultPromptAfter = 4 * time.Second

// Bounds of the prompt rule.
const (
	maxPromptChars = 200  // a longer last line is output, not a question
	promptWindow   = 1024 // the bytes of output looked at for the last line
)

// choiceEnd matches a line ending in a bracketed choice: [y/N], (yes/no),
// [Y/n/q].
var choiceEnd = regexp.MustCompile(`[\[(] *\[?[[:alpha:]]+\]?( */ *\[?[[:alpha:]]+\]?)+ *[\])]$`)

// LooksLikePrompt reports whether line, the last line of a program's
// output when that output ends without a newline, looks like a question
// for a human. The rule is deliberately narrow, because a false positive
// sends the model a notice about a program that is merely busy:
//
//   - the line, without trailing blanks, is 1 to 200 characters long;
//   - and it ends in "?", ":" or ">" (but not "->" or "=>", which end
//     arrows and progress bars), or in a bracketed choice with a slash
//     ("[y/N]", "(yes/no)"), or it mentions "password" or "passphrase" in
//     any case.
//
// That covers "Overwrite? [y/N] ", "Password: ", "Enter passphrase for
// key: ", "Continue (yes/no)? ", "Name: " and REPL prompts (">>> ", "> ").
// A line that ends with a newline is never a prompt (callers pass only an
// unfinished last line), nor is a shell's "$ " prompt. Known false
// positives: a program that prints an unfinished line ending in ":" or
// ">" ("Compiling:"), then works silently for longer than the wait.
func LooksLikePrompt(line string) bool {
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
// that LooksLikePrompt, and nothing came since. It returns that line. New
// output, and input written to the process, clear it.
func (p *Process) WaitingForInput() (prompt string, ok bool) {
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
func (p *Process) watchPrompts() {
	after := p.cfg.PromptAfter
	timer := time.NewTimer(after)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-p.done:
			return
		}
		p.mu.Lock()
		if quiet := time.Since(p.lastOutput); quiet < after {
			p.mu.Unlock()
			timer.Reset(after - quiet)
			continue
		}
		line, ok := p.lastLineLocked()
		ok = ok && LooksLikePrompt(line)
		if ok {
			p.prompt = strings.TrimRight(line, " \t")
			line = p.prompt
		}
		if p.grew == nil {
			p.grew = make(chan struct{})
		}
		grew := p.grew
		p.mu.Unlock()
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
