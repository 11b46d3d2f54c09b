//go:build !linux

package proc_test

func prlimitOthers([]string) int { return 1 }
