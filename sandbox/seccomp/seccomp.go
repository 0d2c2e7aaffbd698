// Package seccomp builds and installs the seccomp-bpf blocklist that clihost
// applies to a sandboxed CLI as the last step before execve.
//
// The filter allows by default and refuses a fixed set of kernel interfaces
// that a sandboxed CLI never needs and that have been used to escape or
// weaken a Landlock and namespace sandbox: io_uring, ptrace, namespace and
// mount manipulation, kernel-wide administration, TTY input injection, raw
// and exotic sockets, and (optionally) executable memfds. Syscalls made
// through a foreign ABI (i386 int 0x80 or x32 on x86_64, AArch32 on arm64)
// kill the process, because a per-number blocklist cannot cover them.
//
// Only linux/amd64 and linux/arm64 are supported; elsewhere Filter and
// Install return ErrUnsupported.
package seccomp

import "errors"

// ErrUnsupported is returned on platforms for which the package has no
// syscall table.
var ErrUnsupported = errors.New("seccomp: unsupported platform")

// Options adjusts the filter.
type Options struct {
	// NoExecMemfd refuses memfd_create with MFD_EXEC and execveat with
	// AT_EMPTY_PATH, the two ways to execute an anonymous in-memory file
	// that bypass Landlock's EXECUTE right. Set it when the manifest does
	// not allow arbitrary exec.
	NoExecMemfd bool
	// SealMemfds, with NoExecMemfd, also refuses memfd_create without MFD_NOEXEC_SEAL, so that no
	// anonymous file is ever executable: the equivalent of vm.memfd_noexec=2 where that sysctl
	// cannot be set (a sandbox in a user namespace, whose /proc/sys is the host's).
	SealMemfds bool
}
