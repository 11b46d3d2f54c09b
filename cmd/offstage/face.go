package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/offstage/offstage/internal/chanctx"
)

// face is where the person of a run is: this process's terminal or pipes,
// or, under offstage serve, those of the client that relays them over the
// supervisor's socket (see serve.go). run's code asks the face, never the
// os package, for what belongs to the person: the environment, the
// directory, which streams are terminals, Ctrl-C and the window's width.
type face struct {
	getenv func(string) string
	// environ is the shells' environment before the policy filters it;
	// nil is this process's (proc.Config.Env's default).
	environ []string
	cwd     string
	// tty says which of stdin, stdout and stderr are terminals; device
	// says whether there is a controlling terminal to ask on (hasTTY).
	tty    [3]bool
	device bool
	width  func() int
	// interrupts and resizes return a channel of Ctrl-C presses (window
	// size changes) and a function to stop listening.
	interrupts func() (<-chan os.Signal, func())
	resizes    func() (<-chan os.Signal, func())
	// host, under offstage serve, hosts the face's session there; nil
	// for a session in this process.
	host *supervisor
	// conn is the served face's connection: done when the client went
	// away (then the session detaches; nothing ends).
	conn context.Context
	// endInput, under offstage serve, ends the input of a stream face's
	// connection (offstage mcp, offstage acp) while its output stays
	// open, so that what is answered meanwhile still reaches the client.
	endInput func()
}

// localFace is the face of this process's own terminal and pipes.
func localFace(stdin io.Reader, stdout, stderr io.Writer) *face {
	cwd, _ := os.Getwd()
	return &face{
		getenv:     os.Getenv,
		cwd:        cwd,
		tty:        [3]bool{isTTY(stdin), isTTY(stdout), isTTY(stderr)},
		device:     hasTTY(),
		width:      func() int { return terminalWidth(stdout) },
		interrupts: interrupts,
		resizes:    resizes,
	}
}

// cancelOnInterrupt returns a context that the face's Ctrl-C cancels, and
// a function to release it.
func (f *face) cancelOnInterrupt(ctx context.Context) (context.Context, func()) {
	sigs, stopSigs := f.interrupts()
	ctx, cancel := chanctx.CancelOn(ctx, sigs)
	return ctx, func() { cancel(); stopSigs() }
}

// abs resolves a path the person gave against the face's directory.
func (f *face) abs(path string) string {
	if path == "" || path == "-" || filepath.IsAbs(path) || strings.HasPrefix(path, "~") {
		return path
	}
	return filepath.Join(f.cwd, path)
}

// served reports whether the face's session is hosted by offstage serve.
func (f *face) served() bool { return f.host != nil }
