//go:build !linux

package proc_test

import "fmt"

// There is no sandbox, so no forker, off Linux.
func forkerHost() int      { fmt.Println("no forker on this system"); return 1 }
func forkerNet() int       { fmt.Println("no forker on this system"); return 1 }
func forkerExecFails() int { fmt.Println("no forker on this system"); return 1 }
