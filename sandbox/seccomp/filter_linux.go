//go:build linux && (amd64 || arm64)

package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data, the input of a seccomp program:
//
//	struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; };
//
// Both supported architectures are little-endian, so the low 32 bits of
// args[i] sit at argsOffset + 8*i.
const (
	nrOffset   = 0
	archOffset = 4
	argsOffset = 16
)

// Constants that golang.org/x/sys/unix does not export.
const (
	perLinux      = 0x0000     // PER_LINUX, from <linux/personality.h>
	personaQuery  = 0xffffffff // personality(0xffffffff) only reads the persona
	sockTypeMask  = 0xf        // SOCK_TYPE_MASK, from <linux/net.h>
	netlinkRoute  = unix.NETLINK_ROUTE
	ipprotoMPTCP  = unix.IPPROTO_MPTCP
	cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
		unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	// cloneRefused are the clone flags the filter refuses: new namespaces, and CLONE_PARENT, whose
	// child's parent is the caller's: for the sandbox's first process, a process outside the
	// sandbox (the zygote), which reaps only the children it made, while the PID namespace's init
	// cannot exit before every process of the namespace is reaped. The zygote also relies on it to
	// report a call's end before PID 1's exit (nsinit's sandboxEmpty: with CLONE_PARENT a process
	// of the call could be no descendant of PID 1).
	cloneRefused = cloneNewFlags | unix.CLONE_PARENT
)

// denied lists the syscalls refused with EPERM whatever their arguments, on
// every supported architecture (see archDenied for the rest).
var denied = []uint32{
	// io_uring performs socket, open and connect operations that seccomp
	// never sees.
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	// Cross-process memory access (Yama is not guaranteed on the host), and
	// reaching into another process's descriptors or memory advice without
	// ptrace.
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_PIDFD_GETFD, unix.SYS_PROCESS_MADVISE,
	// Namespaces: leaving or creating one undoes the sandbox's mount masks.
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	// Mount API, old and new.
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_OPEN_TREE,
	unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT,
	unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	// Kernel attack surface and system-wide administration.
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_ACCT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_SYSLOG,
	// The "shocker" file-handle escape.
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	// System clock.
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
}

// modeSyscall is a syscall that sets or creates a file mode: the index of its mode argument and,
// for the open family (creates), of the flags that say whether it creates a file at all.
type modeSyscall struct {
	nr          uint32
	mode, flags uint32
	creates     bool
}

// modeSyscalls are the syscalls of every supported architecture that set a mode (see
// archModeSyscalls for the rest).
var modeSyscalls = []modeSyscall{
	{nr: unix.SYS_FCHMOD, mode: 1},
	{nr: unix.SYS_FCHMODAT, mode: 2},
	{nr: sysFchmodat2, mode: 2},
	{nr: unix.SYS_MKNODAT, mode: 2},
	{nr: unix.SYS_OPENAT, flags: 2, mode: 3, creates: true},
}

// sysFchmodat2 and sysOpenat2 are fchmodat2(2) (Linux 6.6) and openat2(2), numbered alike on
// every architecture (x/sys/unix does not name fchmodat2).
const (
	sysFchmodat2 = 452
	sysOpenat2   = unix.SYS_OPENAT2
)

