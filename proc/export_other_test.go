//go:build !linux

package proc

// RootFence: there is no root fence off Linux.
func RootFence(on bool) {}

// ForkerCPU: there is no forker off Linux.
func ForkerCPU() int64 { return 0 }

// OwnFork: there is no fork of our own off Linux.
func OwnFork(on bool) int64 { return 0 }
