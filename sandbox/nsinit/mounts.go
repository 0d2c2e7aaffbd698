package nsinit

import (
	"errors"
	"fmt"

	"github.com/clihost/clihost/internal/kernfile"
	"golang.org/x/sys/unix"
)

// mountTable reads this process's mount table, for a Pool to compare an init's copy (the table
// when it was started) with the host's now. The text of /proc/self/mountinfo is compared: every mount's id, parent, place, options, propagation and
// file system options are there, so a mount, an unmount, a (bind) remount, a move or a change of
// propagation all show. (Not the unique mount ids of listmount alone: a remount or a move keeps
// them. Not the POLLPRI event of /proc/self/mountinfo: on the project's 6.18 kernel a poll after a
// mount missed it now and then while other processes cloned mount namespaces.) A read costs tens
// of microseconds for tens of mounts, growing with their number.
type mountTable struct {
	text []byte
	buf  []byte
	// proc, when not 0, is a descriptor of this process's directory in the host's procfs, read
	// through instead of /proc/self (which a thread in a mount namespace of its own, with another
	// procfs at /proc, cannot resolve).
	proc int
}

// read returns the current text of /proc/self/mountinfo in m.buf (grown as needed; valid until the
// next read).
func (m *mountTable) read() ([]byte, error) {
	dir, name := unix.AT_FDCWD, "/proc/self/mountinfo"
	if m.proc > 0 {
		dir, name = m.proc, "mountinfo"
	}
	if m.buf == nil {
		m.buf = make([]byte, 0, 16<<10)
	}
	buf, err := kernfile.AppendAt(m.buf[:0], dir, name)
	if err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	m.buf = buf
	return m.buf, nil
}

// rereadFD reads the whole of the file open at fd (a procfs table, which each read from offset 0
// makes anew) from its start, appending to buf[:0].
func rereadFD(fd int, buf []byte) ([]byte, error) {
	buf = buf[:0]
	if cap(buf) == 0 {
		buf = make([]byte, 0, 16<<10)
	}
	for off := int64(0); ; {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Pread(fd, buf[len(buf):cap(buf)], off)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, fmt.Errorf("mount table: %w", err)
		case n == 0:
			return buf, nil
		}
		buf, off = buf[:len(buf)+n], off+int64(n)
	}
}
