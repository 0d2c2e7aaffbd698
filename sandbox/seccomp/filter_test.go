//go:build linux && (amd64 || arm64)

package seccomp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Seccomp actions as the filter returns them.
var (
	actAllow           = uint32(unix.SECCOMP_RET_ALLOW)
	actKill            = uint32(unix.SECCOMP_RET_KILL_PROCESS)
	actEPERM           = retErrno(unix.EPERM)
	actENOSYS          = retErrno(unix.ENOSYS)
	actEAFNOSUPPORT    = retErrno(unix.EAFNOSUPPORT)
	actEPROTONOSUPPORT = retErrno(unix.EPROTONOSUPPORT)
)

// vm runs a Filter program in golang.org/x/net/bpf's interpreter.
type vm struct {
	t  *testing.T
	vm *bpf.VM
}

func newVM(t *testing.T, opts Options) vm {
	t.Helper()
	raw, err := Filter(opts)
	if err != nil {
		t.Fatalf("Filter(%+v): %v", opts, err)
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("Filter(%+v) has instructions that do not disassemble", opts)
	}
	m, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("NewVM: %v", err)
	}
	return vm{t, m}
}

// run feeds the program a struct seccomp_data. The interpreter loads words
// big-endian (network order) where the kernel loads them in host order, so
// each 32-bit word is stored big-endian here, keeping the kernel's
// little-endian word order inside each 64-bit argument.
func (m vm) run(arch, nr uint32, args ...uint64) uint32 {
	m.t.Helper()
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[nrOffset:], nr)
	binary.BigEndian.PutUint32(data[archOffset:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[argsOffset+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[argsOffset+8*i+4:], uint32(a>>32))
	}
	ret, err := m.vm.Run(data)
	if err != nil {
		m.t.Fatalf("run nr=%d: %v", nr, err)
	}
	return uint32(ret)
}

func actName(a uint32) string {
	switch a {
	case actAllow:
		return "ALLOW"
	case actKill:
		return "KILL_PROCESS"
	}
	if a&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO {
		return "ERRNO(" + unix.ErrnoName(unix.Errno(a&unix.SECCOMP_RET_DATA)) + ")"
	}
	return fmt.Sprintf("%#x", a)
}

type vmCase struct {
	name string
	nr   uint32
	args []uint64
	want uint32
}

func checkCases(t *testing.T, m vm, cases []vmCase) {
	t.Helper()
	for _, c := range cases {
		if got := m.run(nativeAuditArch, c.nr, c.args...); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, actName(got), actName(c.want))
		}
	}
}

func TestFilterArch(t *testing.T) {
	m := newVM(t, Options{})
	for _, arch := range []uint32{
		unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_AARCH64,
		unix.AUDIT_ARCH_ARM, unix.AUDIT_ARCH_RISCV64, 0,
	} {
		if arch == nativeAuditArch {
			continue
		}
		// 20 is getpid on i386: harmless syscalls must die too.
		for _, nr := range []uint32{20, unix.SYS_GETPID, unix.SYS_PTRACE, 0xffffffff} {
			if got := m.run(arch, nr); got != actKill {
				t.Errorf("arch %#x nr %d: got %s, want KILL_PROCESS", arch, nr, actName(got))
			}
		}
	}
	if got := m.run(nativeAuditArch, unix.SYS_GETPID); got != actAllow {
		t.Errorf("native getpid: got %s, want ALLOW", actName(got))
	}
}

