//go:build !linux

package proc

// HideWithheld does nothing where there is no /proc (macOS, where ps -E
// shows a process's environment to its own user only): it returns no
// names and no error. See the Linux version.
func HideWithheld(p EnvPolicy) ([]string, error) { return nil, nil }
