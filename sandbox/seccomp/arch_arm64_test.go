//go:build linux

package seccomp

// archOnlyDenied lists the EPERM syscalls specific to arm64 (none).
var archOnlyDenied = map[string]uint32{}