// deniedByName are the syscalls refused with EPERM whatever their arguments, listed independently
// of the package's table so that a dropped entry fails the tests.
func deniedByName() map[string]uint32 {
	eperm := map[string]uint32{
		"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER,
		"io_uring_register": unix.SYS_IO_URING_REGISTER,
		"ptrace":            unix.SYS_PTRACE, "process_vm_readv": unix.SYS_PROCESS_VM_READV,
		"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
		"pidfd_getfd":       unix.SYS_PIDFD_GETFD, "process_madvise": unix.SYS_PROCESS_MADVISE,
		"unshare": unix.SYS_UNSHARE, "setns": unix.SYS_SETNS,
		"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT,
		"open_tree": unix.SYS_OPEN_TREE, "move_mount": unix.SYS_MOVE_MOUNT,
		"fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT,
		"fspick": unix.SYS_FSPICK, "mount_setattr": unix.SYS_MOUNT_SETATTR,
		"bpf": unix.SYS_BPF, "perf_event_open": unix.SYS_PERF_EVENT_OPEN,
		"userfaultfd": unix.SYS_USERFAULTFD, "keyctl": unix.SYS_KEYCTL,
		"add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
		"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
		"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE,
		"delete_module": unix.SYS_DELETE_MODULE, "acct": unix.SYS_ACCT,
		"swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "reboot": unix.SYS_REBOOT,
		"syslog": unix.SYS_SYSLOG, "open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
		"name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT,
		"settimeofday":      unix.SYS_SETTIMEOFDAY, "clock_settime": unix.SYS_CLOCK_SETTIME,
		"clock_adjtime": unix.SYS_CLOCK_ADJTIME, "adjtimex": unix.SYS_ADJTIMEX,
	}
	for name, nr := range archOnlyDenied {
		eperm[name] = nr
	}
	return eperm
}

func TestFilterDenied(t *testing.T) {
	m := newVM(t, Options{})
	for name, nr := range deniedByName() {
		// Arguments must not matter.
		for _, args := range [][]uint64{nil, {^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}} {
			if got := m.run(nativeAuditArch, nr, args...); got != actEPERM {
				t.Errorf("%s args %x: got %s, want ERRNO(EPERM)", name, args, actName(got))
			}
		}
	}
	checkCases(t, m, []vmCase{{"clone3", unix.SYS_CLONE3, nil, actENOSYS}})
}

// TestFilterEveryNumber runs every syscall number below 2048 and the largest ones through the
// program (the binary search over the numbers it looks at must send each to the right place),
// with all arguments 0: only the denied syscalls, clone3 and openat2, and socket and socketpair
// (family AF_UNSPEC) are refused; with SealMemfds, memfd_create without MFD_NOEXEC_SEAL too.
func TestFilterEveryNumber(t *testing.T) {
	want := map[uint32]uint32{unix.SYS_CLONE3: actENOSYS, sysOpenat2: actENOSYS,
		unix.SYS_SOCKET: actEAFNOSUPPORT, unix.SYS_SOCKETPAIR: actEAFNOSUPPORT}
	for _, nr := range deniedByName() {
		want[nr] = actEPERM
	}
	numbers := []uint32{0x7fffffff, 0xfffffffe}
	for nr := range uint32(2048) {
		numbers = append(numbers, nr)
	}
	for _, opts := range allOptions {
		m := newVM(t, opts)
		for _, nr := range numbers {
			w, ok := want[nr]
			if !ok {
				w = actAllow
			}
			if nr == unix.SYS_MEMFD_CREATE && opts.NoExecMemfd && opts.SealMemfds {
				w = actEPERM
			}
			if nr&foreignNumberBits != 0 {
				continue // x32: TestFilterX32
			}
			if got := m.run(nativeAuditArch, nr); got != w {
				t.Errorf("%+v: nr %d: got %s, want %s", opts, nr, actName(got), actName(w))
			}
		}
	}
}

