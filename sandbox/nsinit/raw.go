package nsinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A rawProgram is a list of system calls that a child cloned from a Go process runs before it
// execs (or, for a PID 1, before it settles into rawReap), with no Go runtime: the child of a
// raw clone has one thread, a share in the parent's memory (CLONE_VM: no page tables to copy) and
// a stack of its own, and must not allocate, grow its stack, take a lock or write a pointer. Everything the calls point
// to is prepared before the clone, in memory the program keeps (Go's heap does not move
// objects), and the child only reads it, substitutes the results of earlier calls where an op
// asks (registers), and reports the first failure as (op index, errno) on a pipe.
//
// The zygote (see zygote.go) builds two: a call's PID 1 and the program's own process.
type rawProgram struct {
	ops  []rawOp
	regs [16]uintptr
	msg  [2]uintptr // the failed op's index and errno, as the child reports it
	keep []any      // the memory the ops point to

	// reap makes the child run rawReap after its ops, watching reapCtl (a descriptor) and the
	// signalfd whose number the op saving into register reapSig left.
	reap    bool
	reapCtl uintptr
	poll    [2]unix.PollFd
	sigbuf  [8 * 128]byte // room for eight signalfd_siginfo records

	clone cloneArgs
	pidfd int32 // where clone3 stores the child's pidfd
	mask  [2]uint64
	stack []byte // the child's stack (mmap'd, outside Go's heap)
}

// cloneArgs is struct clone_args (linux/sched.h) up to its cgroup field (CLONE_ARGS_SIZE_VER2).
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// rawOp is one system call of a rawProgram.
type rawOp struct {
	nr      uintptr
	args    [6]uintptr
	ref     [6]int8 // ≥ 0: the argument is the result saved in that register, not args[i]
	save    int8    // ≥ 0: the register the result is saved in
	allow   uintptr // an errno that is not a failure (0: none)
	check   bool    // the result must be want
	want    uintptr
	out     []byte // memory the call writes: after it, it must hold outWant (as long)
	outWant []byte
	what    string // for the error; never read by the child
}

// expect makes o's result one that must be want: anything else is its failure.
func (o *rawOp) expect(want uintptr) *rawOp {
	o.check, o.want = true, want
	return o
}

// expectOut makes o one whose call must leave want in out (memory it writes, from buf): anything
// else is its failure.
func (o *rawOp) expectOut(out, want []byte) *rawOp {
	o.out, o.outWant = out, want
	return o
}

// unexpected is the errno a child reports for an op whose result was not the one it must be.
const unexpected = ^uintptr(0)

// reapSig is the register that holds a PID 1's signalfd.
const reapSig = 15

// ptr returns the address of a copy of v that p keeps.
func (p *rawProgram) ptr(v []byte) uintptr {
	c := append([]byte(nil), v...)
	p.keep = append(p.keep, c)
	return uintptr(unsafe.Pointer(&c[0]))
}

// buf returns a buffer of n bytes for a call of p to write, and its address (0 when n is 0). It
// starts filled with bufFill, not zeros, so that a call that writes nothing (one a service
// manager's seccomp filter answers with "success") does not leave an answer of zeros in it: an
// empty capability set, uid 0. The op that writes it keeps it (expectOut).
func (p *rawProgram) buf(n int) ([]byte, uintptr) {
	if n == 0 {
		return nil, 0
	}
	b := bytes.Repeat([]byte{bufFill}, n)
	p.keep = append(p.keep, b)
	return b, uintptr(unsafe.Pointer(&b[0]))
}

// bufFill is what a buf holds before its call writes it.
const bufFill = 0xa5

// ids returns the address of a copy of list as the kernel's 32-bit ids, kept by p (0 when list is
// empty).
func (p *rawProgram) ids(list ...int) uintptr {
	if len(list) == 0 {
		return 0
	}
	return p.ptr(idBytes(list...))
}

// idBytes is list as an array of the kernel's 32-bit ids (uid_t, gid_t).
func idBytes(list ...int) []byte {
	b := make([]byte, 0, 4*len(list))
	for _, id := range list {
		b = binary.NativeEndian.AppendUint32(b, uint32(id))
	}
	return b
}

// str returns the address of s as a NUL-terminated string p keeps.
func (p *rawProgram) str(s string) uintptr { return p.ptr(append([]byte(s), 0)) }

// strv returns the address of a NULL-terminated array of the NUL-terminated strings list, kept
// by p (an argv or envp).
func (p *rawProgram) strv(list []string) uintptr {
	v := make([]uintptr, 0, len(list)+1)
	for _, s := range list {
		v = append(v, p.str(s))
	}
	v = append(v, 0)
	p.keep = append(p.keep, v)
	return uintptr(unsafe.Pointer(&v[0]))
}

