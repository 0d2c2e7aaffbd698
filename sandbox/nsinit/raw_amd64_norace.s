//go:build amd64 && !race

#include "textflag.h"

// func rawClone3(args *cloneArgs, size uintptr, p *rawProgram, report uintptr) (pid uintptr, errno uintptr)
//
// clone3(args, size). args names a stack of its own (the child shares the memory, CLONE_VM): the
// child starts on it, not on the caller's, and calls rawChild(p, report) there, which never
// returns. The parent returns the child's pid, or the errno.
TEXT ·rawClone3(SB),NOSPLIT|NOFRAME,$0-48
	MOVQ	args+0(FP), DI
	MOVQ	size+8(FP), SI
	MOVQ	p+16(FP), R12		// the kernel keeps every register but AX, CX and R11,
	MOVQ	report+24(FP), R13	// in the child as in the parent
	MOVQ	$435, AX		// SYS_clone3
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	NEGQ	AX
	MOVQ	$0, pid+32(FP)
	MOVQ	AX, errno+40(FP)
	RET
ok:
	MOVQ	AX, pid+32(FP)
	MOVQ	$0, errno+40(FP)
	RET
child:
	// On the new stack: rawChild(p, report), its arguments on the stack (ABI0).
	SUBQ	$16, SP
	MOVQ	R12, 0(SP)
	MOVQ	R13, 8(SP)
	CALL	·rawChild(SB)
	MOVL	$127, DI		// not reached: exit_group(127)
	MOVL	$231, AX
	SYSCALL
	INT	$3
