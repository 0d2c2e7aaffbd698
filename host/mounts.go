package host

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// openMounts keeps /proc/self/mountinfo open, and the buffer its text is read into, between
// calls; the text itself is read again at every look. No table is kept: the POLLPRI event of the
// file reports mounts, unmounts and moves, but not a rename of a folder holding a mount point,
// which moves the mount in the table all the same (a bind mount of the state directory inside a
// folder then renamed to the workspace's name), so a table kept until an event judged the
// renamed workspace by where its mounts used to be.
var openMounts struct {
	sync.Mutex
	fd  int // open on /proc/self/mountinfo, or -1 before the first look
	buf []byte
}

func init() { openMounts.fd = -1 }

// currentMounts reads this process's mount table.
func currentMounts() ([]mountEntry, error) {
	o := &openMounts
	o.Lock()
	defer o.Unlock()
	if o.fd < 0 {
		fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("mount table: %w", err)
		}
		o.fd = fd
	}
	text, err := readAllAt0(o.fd, o.buf[:0])
	if err != nil {
		unix.Close(o.fd)
		o.fd = -1
		return nil, fmt.Errorf("mount table: %w", err)
	}
	o.buf = text
	return parseMountinfo(text), nil
}

// readAllAt0 reads the whole of the file open at fd from its start, appending to buf.
func readAllAt0(fd int, buf []byte) ([]byte, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, max(16<<10, cap(buf)))...)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}