func TestFilterAllowsOrdinarySyscalls(t *testing.T) {
	m := newVM(t, Options{})
	for _, nr := range []uint32{
		unix.SYS_READ, unix.SYS_WRITE, unix.SYS_OPENAT, unix.SYS_CLOSE, unix.SYS_MMAP,
		unix.SYS_EXECVE, unix.SYS_EXIT_GROUP, unix.SYS_GETPID, unix.SYS_FUTEX,
		unix.SYS_CONNECT, unix.SYS_WAIT4, unix.SYS_PRCTL, unix.SYS_SECCOMP,
		unix.SYS_MEMFD_CREATE, unix.SYS_EXECVEAT, 0,
	} {
		if got := m.run(nativeAuditArch, nr, 0, unix.MFD_EXEC, 0, 0, unix.AT_EMPTY_PATH); got != actAllow {
			t.Errorf("nr %d: got %s, want ALLOW", nr, actName(got))
		}
	}
}

func TestFilterClone(t *testing.T) {
	const threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS |
		unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	cases := []vmCase{
		{"fork", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, actAllow},
		{"thread", unix.SYS_CLONE, []uint64{threadFlags}, actAllow},
		{"vfork", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}, actAllow},
		{"pidfd", unix.SYS_CLONE, []uint64{unix.CLONE_PIDFD | uint64(unix.SIGCHLD)}, actAllow},
		{"high bits only", unix.SYS_CLONE, []uint64{0xffffffff00000000 | uint64(unix.SIGCHLD)}, actAllow},
		{"all new flags", unix.SYS_CLONE, []uint64{cloneNewFlags}, actEPERM},
		{"CLONE_PARENT", unix.SYS_CLONE, []uint64{unix.CLONE_PARENT | uint64(unix.SIGCHLD)}, actEPERM},
		{"CLONE_PARENT with high bits", unix.SYS_CLONE, []uint64{0xffffffff00000000 | unix.CLONE_PARENT}, actEPERM},
	}
	for name, f := range map[string]uint64{
		"CLONE_NEWNS": unix.CLONE_NEWNS, "CLONE_NEWCGROUP": unix.CLONE_NEWCGROUP,
		"CLONE_NEWUTS": unix.CLONE_NEWUTS, "CLONE_NEWIPC": unix.CLONE_NEWIPC,
		"CLONE_NEWUSER": unix.CLONE_NEWUSER, "CLONE_NEWPID": unix.CLONE_NEWPID,
		"CLONE_NEWNET": unix.CLONE_NEWNET,
	} {
		cases = append(cases,
			vmCase{name, unix.SYS_CLONE, []uint64{f | uint64(unix.SIGCHLD)}, actEPERM},
			vmCase{name + " with thread flags", unix.SYS_CLONE, []uint64{f | threadFlags}, actEPERM},
			vmCase{name + " with high bits", unix.SYS_CLONE, []uint64{0xffffffff00000000 | f}, actEPERM})
	}
	checkCases(t, newVM(t, Options{}), cases)
}

func TestFilterPersonality(t *testing.T) {
	const perLinux32, addrNoRandomize = 0x0008, 0x0040000
	p := func(v uint64) []uint64 { return []uint64{v} }
	checkCases(t, newVM(t, Options{}), []vmCase{
		{"PER_LINUX", unix.SYS_PERSONALITY, p(0), actAllow},
		{"query", unix.SYS_PERSONALITY, p(0xffffffff), actAllow},
		{"query, high bits", unix.SYS_PERSONALITY, p(^uint64(0)), actAllow},
		{"PER_LINUX, high bits", unix.SYS_PERSONALITY, p(0x100000000), actAllow},
		{"PER_LINUX32", unix.SYS_PERSONALITY, p(perLinux32), actEPERM},
		{"ADDR_NO_RANDOMIZE", unix.SYS_PERSONALITY, p(addrNoRandomize), actEPERM},
		{"PER_LINUX32, high bits", unix.SYS_PERSONALITY, p(0xffffffff00000000 | perLinux32), actEPERM},
		{"0xfffffffe", unix.SYS_PERSONALITY, p(0xfffffffe), actEPERM},
	})
}

