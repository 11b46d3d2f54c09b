//go:build !linux

package proc_test

func escapeHelper(args []string) int { return 2 }
