//go:build !linux

package main

// placeApart sets nothing here: the flag is ext4's (apart_linux.go).
func placeApart(string) bool { return false }
