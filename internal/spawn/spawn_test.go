package spawn

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The close_range path runs in every Run; this covers the /proc fallback for kernels before 5.11.
func TestStrayFDsCloseOnExecByProc(t *testing.T) {
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0) // deliberately without O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC != 0 {
		t.Fatal("syscall.Open set FD_CLOEXEC; the test cannot tell anything")
	}
	if err := strayFDsCloseOnExecByProc(); err != nil {
		t.Fatal(err)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("fd %d flags %#x (%v), want FD_CLOEXEC", fd, flags, err)
	}
}