func TestFilterIoctl(t *testing.T) {
	io := func(cmd uint64) []uint64 { return []uint64{0, cmd, 0} }
	checkCases(t, newVM(t, Options{}), []vmCase{
		{"TIOCSTI", unix.SYS_IOCTL, io(unix.TIOCSTI), actEPERM},
		{"TIOCLINUX", unix.SYS_IOCTL, io(unix.TIOCLINUX), actEPERM},
		{"TIOCSTI, high bits", unix.SYS_IOCTL, io(1<<32 | unix.TIOCSTI), actEPERM},
		{"TIOCLINUX, high bits", unix.SYS_IOCTL, io(0xffffffff00000000 | unix.TIOCLINUX), actEPERM},
		{"TCGETS", unix.SYS_IOCTL, io(unix.TCGETS), actAllow},
		{"TIOCGWINSZ", unix.SYS_IOCTL, io(unix.TIOCGWINSZ), actAllow},
		{"FICLONE", unix.SYS_IOCTL, io(unix.FICLONE), actAllow},
		{"TIOCSTI in fd", unix.SYS_IOCTL, []uint64{unix.TIOCSTI, unix.TCGETS}, actAllow},
	})
}

// TestFilterFastOpen: TCP Fast Open (MSG_FASTOPEN on sendto, sendmsg or sendmmsg) connects
// without connect(2), past Landlock's TCP connect rule: refused with EOPNOTSUPP (what a socket
// without fast open gives, so a client falls back to connect). Other flags pass.
func TestFilterFastOpen(t *testing.T) {
	const fastOpen = unix.MSG_FASTOPEN
	eopnotsupp := retErrno(unix.EOPNOTSUPP)
	sendto := func(flags uint64) []uint64 { return []uint64{3, 0, 10, flags, 0, 0} }
	sendmsg := func(flags uint64) []uint64 { return []uint64{3, 0, flags} }
	checkCases(t, newVM(t, Options{}), []vmCase{
		{"sendto fast open", unix.SYS_SENDTO, sendto(fastOpen), eopnotsupp},
		{"sendto fast open and more", unix.SYS_SENDTO, sendto(fastOpen | unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT), eopnotsupp},
		{"sendto fast open, high bits", unix.SYS_SENDTO, sendto(0xffffffff00000000 | fastOpen), eopnotsupp},
		{"sendmsg fast open", unix.SYS_SENDMSG, sendmsg(fastOpen), eopnotsupp},
		{"sendmmsg fast open", unix.SYS_SENDMMSG, []uint64{3, 0, 1, fastOpen}, eopnotsupp},
		{"sendto", unix.SYS_SENDTO, sendto(unix.MSG_NOSIGNAL), actAllow},
		{"sendto, high bits only", unix.SYS_SENDTO, sendto(1 << 61), actAllow},
		{"sendmsg", unix.SYS_SENDMSG, sendmsg(unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT), actAllow},
		{"sendmmsg", unix.SYS_SENDMMSG, []uint64{3, 0, 1, 0}, actAllow},
	})
}