// Filter returns the BPF program that Install loads, ready to be passed to
// seccomp(2) or to a tool that takes a compiled filter (bwrap --seccomp).
//
// The program allows by default. In order it:
//   - kills the process for a non-native AUDIT_ARCH, and for x32 syscalls on
//     x86_64;
//   - returns EPERM for the syscalls in the package's deny list (io_uring,
//     ptrace and process_vm_*, unshare and setns, the mount family, bpf,
//     perf_event_open, userfaultfd, keyrings, kexec, modules, iopl and
//     ioperm, acct, swap, reboot, syslog, file handles, clock setting);
//   - returns ENOSYS for clone3, whose flags live in memory that seccomp
//     cannot read, so that libc falls back to clone;
//   - returns EPERM for clone with any CLONE_NEW* flag or CLONE_PARENT;
//   - allows personality only for PER_LINUX and the 0xffffffff query;
//   - returns EPERM for ioctl TIOCSTI and TIOCLINUX;
//   - allows socket for AF_UNIX, for AF_INET and AF_INET6 unless the type is
//     SOCK_RAW or SOCK_PACKET or the protocol is IPPROTO_MPTCP (EPERM), and
//     for AF_NETLINK with NETLINK_ROUTE only (EPROTONOSUPPORT otherwise);
//     any other family gets EAFNOSUPPORT, as does socketpair for anything but
//     AF_UNIX;
//   - returns EOPNOTSUPP for sendto, sendmsg and sendmmsg with MSG_FASTOPEN
//     (a TCP connect that Landlock's connect rule does not see);
//   - returns EPERM for chmod, fchmod, fchmodat, fchmodat2, mknod and
//     mknodat with S_ISUID in the mode, and for creat, and open and openat
//     with O_CREAT or O_TMPFILE, with S_ISUID in the mode; ENOSYS for
//     openat2, whose mode seccomp cannot read;
//   - with opts.NoExecMemfd, returns EPERM for memfd_create with MFD_EXEC and
//     execveat with AT_EMPTY_PATH; with opts.SealMemfds too, for memfd_create
//     without MFD_NOEXEC_SEAL.
//
// Integer arguments are compared on their low 32 bits, which is all the
// kernel reads for int and unsigned int parameters (and for clone flags), so
// setting high bits cannot slip past a rule.
func Filter(opts Options) ([]bpf.RawInstruction, error) {
	b := newBuilder()

	b.ld(archOffset)
	b.jeq(nativeAuditArch, "", lKill)
	b.ld(nrOffset)
	emitABICheck(b)

	// The syscalls the filter looks at, each with where it goes; the first entry of a number
	// counts. The dispatch is a binary search over them, everything else is allowed.
	var table dispatchTable
	for _, list := range [][]uint32{denied, archDenied} {
		for _, nr := range list {
			table.add(nr, lEPERM)
		}
	}
	table.add(unix.SYS_CLONE3, lENOSYS)

	table.add(unix.SYS_CLONE, lClone)
	b.deferBlock(lClone, func() {
		b.ld(argLow(0))
		b.jset(cloneRefused, lEPERM, lAllow)
	})

	table.add(unix.SYS_PERSONALITY, lPersonality)
	b.deferBlock(lPersonality, func() {
		b.ld(argLow(0))
		b.jeq(perLinux, lAllow, "")
		b.jeq(personaQuery, lAllow, lEPERM)
	})

	table.add(unix.SYS_IOCTL, lIoctl)
	b.deferBlock(lIoctl, func() {
		b.ld(argLow(1))
		b.jeq(unix.TIOCSTI, lEPERM, "")
		b.jeq(unix.TIOCLINUX, lEPERM, lAllow)
	})

	table.add(unix.SYS_SOCKET, lSocket)
	b.deferBlock(lSocket, func() {
		b.ld(argLow(0))
		b.jeq(unix.AF_UNIX, lAllow, "")
		b.jeq(unix.AF_INET, lInet, "")
		b.jeq(unix.AF_INET6, lInet, "")
		b.jeq(unix.AF_NETLINK, lNetlink, lEAFNOSUPPORT)
	})
	b.deferBlock(lInet, func() {
		b.ld(argLow(1))
		b.and(sockTypeMask)
		b.jeq(unix.SOCK_RAW, lEPERM, "")
		// (AF_INET, SOCK_PACKET) is still turned into a packet socket.
		b.jeq(unix.SOCK_PACKET, lEPERM, "")
		b.ld(argLow(2))
		b.jeq(ipprotoMPTCP, lEPERM, lAllow)
	})
	b.deferBlock(lNetlink, func() {
		b.ld(argLow(2))
		b.jeq(netlinkRoute, lAllow, lEPROTONOSUPPORT)
	})

	// A set-user-ID file left in a writable tree would run, outside the sandbox (whose mounts are
	// nosuid), as the uid the CLI ran as, for whoever runs it: no mode with S_ISUID is set or
	// created. openat2 carries its mode in memory seccomp cannot read: ENOSYS, so that libc and
	// Go fall back to openat.
	for _, m := range append(modeSyscalls, archModeSyscalls...) {
		l := label(fmt.Sprintf("mode%d", m.nr))
		table.add(m.nr, l)
		b.deferBlock(l, func() {
			if m.creates {
				b.ld(argLow(m.flags))
				b.jset(unix.O_CREAT|unix.O_TMPFILE, "", lAllow)
			}
			b.ld(argLow(m.mode))
			b.jset(unix.S_ISUID, lEPERM, lAllow)
		})
	}
	table.add(sysOpenat2, lENOSYS)

	// TCP Fast Open connects in sendto, sendmsg or sendmmsg, without connect(2), which is what
	// Landlock's TCP connect rule hooks: refused as on a socket without fast open, so that a
	// client falls back to connect.
	for _, s := range []struct{ nr, flags uint32 }{{unix.SYS_SENDTO, 3}, {unix.SYS_SENDMSG, 2}, {unix.SYS_SENDMMSG, 3}} {
		l := label(fmt.Sprintf("fastopen%d", s.nr))
		table.add(s.nr, l)
		b.deferBlock(l, func() {
			b.ld(argLow(s.flags))
			b.jset(unix.MSG_FASTOPEN, lEOPNOTSUPP, lAllow)
		})
	}

	table.add(unix.SYS_SOCKETPAIR, lSocketpair)
	b.deferBlock(lSocketpair, func() {
		b.ld(argLow(0))
		b.jeq(unix.AF_UNIX, lAllow, lEAFNOSUPPORT)
	})

	if opts.NoExecMemfd {
		table.add(unix.SYS_MEMFD_CREATE, lMemfd)
		b.deferBlock(lMemfd, func() {
			b.ld(argLow(1))
			if opts.SealMemfds {
				b.jset(unix.MFD_EXEC, lEPERM, "")
				b.jset(unix.MFD_NOEXEC_SEAL, lAllow, lEPERM)
			} else {
				b.jset(unix.MFD_EXEC, lEPERM, lAllow)
			}
		})
		table.add(unix.SYS_EXECVEAT, lExecveat)
		b.deferBlock(lExecveat, func() {
			b.ld(argLow(4))
			b.jset(unix.AT_EMPTY_PATH, lEPERM, lAllow)
		})
	}

	b.dispatch(table)
	b.emitDeferred()

	b.label(lAllow)
	b.ret(unix.SECCOMP_RET_ALLOW)
	b.label(lEPERM)
	b.ret(retErrno(unix.EPERM))
	b.label(lENOSYS)
	b.ret(retErrno(unix.ENOSYS))
	b.label(lEAFNOSUPPORT)
	b.ret(retErrno(unix.EAFNOSUPPORT))
	b.label(lEPROTONOSUPPORT)
	b.ret(retErrno(unix.EPROTONOSUPPORT))
	b.label(lEOPNOTSUPP)
	b.ret(retErrno(unix.EOPNOTSUPP))
	b.label(lKill)
	b.ret(unix.SECCOMP_RET_KILL_PROCESS)

	raw, err := b.assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: build filter: %w", err)
	}
	return raw, nil
}

// argLow returns the offset of the low 32 bits of syscall argument i.
func argLow(i uint32) uint32 { return argsOffset + 8*i }

// retErrno returns the seccomp action that fails a syscall with errno.
func retErrno(errno unix.Errno) uint32 {
	return unix.SECCOMP_RET_ERRNO | uint32(errno)&unix.SECCOMP_RET_DATA
}
