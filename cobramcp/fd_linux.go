package cobramcp

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// captureFDs says whether this platform can repoint descriptors 0, 1 and 2 (Linux: dup3).
const captureFDs = true

// blockingPipe is a pipe whose read end is non-blocking (so it takes deadlines) and whose write
// end stays blocking: it becomes descriptor 1 or 2, which the Go runtime (os.Stdout) and child
// processes write to without expecting EAGAIN. Both ends are close-on-exec; dup3 onto 1 or 2
// gives an inheritable copy.
func blockingPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		closeFD(p[0])
		closeFD(p[1])
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	return os.NewFile(uintptr(p[0]), "cobramcp-capture-r"), os.NewFile(uintptr(p[1]), "cobramcp-capture-w"), nil
}

// dupCloexec duplicates fd to a close-on-exec descriptor, so that no process a command starts
// inherits it.
func dupCloexec(fd int) (int, error) {
	return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
}

// dup3 points descriptor to at what from points at.
func dup3(from, to int) error {
	for {
		err := unix.Dup3(from, to, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// redirect points descriptor fd at f, without switching f to blocking mode as f.Fd() would.
func redirect(f *os.File, fd int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("redirect descriptor %d: %w", fd, err)
	}
	var dupErr error
	if err := rc.Control(func(from uintptr) { dupErr = dup3(int(from), fd) }); err != nil {
		return fmt.Errorf("redirect descriptor %d: %w", fd, err)
	}
	if dupErr != nil {
		return fmt.Errorf("redirect descriptor %d: %w", fd, dupErr)
	}
	return nil
}

func closeFD(fd int) { _ = unix.Close(fd) }
