//go:build linux

package seccomp

// archOnlyDenied lists the EPERM syscalls specific to arm64 (none).
var archOnlyDenied = map[string]uint32{}

// archSetUIDCases are TestFilterSetUID's cases for syscalls only this architecture has: none.
func archSetUIDCases() []vmCase { return nil }

// foreignNumberBits mark syscall numbers of another ABI: none on arm64.
const foreignNumberBits = 0
