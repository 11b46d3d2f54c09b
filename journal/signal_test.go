package journal_test

import (
	"os/signal"
	"syscall"
)

func signalIgnoreXFSZ() { signal.Ignore(syscall.SIGXFSZ) }
