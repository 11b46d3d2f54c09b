//go:build !unix

package rpcline

import "io"

// readerGone: not known here; the drain waits its grace.
func readerGone(out io.Writer) func() bool { return nil }
