// Package kernfile reads and writes the small files of the kernel's pseudo file systems (procfs,
// cgroupfs) with plain system calls, and opens descriptors meant for another process, all outside
// Go's runtime poller.
//
// os.Open registers every file whose file system can poll it (procfs's and cgroupfs's can) with
// the runtime's epoll set, and os.File.Fd puts a registered file back into blocking mode: four to
// six system calls more per file than the open, read and close the job needs. A sandboxed call
// reads and writes several such files on its path (the mount table, the umask, its control
// groups' limits and events).
package kernfile

import (
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// ReadFile reads the whole of the file at path (opened read-only, close-on-exec).
func ReadFile(path string) ([]byte, error) {
	return AppendAt(make([]byte, 0, 4096), unix.AT_FDCWD, path)
}

// AppendAt appends the whole of the file name, relative to the directory dirfd (unix.AT_FDCWD:
// the working directory), to buf and returns the extended buffer: a caller that reads the same
// file often reuses one buffer. On an error it returns buf as far as it was filled.
func AppendAt(buf []byte, dirfd int, name string) ([]byte, error) {
	fd, err := ignoringEINTR(func() (int, error) { return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return buf, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(len(buf), 4096))
		}
		n, err := ignoringEINTR(func() (int, error) { return unix.Read(fd, buf[len(buf):cap(buf)]) })
		if err != nil {
			return buf, &os.PathError{Op: "read", Path: name, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// WriteFile writes s to the existing file at path in one write (a control file takes its value
// in one write: a short one is an error).
func WriteFile(path, s string) error {
	fd, err := open(path, unix.O_WRONLY)
	if err != nil {
		return err
	}
	n, err := ignoringEINTR(func() (int, error) { return unix.Write(fd, []byte(s)) })
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil && n != len(s) {
		err = fmt.Errorf("short write (%d of %d bytes)", n, len(s))
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// Open opens the file at path with flag (O_CLOEXEC is added) as a blocking descriptor the
// runtime's poller does not hold: for a file handed to another process, read or written there.
func Open(path string, flag int) (*os.File, error) {
	fd, err := open(path, flag)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// open opens path with flag and O_CLOEXEC, retrying on EINTR; the error is an *os.PathError.
func open(path string, flag int) (int, error) {
	fd, err := ignoringEINTR(func() (int, error) { return unix.Open(path, flag|unix.O_CLOEXEC, 0) })
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// ignoringEINTR calls f until it does not fail with EINTR (a signal handler without SA_RESTART).
func ignoringEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}
