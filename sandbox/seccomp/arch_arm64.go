//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// nativeAuditArch is the AUDIT_ARCH value of syscalls made through the
// native AArch64 ABI. AArch32 compat syscalls carry AUDIT_ARCH_ARM.
const nativeAuditArch = unix.AUDIT_ARCH_AARCH64

// archDenied lists the syscalls refused with EPERM that exist only on this
// architecture (none on arm64: it has no iopl or ioperm).
var archDenied []uint32

// archModeSyscalls are the syscalls that set a mode which exist only on this architecture: none
// (arm64 has only the *at family).
var archModeSyscalls []modeSyscall

// emitABICheck is empty on arm64: the architecture check alone rejects
// every non-native ABI.
func emitABICheck(*builder) {}