func TestFilterSocket(t *testing.T) {
	s := func(family, typ, proto uint64) []uint64 { return []uint64{family, typ, proto} }
	const flags = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	cases := []vmCase{
		{"unix stream", unix.SYS_SOCKET, s(unix.AF_UNIX, unix.SOCK_STREAM, 0), actAllow},
		{"unix dgram", unix.SYS_SOCKET, s(unix.AF_UNIX, unix.SOCK_DGRAM|flags, 0), actAllow},
		{"unix seqpacket", unix.SYS_SOCKET, s(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0), actAllow},
		{"netlink route", unix.SYS_SOCKET, s(unix.AF_NETLINK, unix.SOCK_RAW|flags, unix.NETLINK_ROUTE), actAllow},
		{"netlink route dgram", unix.SYS_SOCKET, s(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_ROUTE), actAllow},
		{"netlink audit", unix.SYS_SOCKET, s(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT), actEPROTONOSUPPORT},
		{"netlink uevent", unix.SYS_SOCKET, s(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_KOBJECT_UEVENT), actEPROTONOSUPPORT},
		{"netlink netfilter", unix.SYS_SOCKET, s(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER), actEPROTONOSUPPORT},
		{"netlink route, high bits", unix.SYS_SOCKET, s(unix.AF_NETLINK, unix.SOCK_RAW, 1<<32|unix.NETLINK_ROUTE), actAllow},
		{"packet", unix.SYS_SOCKET, s(unix.AF_PACKET, unix.SOCK_RAW, 0x0300), actEAFNOSUPPORT},
		{"packet, high bits", unix.SYS_SOCKET, s(1<<32|unix.AF_PACKET, unix.SOCK_RAW, 0), actEAFNOSUPPORT},
		{"inet, high bits", unix.SYS_SOCKET, s(1<<32|unix.AF_INET, unix.SOCK_STREAM, 0), actAllow},
		{"vsock", unix.SYS_SOCKET, s(unix.AF_VSOCK, unix.SOCK_STREAM, 0), actEAFNOSUPPORT},
		{"bluetooth", unix.SYS_SOCKET, s(unix.AF_BLUETOOTH, unix.SOCK_STREAM, 0), actEAFNOSUPPORT},
		{"alg", unix.SYS_SOCKET, s(unix.AF_ALG, unix.SOCK_SEQPACKET, 0), actEAFNOSUPPORT},
		{"xdp", unix.SYS_SOCKET, s(unix.AF_XDP, unix.SOCK_RAW, 0), actEAFNOSUPPORT},
		{"unspec", unix.SYS_SOCKET, s(unix.AF_UNSPEC, unix.SOCK_STREAM, 0), actEAFNOSUPPORT},
		{"socketpair unix", unix.SYS_SOCKETPAIR, s(unix.AF_UNIX, unix.SOCK_STREAM|flags, 0), actAllow},
		{"socketpair inet", unix.SYS_SOCKETPAIR, s(unix.AF_INET, unix.SOCK_STREAM, 0), actEAFNOSUPPORT},
		{"socketpair netlink", unix.SYS_SOCKETPAIR, s(unix.AF_NETLINK, unix.SOCK_RAW, 0), actEAFNOSUPPORT},
	}
	for _, fam := range []uint64{unix.AF_INET, unix.AF_INET6} {
		name := map[uint64]string{unix.AF_INET: "inet", unix.AF_INET6: "inet6"}[fam]
		cases = append(cases,
			vmCase{name + " stream", unix.SYS_SOCKET, s(fam, unix.SOCK_STREAM, 0), actAllow},
			vmCase{name + " stream tcp", unix.SYS_SOCKET, s(fam, unix.SOCK_STREAM|flags, unix.IPPROTO_TCP), actAllow},
			vmCase{name + " dgram", unix.SYS_SOCKET, s(fam, unix.SOCK_DGRAM, unix.IPPROTO_UDP), actAllow},
			vmCase{name + " icmp dgram", unix.SYS_SOCKET, s(fam, unix.SOCK_DGRAM, unix.IPPROTO_ICMP), actAllow},
			vmCase{name + " raw", unix.SYS_SOCKET, s(fam, unix.SOCK_RAW, unix.IPPROTO_ICMP), actEPERM},
			vmCase{name + " raw with flags", unix.SYS_SOCKET, s(fam, unix.SOCK_RAW|flags, 0), actEPERM},
			vmCase{name + " raw, high bits", unix.SYS_SOCKET, s(fam, 1<<32|unix.SOCK_RAW, 0), actEPERM},
			vmCase{name + " packet", unix.SYS_SOCKET, s(fam, unix.SOCK_PACKET, 0), actEPERM},
			vmCase{name + " mptcp", unix.SYS_SOCKET, s(fam, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), actEPERM},
			vmCase{name + " mptcp with flags", unix.SYS_SOCKET, s(fam, unix.SOCK_STREAM|flags, unix.IPPROTO_MPTCP), actEPERM},
			vmCase{name + " mptcp, high bits", unix.SYS_SOCKET, s(fam, unix.SOCK_STREAM, 1<<32|unix.IPPROTO_MPTCP), actEPERM},
		)
	}
	checkCases(t, newVM(t, Options{}), cases)
}

