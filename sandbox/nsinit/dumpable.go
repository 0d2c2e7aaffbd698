package nsinit

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// A process that changes its uid, gid or file system ids gets the dumpable flag fs.suid_dumpable
// says, on its memory, until it sets it back (PR_SET_DUMPABLE 0) a few system calls later. At 1
// ("debug") the flag then lets processes of the new uid trace it and open its /proc/PID/mem, which
// the kernel checks only at the open: a descriptor opened in that moment stays. The processes that
// take a call's uid share memory with root's (the zygote's program process, until its exec; an
// init's forking thread, whose other threads are root), so at 1 a caller could read and write
// root's memory. At 0 the flag stays off, and at 2 only root may trace. On a root host no sandbox
// is built while the sysctl is 1: each call checks it just before its uid change (the sysctl may
// be set at any time, and set back: Probe, whose answer a host keeps, does not look at it). In a
// user namespace (a host that is not root) no process of a sandbox changes its ids.

// suidDumpableSysctl is fs.suid_dumpable.
const suidDumpableSysctl = "/proc/sys/fs/suid_dumpable"

// ErrSuidDumpable is the error of a root host's sandbox while fs.suid_dumpable is 1.
var ErrSuidDumpable = errors.New("fs.suid_dumpable is 1: a process that takes a call's uid could be traced by that uid while it shares memory with root's; no sandbox is built (set it to 0 or 2: sysctl -w fs.suid_dumpable=0)")

// checkSuidDumpable reads fs.suid_dumpable through fd, a descriptor of it (read from offset 0,
// so one descriptor serves every call): ErrSuidDumpable when it is 1, and an error when it cannot
// be read (fail closed).
func checkSuidDumpable(fd int) error {
	var buf [16]byte
	n, err := unix.Pread(fd, buf[:], 0)
	if err != nil {
		return fmt.Errorf("read fs.suid_dumpable: %w", err)
	}
	return suidDumpableIs(string(buf[:max(n, 0)]))
}

// suidDumpableIs is checkSuidDumpable's judgement of the sysctl's text.
func suidDumpableIs(text string) error {
	switch strings.TrimSpace(text) {
	case "0", "2":
		return nil
	case "1":
		return ErrSuidDumpable
	}
	return fmt.Errorf("fs.suid_dumpable reads %q", text)
}

// openSuidDumpable opens fs.suid_dumpable for checkSuidDumpable.
func openSuidDumpable() (int, error) {
	fd, err := unix.Open(suidDumpableSysctl, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open fs.suid_dumpable: %w", err)
	}
	return fd, nil
}

// CheckSuidDumpable reports whether a root host may build sandboxes now as far as fs.suid_dumpable
// goes: nil, ErrSuidDumpable (it is 1), or why it could not be read. A host that is not root
// builds them whatever it says (nil).
func CheckSuidDumpable() error {
	if os.Geteuid() != 0 {
		return nil
	}
	data, err := os.ReadFile(suidDumpableSysctl)
	if err != nil {
		return fmt.Errorf("read fs.suid_dumpable: %w", err)
	}
	return suidDumpableIs(string(data))
}
