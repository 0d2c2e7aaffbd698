//go:build linux && (amd64 || arm64)

package seccomp

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// programs caches the kernel form of Filter's program by Options: the program depends on nothing
// else (the syscall tables are compiled in), so each one is built once per process.
var programs sync.Map // Options -> []unix.SockFilter

// program returns the kernel form of the Filter for opts, built on first use.
func program(opts Options) ([]unix.SockFilter, error) {
	if p, ok := programs.Load(opts); ok {
		return p.([]unix.SockFilter), nil
	}
	raw, err := Filter(opts)
	if err != nil {
		return nil, err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	p, _ := programs.LoadOrStore(opts, filter)
	return p.([]unix.SockFilter), nil
}

// Program returns the kernel form of the Filter for opts, for a process that installs it itself
// with seccomp(SECCOMP_SET_MODE_FILTER) (a child forked without a Go runtime). The slice is shared:
// do not change it.
func Program(opts Options) ([]unix.SockFilter, error) { return program(opts) }

// Prepare builds and caches the program for opts ahead of Install (a sandbox init started before
// its call does it while it waits).
func Prepare(opts Options) error {
	_, err := program(opts)
	return err
}

// Install loads the Filter for opts on the calling thread only, with
// seccomp(SECCOMP_SET_MODE_FILTER) and no TSYNC, after setting that thread's
// no_new_privs. Neither can be undone; both survive fork and execve, and a
// fork copies the calling thread's. Other threads keep what they had.
//
// Call it last, right before forking the program, on a thread locked with
// runtime.LockOSThread that stays locked: the filter then binds that thread
// and what it forks, and the Go runtime runs nothing else on it.
func Install(opts Options) error {
	filter, err := program(opts)
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("seccomp: set no_new_privs: %w", errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: install filter: %w", errno)
	}
	return nil
}
