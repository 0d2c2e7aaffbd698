package host

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// watchedMounts is this process's mount table kept between calls. Reading /proc/self/mountinfo
// costs the kernel a walk of every mount (60 µs for 23 mounts here, milliseconds on a host with
// hundreds), and every call checked its workspace against it. The file stays open instead, and
// the kernel marks it (POLLPRI) after every change of the mount namespace that adds, removes,
// moves or remounts a mount, mounts propagated in from a peer namespace and pivot_root included;
// what the checks use of an entry (its file system, folder and mount point) changes only with
// such a change, so the table is read again only then. A failure to poll counts as a change.
// The pool of sandbox inits does not rely on the event (its note says a poll once missed a mount
// while other processes cloned mount namespaces; 9,000 mounts and unmounts here, by this process
// and by mount(8), beside two loops of unshare -m, were each seen), so neither does this table
// alone: it is also read again when it is older than maxMountsAge.
var watchedMounts struct {
	sync.Mutex
	fd   int // open on /proc/self/mountinfo, or -1 before the first look
	list []mountEntry
	buf  []byte
	at   time.Time // when list was read
}

// maxMountsAge bounds how long the kept table is used without a change reported.
const maxMountsAge = time.Second

func init() { watchedMounts.fd = -1 }

// currentMounts returns this process's mount table (shared: callers must not change it).
func currentMounts() ([]mountEntry, error) {
	w := &watchedMounts
	w.Lock()
	defer w.Unlock()
	if w.fd < 0 {
		fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("mount table: %w", err)
		}
		w.fd = fd
	} else if !mountsChanged(w.fd) && time.Since(w.at) < maxMountsAge {
		return w.list, nil
	}
	text, err := readAllAt0(w.fd, w.buf[:0])
	if err != nil {
		unix.Close(w.fd)
		w.fd, w.list = -1, nil
		return nil, fmt.Errorf("mount table: %w", err)
	}
	w.buf = text
	w.list, w.at = parseMountinfo(text), time.Now()
	return w.list, nil
}

// mountsChanged reports whether the mount namespace changed since the file open at fd was last
// polled (or opened); an error answers yes.
func mountsChanged(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err != nil || n != 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR|unix.POLLNVAL) != 0
	}
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
