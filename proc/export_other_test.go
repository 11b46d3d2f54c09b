//go:build !linux

package proc

// RootFence: there is no root fence off Linux.
func RootFence(on bool) {}

// ForkerCPU: there is no forker off Linux.
func ForkerCPU() int64 { return 0 }