// call appends a system call with literal arguments and returns it, for the caller to set ref,
// save or allow before the next call.
func (p *rawProgram) call(what string, nr uintptr, args ...uintptr) *rawOp {
	op := rawOp{nr: nr, save: -1, what: what, ref: [6]int8{-1, -1, -1, -1, -1, -1}}
	copy(op.args[:], args)
	p.ops = append(p.ops, op)
	return &p.ops[len(p.ops)-1]
}

// closeAllBut appends the calls that close every descriptor but 0, 1 and 2 and those of keep
// (ascending, each above 2).
func (p *rawProgram) closeAllBut(keep ...int) {
	low := uintptr(3)
	for _, fd := range keep {
		if uintptr(fd) > low {
			p.call("close descriptors", unix.SYS_CLOSE_RANGE, low, uintptr(fd)-1, 0)
		}
		low = uintptr(fd) + 1
	}
	p.call("close descriptors", unix.SYS_CLOSE_RANGE, low, ^uintptr(0)>>1, 0)
}

// setrlimit appends a prlimit64 of the calling process's resource res.
func (p *rawProgram) setrlimit(res int, soft, hard uint64) {
	lim := make([]byte, 16)
	binary.NativeEndian.PutUint64(lim[0:], soft)
	binary.NativeEndian.PutUint64(lim[8:], hard)
	p.call(fmt.Sprintf("rlimit %d", res), unix.SYS_PRLIMIT64, 0, uintptr(res), p.ptr(lim), 0)
}

// unblockSignals appends the call that unblocks every signal, blocked since the clone (execve
// keeps the mask). The child has the default handlers: start clones with CLONE_CLEAR_SIGHAND, so
// that the Go runtime's never run in it.
func (p *rawProgram) unblockSignals() {
	p.call("unblock signals", unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, p.ptr(make([]byte, 8)), 0, 8)
}

// start clones the calling thread, which must be locked to its goroutine, with every signal
// blocked and every handler reset to the default (CLONE_CLEAR_SIGHAND), into a child that shares this process's memory (CLONE_VM) and runs p on a stack of its
// own; failures are written to report, a descriptor the child has (close-on-exec, so that an exec
// closes it). With vfork the caller is suspended until the child has exec'd or exited (p's ops
// end with an execve); without it the child runs beside the caller, and p (which it reads) and its
// stack must stay until it has exited (release). With cgroup ≥ 0 (a cgroup v2 directory) the
// child starts in that group (CLONE_INTO_CGROUP). It returns the child's pid (in this process's
// PID namespace) and a pidfd of it.
func (p *rawProgram) start(vfork bool, cgroup, report int) (pid, pidfd int, err error) {
	if !rawCloneSupported {
		return 0, -1, fmt.Errorf("clone: %w", syscall.ENOSYS)
	}
	if p.stack == nil {
		if p.stack, err = unix.Mmap(-1, 0, rawStackSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_STACK); err != nil {
			return 0, -1, fmt.Errorf("stack: %w", err)
		}
	}
	p.pidfd = -1
	p.clone = cloneArgs{flags: unix.CLONE_VM | unix.CLONE_PIDFD | unix.CLONE_CLEAR_SIGHAND, pidfd: uint64(uintptr(unsafe.Pointer(&p.pidfd))),
		exitSignal: uint64(unix.SIGCHLD), stack: uint64(uintptr(unsafe.Pointer(&p.stack[0]))), stackSize: rawStackSize}
	if vfork {
		p.clone.flags |= unix.CLONE_VFORK
	}
	if cgroup >= 0 {
		p.clone.flags |= unix.CLONE_INTO_CGROUP
		p.clone.cgroup = uint64(cgroup)
	}
	pid, errno := rawFork(p, uintptr(report))
	runtime.KeepAlive(p)
	if errno != 0 {
		return 0, -1, fmt.Errorf("clone: %w", errno)
	}
	return pid, int(p.pidfd), nil
}

// rawStackSize is the size of a child's stack: rawChild's frames and the system calls' need a few
// hundred bytes.
const rawStackSize = 64 << 10

// release frees the child's stack, once the child has exec'd or exited.
func (p *rawProgram) release() {
	if p.stack != nil {
		_ = unix.Munmap(p.stack)
		p.stack = nil
	}
}

// failure decodes a child's report (16 bytes: op index, errno) into an error naming the op (a
// *rawFailure when the index is one of p's).
func (p *rawProgram) failure(report []byte) error {
	i := binary.NativeEndian.Uint64(report[0:])
	e := uintptr(binary.NativeEndian.Uint64(report[8:]))
	switch {
	case i >= uint64(len(p.ops)):
		return fmt.Errorf("child failed: %d, %d", i, e)
	case e == unexpected:
		return &rawFailure{Op: p.ops[i].what, Err: errUnexpected}
	}
	return &rawFailure{Op: p.ops[i].what, Err: syscall.Errno(e)}
}

