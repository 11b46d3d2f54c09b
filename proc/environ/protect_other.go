//go:build unix && !linux

package environ

import (
	"errors"
	"fmt"
	"runtime"
)

// ProtectHost makes this process's environment and memory unreadable by
// the commands it starts; see the Linux version. Elsewhere it returns an
// error wrapping errors.ErrUnsupported and changes nothing.
func ProtectHost() error {
	return fmt.Errorf("proc: protect host: not implemented on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
