package contain

import (
	"os"
	"sync"
)

// DevNull returns /dev/null, opened for reading and writing once for the
// process and never closed: what a command without input gets as its
// stdin. Opening it for every start (as os/exec does for a nil stream)
// cost a start two system calls and a file to finalize. Callers must not
// close it.
func DevNull() (*os.File, error) { return devNull() }

var devNull = sync.OnceValues(func() (*os.File, error) {
	return os.OpenFile(os.DevNull, os.O_RDWR, 0) // close-on-exec, as os.OpenFile's
})
