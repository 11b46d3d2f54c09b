package main

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// terminalWidth returns the width in columns of the terminal w writes
// to, or 0 if w is not a terminal.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	cols := 0
	raw.Control(func(fd uintptr) {
		if ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ); err == nil {
			cols = int(ws.Col)
		}
	})
	return cols
}

// resizes returns a channel that receives when the terminal is resized.
func resizes() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	return ch, func() { signal.Stop(ch) }
}

// isTTY reports whether v is a terminal: an *os.File the terminal ioctls
// work on (a character device is not enough: /dev/null is one).
func isTTY(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return false
	}
	tty := false
	raw.Control(func(fd uintptr) {
		_, err := unix.IoctlGetTermios(int(fd), ioctlGetTermios)
		tty = err == nil
	})
	return tty
}