// A rawFailure is the failure of one op of a rawProgram's child.
type rawFailure struct {
	Op  string // the op's what
	Err error
}

func (f *rawFailure) Error() string { return f.Op + ": " + f.Err.Error() }
func (f *rawFailure) Unwrap() error { return f.Err }

// errUnexpected is the error of an op whose result (or the memory it wrote) was not what it must be.
var errUnexpected = errors.New("unexpected result")

// rawFork blocks every signal of the calling thread (a Go signal handler must not run in the
// child), clones it as p.clone says, with the child running p (rawClone3), and restores the mask.
// It returns the child's pid.
func rawFork(p *rawProgram, report uintptr) (int, syscall.Errno) {
	p.mask[0] = ^uint64(0)
	if _, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&p.mask[0])), uintptr(unsafe.Pointer(&p.mask[1])), 8, 0, 0); e != 0 {
		return 0, e
	}
	pid, e := rawClone3(&p.clone, unsafe.Sizeof(p.clone), p, report)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&p.mask[1])), 0, 8, 0, 0)
	return int(pid), syscall.Errno(e)
}

// rawChild runs p's system calls in order, in the child of rawClone3, on the child's own stack: a
// failure is written to report as (index, errno) and ends the child with status 127. After the ops
// it runs rawReap when p.reap is set, else exits with 126 (a program's ops end with an execve). It
// shares the Go process's memory but not its runtime: it must not allocate, grow its stack (it is
// not on a goroutine's), take a lock or write a pointer.
//
//go:nosplit
//go:norace
func rawChild(p *rawProgram, report uintptr) {
	for i := 0; i < len(p.ops); i++ {
		o := &p.ops[i]
		a := o.args
		for j := 0; j < 6; j++ {
			if r := o.ref[j]; r >= 0 {
				a[j] = p.regs[r&15]
			}
		}
		r, _, e := syscall.RawSyscall6(o.nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e == 0 && o.check && r != o.want {
			e = syscall.Errno(unexpected)
		}
		for j := 0; e == 0 && j < len(o.outWant); j++ {
			if j >= len(o.out) || o.out[j] != o.outWant[j] {
				e = syscall.Errno(unexpected)
			}
		}
		if e != 0 && uintptr(e) != o.allow {
			p.msg[0], p.msg[1] = uintptr(i), uintptr(e)
			syscall.RawSyscall6(unix.SYS_WRITE, report, uintptr(unsafe.Pointer(&p.msg[0])), 16, 0, 0, 0)
			syscall.RawSyscall6(unix.SYS_EXIT_GROUP, 127, 0, 0, 0, 0, 0)
		}
		if o.save >= 0 {
			p.regs[o.save&15] = r
		}
	}
	if p.reap {
		rawReap(p)
	}
	syscall.RawSyscall6(unix.SYS_EXIT_GROUP, 126, 0, 0, 0, 0, 0)
}

// rawReap is the loop of a call's PID 1: it reaps every child it is given (processes of the
// sandbox whose parent exited are re-parented to it) as their SIGCHLD arrives on its signalfd, and
// exits as soon as its control descriptor becomes readable or is closed (the zygote's thread
// says the program has ended, or died). Its exit makes the kernel kill and reap everything left
// in the PID namespace before the exit completes.
//
//go:nosplit
//go:norace
func rawReap(p *rawProgram) {
	p.poll[0] = unix.PollFd{Fd: int32(p.reapCtl), Events: unix.POLLIN}
	p.poll[1] = unix.PollFd{Fd: int32(p.regs[reapSig]), Events: unix.POLLIN}
	for {
		p.poll[0].Revents, p.poll[1].Revents = 0, 0
		_, _, e := syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&p.poll[0])), 2, 0, 0, 0, 0)
		if e != 0 && e != unix.EINTR {
			syscall.RawSyscall6(unix.SYS_EXIT_GROUP, 1, 0, 0, 0, 0, 0)
		}
		if p.poll[1].Revents != 0 {
			syscall.RawSyscall6(unix.SYS_READ, p.regs[reapSig], uintptr(unsafe.Pointer(&p.sigbuf[0])), uintptr(len(p.sigbuf)), 0, 0, 0)
			for {
				pid, _, e := syscall.RawSyscall6(unix.SYS_WAIT4, ^uintptr(0), 0, unix.WNOHANG|unix.WALL, 0, 0, 0)
				if e != 0 || pid == 0 {
					break
				}
			}
		}
		if p.poll[0].Revents != 0 {
			syscall.RawSyscall6(unix.SYS_EXIT_GROUP, 0, 0, 0, 0, 0, 0)
		}
	}
}
