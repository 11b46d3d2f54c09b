//go:build !linux

package main

// keepInheritedToSelf: on this system the commands offstage runs inherit
// what it inherited; proc's sandbox is Linux's alone.
func keepInheritedToSelf() {}
