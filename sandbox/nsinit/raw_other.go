//go:build !amd64

package nsinit

import "syscall"

// rawClone3 is not implemented on this architecture (see raw_amd64.s): the zygote is off.
func rawClone3(args *cloneArgs, size uintptr, p *rawProgram, report uintptr) (pid uintptr, errno uintptr) {
	return 0, uintptr(syscall.ENOSYS)
}

// rawCloneSupported reports whether this architecture has rawClone3.
const rawCloneSupported = false