func TestFilterNoExecMemfd(t *testing.T) {
	memfd := func(flags uint64) []uint64 { return []uint64{0, flags} }
	execveat := func(flags uint64) []uint64 { return []uint64{3, 0, 0, 0, flags} }
	on := []vmCase{
		{"memfd MFD_EXEC", unix.SYS_MEMFD_CREATE, memfd(unix.MFD_EXEC), actEPERM},
		{"memfd MFD_EXEC|MFD_CLOEXEC", unix.SYS_MEMFD_CREATE, memfd(unix.MFD_EXEC | unix.MFD_CLOEXEC), actEPERM},
		{"memfd MFD_EXEC, high bits", unix.SYS_MEMFD_CREATE, memfd(1<<32 | unix.MFD_EXEC), actEPERM},
		{"memfd MFD_CLOEXEC", unix.SYS_MEMFD_CREATE, memfd(unix.MFD_CLOEXEC), actAllow},
		{"memfd MFD_NOEXEC_SEAL", unix.SYS_MEMFD_CREATE, memfd(unix.MFD_NOEXEC_SEAL | unix.MFD_ALLOW_SEALING), actAllow},
		{"execveat AT_EMPTY_PATH", unix.SYS_EXECVEAT, execveat(unix.AT_EMPTY_PATH), actEPERM},
		{"execveat AT_EMPTY_PATH|AT_SYMLINK_NOFOLLOW", unix.SYS_EXECVEAT, execveat(unix.AT_EMPTY_PATH | unix.AT_SYMLINK_NOFOLLOW), actEPERM},
		{"execveat 0", unix.SYS_EXECVEAT, execveat(0), actAllow},
		{"execveat AT_SYMLINK_NOFOLLOW", unix.SYS_EXECVEAT, execveat(unix.AT_SYMLINK_NOFOLLOW), actAllow},
	}
	checkCases(t, newVM(t, Options{NoExecMemfd: true}), on)

	off := newVM(t, Options{})
	for _, c := range on {
		if got := off.run(nativeAuditArch, c.nr, c.args...); got != actAllow {
			t.Errorf("without NoExecMemfd, %s: got %s, want ALLOW", c.name, actName(got))
		}
	}
}

