package main

import (
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func init() { cases["linger"] = linger }

// linger TOKEN is a CLI that will not go away: it ignores SIGTERM, SIGINT and SIGHUP and forks (a
// raw clone, no exec, so the child's command line is the probe's own, TOKEN included) a child that
// starts a session of its own; both then block forever. Only the end of the sandbox ends them.
func linger(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 {
		return result("clone", errno)
	}
	if pid == 0 { // the child: no Go runtime calls, only raw syscalls
		unix.RawSyscall(unix.SYS_SETSID, 0, 0, 0)
		for {
			unix.RawSyscall6(unix.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
		}
	}
	for {
		time.Sleep(time.Hour) // select{} would be a deadlock to the Go runtime
	}
}
