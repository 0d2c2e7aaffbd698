//go:build !amd64 || race

package nsinit

import "syscall"

// rawClone3 is not implemented on this architecture (see raw_amd64_norace.s), nor in a build with the
// race detector (whose runtime the raw children, sharing the memory of an instrumented process,
// do not survive): the zygote is off.
func rawClone3(args *cloneArgs, size uintptr, p *rawProgram, report uintptr) (pid uintptr, errno uintptr) {
	return 0, uintptr(syscall.ENOSYS)
}

// rawCloneSupported reports whether this architecture has rawClone3.
const rawCloneSupported = false
