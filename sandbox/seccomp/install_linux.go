//go:build linux && (amd64 || arm64)

package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install sets no_new_privs if it is not already set and loads the Filter
// for opts with seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC),
// so that every thread of the process gets the filter (and no_new_privs).
// Neither can be undone; both survive execve.
//
// Call it last, right before execve, on a thread locked with
// runtime.LockOSThread: after Install the process can no longer create
// namespaces or mount.
func Install(opts Options) error {
	raw, err := Filter(opts)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}

	// no_new_privs is per thread; seccomp checks it on the calling thread
	// and TSYNC copies it to the others, so both calls must run on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("seccomp: read no_new_privs: %w", err)
	}
	if nnp != 1 {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("seccomp: set no_new_privs: %w", err)
		}
	}

	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: install filter: %w", errno)
	}
	if tid != 0 {
		// With TSYNC, a positive result is the thread that could not be
		// synchronized; no filter was installed.
		return fmt.Errorf("seccomp: install filter: thread %d cannot be synchronized", tid)
	}
	return nil
}
