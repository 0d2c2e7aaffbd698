//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// nativeAuditArch is the AUDIT_ARCH value of syscalls made through the
// native x86_64 ABI. i386 (int 0x80) syscalls carry AUDIT_ARCH_I386.
const nativeAuditArch = unix.AUDIT_ARCH_X86_64

// x32SyscallBit is __X32_SYSCALL_BIT: x32 syscalls arrive with the x86_64
// AUDIT_ARCH and this bit set in the syscall number.
const x32SyscallBit = 0x40000000

// lX32 labels the check of syscall numbers carrying x32SyscallBit.
const lX32 label = "x32"

// archDenied lists the syscalls refused with EPERM that exist only on this
// architecture.
var archDenied = []uint32{unix.SYS_IOPL, unix.SYS_IOPERM}

// archModeSyscalls are the syscalls that set a mode which exist only on this architecture.
var archModeSyscalls = []modeSyscall{
	{nr: unix.SYS_CHMOD, mode: 1},
	{nr: unix.SYS_MKNOD, mode: 1},
	{nr: unix.SYS_CREAT, mode: 1},
	{nr: unix.SYS_OPEN, flags: 1, mode: 2, creates: true},
}

// emitABICheck kills x32 syscalls. It runs with the syscall number in A.
// Syscall number -1 is let through: it is not an x32 call, and the kernel
// answers it with ENOSYS.
func emitABICheck(b *builder) {
	b.jset(x32SyscallBit, lX32, "")
	b.deferBlock(lX32, func() {
		b.jeq(0xffffffff, lAllow, lKill)
	})
}
