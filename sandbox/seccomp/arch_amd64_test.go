//go:build linux

package seccomp

import (
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// archOnlyDenied lists the EPERM syscalls specific to x86_64.
var archOnlyDenied = map[string]uint32{"iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM}

func TestFilterX32(t *testing.T) {
	checkCases(t, newVM(t, Options{}), []vmCase{
		{"x32 getpid", x32SyscallBit | unix.SYS_GETPID, nil, actKill},
		{"x32 ptrace", x32SyscallBit | unix.SYS_PTRACE, nil, actKill},
		{"x32 bit alone", x32SyscallBit, nil, actKill},
		{"x32 with high bits", 0x7fffffff, nil, actKill},
		{"nr -1", 0xffffffff, nil, actAllow},
	})
}

func init() {
	// An x32 getpid: the x86_64 syscall instruction with __X32_SYSCALL_BIT.
	probes["x32_getpid"] = func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0))
	}
	probes["int80_getpid"] = func(install func()) string {
		call, err := int80Getpid()
		if err != nil {
			return err.Error()
		}
		install()
		call()
		return "ok"
	}
}

// int80Getpid returns a function that makes the i386 getpid syscall (20)
// through int 0x80, the legacy ABI that 64-bit processes can still use. It
// is built from machine code because Go has no way to emit int 0x80 without
// an assembly file:
//
//	mov eax, 20; int 0x80; ret
func int80Getpid() (func(), error) {
	code := []byte{0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3}
	mem, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	copy(mem, code)
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		return nil, err
	}
	// A func value points to a word holding the code address.
	entry := uintptr(unsafe.Pointer(&mem[0]))
	fv := &entry
	return *(*func())(unsafe.Pointer(&fv)), nil
}

// TestKernelForeignABI makes real i386 and x32 syscalls and requires the
// filter to kill the process with SIGSYS, where the unfiltered baseline
// survives (the i386 getpid succeeds; x32 is ENOSYS on kernels built
// without it).
func TestKernelForeignABI(t *testing.T) {
	for _, name := range []string{"int80_getpid", "x32_getpid"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base, out, _ := runProbe(t, name, false, Options{})
			if base == "" {
				t.Skipf("the unfiltered probe did not finish (no IA32 emulation?); output:\n%s", out)
			}
			t.Logf("baseline %s", base)
			got, out, state := runProbe(t, name, true, Options{})
			ws := state.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
				t.Errorf("with filter: result %q, status %v; want death by SIGSYS; output:\n%s", got, state, out)
			}
		})
	}
}

// archSetUIDCases are TestFilterSetUID's cases for the syscalls only amd64 has.
func archSetUIDCases() []vmCase {
	return []vmCase{
		{"chmod 4755", unix.SYS_CHMOD, []uint64{0, 0o4755}, actEPERM},
		{"chmod 755", unix.SYS_CHMOD, []uint64{0, 0o755}, actAllow},
		{"creat 4755", unix.SYS_CREAT, []uint64{0, 0o4755}, actEPERM},
		{"creat 644", unix.SYS_CREAT, []uint64{0, 0o644}, actAllow},
		{"mknod S_IFREG|4755", unix.SYS_MKNOD, []uint64{0, unix.S_IFREG | 0o4755, 0}, actEPERM},
		{"open O_CREAT 4755", unix.SYS_OPEN, []uint64{0, unix.O_CREAT | unix.O_WRONLY, 0o4755}, actEPERM},
		{"open O_CREAT 600", unix.SYS_OPEN, []uint64{0, unix.O_CREAT | unix.O_WRONLY, 0o600}, actAllow},
		{"open O_RDONLY", unix.SYS_OPEN, []uint64{0, unix.O_RDONLY, 0}, actAllow},
	}
}

// foreignNumberBits mark syscall numbers of another ABI (x32), which the filter kills.
const foreignNumberBits = x32SyscallBit
