//go:build !linux

package proc_test

import "errors"

func escapeHelper(args []string) int { return 2 }

func sandboxedABI(args []string) int { return 2 }

func cloneInto(dir string) error { return errors.ErrUnsupported }

func okOr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func procHostHelper(dir string) int { return 2 }

func capsHostHelper(args []string) int { return 2 }

func laterMountsHelper(dir, mode string) int { return 2 }