func TestFilterProgram(t *testing.T) {
	for _, opts := range []Options{{}, {NoExecMemfd: true}} {
		raw, err := Filter(opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > maxInstructions {
			t.Errorf("%+v: %d instructions", opts, len(raw))
		}
		// Every load must be an aligned word inside struct seccomp_data,
		// which is all the kernel's checker accepts.
		prog, _ := bpf.Disassemble(raw)
		for i, ins := range prog {
			if ld, ok := ins.(bpf.LoadAbsolute); ok && (ld.Size != 4 || ld.Off%4 != 0 || ld.Off >= 64) {
				t.Errorf("%+v: instruction %d: %v", opts, i, ld)
			}
		}
	}
}

func TestBuilderRejectsBadJumps(t *testing.T) {
	b := newBuilder()
	b.jeq(1, "nowhere", "")
	b.ret(0)
	if _, err := b.assemble(); err == nil {
		t.Error("undefined label: no error")
	}

	b = newBuilder()
	b.label("back")
	b.ret(0)
	b.jeq(1, "back", "")
	b.ret(0)
	if _, err := b.assemble(); err == nil {
		t.Error("backward jump: no error")
	}

	b = newBuilder()
	b.jeq(1, "far", "")
	for range 256 {
		b.ret(0)
	}
	b.label("far")
	b.ret(0)
	if _, err := b.assemble(); err == nil {
		t.Error("jump of 256: no error")
	}
}

// TestFilterSetUID: no mode with S_ISUID is set or created (a set-user-ID file left in the
// workspace would run as the CLI's uid for whoever runs it outside the sandbox); other modes,
// S_ISGID (git init --shared sets it on directories) and opens that create nothing pass; openat2,
// whose mode seccomp cannot read, gets ENOSYS.
func TestFilterSetUID(t *testing.T) {
	const at = uint64(0xffffff9c) // AT_FDCWD's low 32 bits
	cases := []vmCase{
		{"fchmod 4755", unix.SYS_FCHMOD, []uint64{3, 0o4755}, actEPERM},
		{"fchmod 4755, high bits", unix.SYS_FCHMOD, []uint64{3, 1<<32 | 0o4755}, actEPERM},
		{"fchmod 2775", unix.SYS_FCHMOD, []uint64{3, 0o2775}, actAllow},
		{"fchmod 755", unix.SYS_FCHMOD, []uint64{3, 0o755}, actAllow},
		{"fchmodat 4711", unix.SYS_FCHMODAT, []uint64{at, 0, 0o4711}, actEPERM},
		{"fchmodat 644", unix.SYS_FCHMODAT, []uint64{at, 0, 0o644}, actAllow},
		{"fchmodat2 6755", sysFchmodat2, []uint64{at, 0, 0o6755, 0}, actEPERM},
		{"mknodat S_IFREG|4755", unix.SYS_MKNODAT, []uint64{at, 0, unix.S_IFREG | 0o4755, 0}, actEPERM},
		{"mknodat S_IFIFO|644", unix.SYS_MKNODAT, []uint64{at, 0, unix.S_IFIFO | 0o644, 0}, actAllow},
		{"openat O_CREAT 4755", unix.SYS_OPENAT, []uint64{at, 0, unix.O_CREAT | unix.O_WRONLY, 0o4755}, actEPERM},
		{"openat O_TMPFILE 4755", unix.SYS_OPENAT, []uint64{at, 0, unix.O_TMPFILE | unix.O_RDWR, 0o4755}, actEPERM},
		{"openat O_CREAT 644", unix.SYS_OPENAT, []uint64{at, 0, unix.O_CREAT | unix.O_WRONLY, 0o644}, actAllow},
		{"openat O_RDONLY, a stray mode", unix.SYS_OPENAT, []uint64{at, 0, unix.O_RDONLY, 0o4755}, actAllow},
		{"openat2", sysOpenat2, []uint64{at, 0, 0, 24}, actENOSYS},
	}
	cases = append(cases, archSetUIDCases()...)
	checkCases(t, newVM(t, Options{}), cases)
}

// allOptions are every combination of Options.
var allOptions = []Options{{}, {NoExecMemfd: true}, {SealMemfds: true}, {NoExecMemfd: true, SealMemfds: true}}

// TestProgramCache: the program Install loads is the one Filter builds for the very options asked
// for, whatever was built (and cached) before: each combination is asked for twice, in an order
// where a cache keyed on anything less than the whole Options would hand back another's program.
func TestProgramCache(t *testing.T) {
	for _, opts := range append(slices.Clone(allOptions), allOptions...) {
		got, err := program(opts)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := Filter(opts)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]unix.SockFilter, len(raw))
		for i, ins := range raw {
			want[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: the cached program differs from Filter's", opts)
		}
	}
	a, _ := program(Options{})
	b, _ := program(Options{NoExecMemfd: true, SealMemfds: true})
	if slices.Equal(a, b) {
		t.Error("the programs with and without NoExecMemfd are the same: the test cannot tell them apart")
	}
}

// BenchmarkFilter builds the program from scratch (what the first Install of a process pays).
func BenchmarkFilter(b *testing.B) {
	for b.Loop() {
		if _, err := Filter(Options{NoExecMemfd: true}); err != nil {
			b.Fatal(err)
		}
	}
}
