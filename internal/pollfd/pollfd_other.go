//go:build !unix

package pollfd

import "os"

func pollable(*os.File) (*os.File, func()) { return nil, nil }
