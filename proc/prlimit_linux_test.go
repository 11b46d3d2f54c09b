package proc_test

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// prlimitOthers is the helper prlimit: read another process's descriptor
// limit, set it to what it is, and set its own, saying each outcome.
func prlimitOthers(args []string) int {
	pid, _ := strconv.Atoi(args[1])
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		fmt.Println("read:", err)
	} else {
		fmt.Println("read: ok")
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil); err != nil {
		fmt.Println("set:", err)
	} else {
		fmt.Println("set: ok")
	}
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &old, nil); err != nil {
		fmt.Println("set own:", err)
	} else {
		fmt.Println("set own: ok")
	}
	return 0
}
