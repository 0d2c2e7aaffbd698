#include "textflag.h"

// func int80(nr uint32) uint32
TEXT ·int80(SB), NOSPLIT, $0-12
	MOVL nr+0(FP), AX
	BYTE $0xCD; BYTE $0x80 // int $0x80: the i386 syscall ABI
	MOVL AX, ret+8(FP)
	RET
