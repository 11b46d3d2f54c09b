package tools

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/offstage/offstage/task"
)

// inUse finds the line of a command's output that says the port it
// wanted is taken, and portIn a port number in a line (":8080",
// "port 8080").
var (
	inUse  = regexp.MustCompile(`(?i)address already in use|EADDRINUSE|address in use`)
	portIn = regexp.MustCompile(`(?i)(?:\bport\s*|:)(\d{1,5})\b`)
	number = regexp.MustCompile(`\b\d{2,5}\b`)
)

// maxHolders bounds the shells an in-use note names when it cannot tell
// the port.
const maxHolders = 5

// inUseNote returns, for a command (task self) whose output says an
// address was already in use, who holds the port: one of the caller's
// running shells (from their sockets), or someone the caller cannot see
// (another session, a process outside offstage), of whom it says
// nothing more. The port is the one the message names, else a number
// of the command line that one of the caller's shells listens on; when
// neither tells, it lists the ports the caller's shells listen on. ""
// when the output does not say so.
func inUseNote(v *task.View, self, command, output string) string {
	var said []int // ports the in-use lines name
	found := false
	for line := range strings.SplitSeq(output, "\n") {
		if !inUse.MatchString(line) {
			continue
		}
		found = true
		if ms := portIn.FindAllStringSubmatch(line, -1); ms != nil {
			if n, err := strconv.Atoi(ms[len(ms)-1][1]); err == nil && n > 0 && n < 1<<16 {
				said = append(said, n)
			}
		}
	}
	if !found {
		return ""
	}
	holders := map[int][]string{} // port → the caller's shells listening on it
	var listening []string        // "shell:2 on 8000"
	for _, i := range v.List() {
		if i.ID == self || i.Kind != "shell" || i.State != task.Running {
			continue
		}
		p, ok := Shell(v, i.ID)
		if !ok {
			continue
		}
		ports := p.Ports()
		for _, n := range ports {
			holders[n] = append(holders[n], fmt.Sprintf("%s (%s)", i.ID, shorten(i.Label, 60)))
		}
		if len(ports) > 0 {
			listening = append(listening, fmt.Sprintf("%s on %s", i.ID, joinInts(ports)))
		}
	}
	port := 0
	if len(said) > 0 {
		port = said[len(said)-1]
	} else {
		// The message did not name it (Python's "[Errno 98] Address
		// already in use"): a number of the command line may, one that
		// the caller's shells or anything else listens on.
		var taken []int
		for _, m := range number.FindAllString(command, -1) {
			n, _ := strconv.Atoi(m)
			if len(holders[n]) > 0 {
				port = n
				break
			}
			if taken == nil {
				taken = listeningPorts()
			}
			if port == 0 && slices.Contains(taken, n) {
				port = n // unless a later number is the caller's
			}
		}
	}
	switch {
	case port != 0 && len(holders[port]) > 0:
		return fmt.Sprintf("Port %d is already in use by your %s: use that server, cancel it with task_cancel first, or pick another port.", port, strings.Join(holders[port], " and "))
	case port != 0:
		return fmt.Sprintf("Port %d is already in use, not by one of your tasks: another session or a process outside offstage holds it. Pick another port (port 0 lets the system choose; until_port \"any\" finds it).", port)
	case len(listening) > 0:
		if len(listening) > maxHolders {
			listening = append(listening[:maxHolders], "…")
		}
		return fmt.Sprintf("An address was already in use. Your shells listen on: %s; if it is none of these, another session or a process outside offstage holds it.", strings.Join(listening, "; "))
	}
	return "An address was already in use, not by one of your tasks: another session or a process outside offstage holds it. Pick another port (port 0 lets the system choose; until_port \"any\" finds it)."
}

// joinInts lists ports: "8000, 8001".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
