//go:build amd64 && !race

package nsinit

// rawClone3 is implemented in raw_amd64_norace.s.
//
//go:noescape
func rawClone3(args *cloneArgs, size uintptr, p *rawProgram, report uintptr) (pid uintptr, errno uintptr)

// rawCloneSupported reports whether this architecture has rawClone3.
const rawCloneSupported = true
