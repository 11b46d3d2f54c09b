//go:build !linux

package proc_test

func escapeHelper(args []string) int { return 2 }

func sandboxedABI(args []string) int { return 2 }
