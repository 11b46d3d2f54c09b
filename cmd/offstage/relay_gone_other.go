//go:build !unix

package main

import "io"

// closeWhenReaderGone does nothing where poll is not at hand: a relay
// finds its client gone by a failed write.
func closeWhenReaderGone(io.Writer, io.Closer) (stop func()) { return func() {} }
