package nsinit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mountTable tells whether this process's mount table changed since it last looked: the unique
// ids of every mount it can see (listmount, Linux 6.8 and later: a mount or unmount anywhere, one
// propagated from another namespace included, adds or removes one; ids are never reused), or on
// older kernels the text of /proc/self/mountinfo. (The POLLPRI event of /proc/self/mountinfo is
// not used: on the project's 6.18 kernel a poll after a mount missed it now and then while other
// processes cloned mount namespaces.)
type mountTable struct {
	ids  []uint64
	text []byte
	buf  []uint64
}

// mntIDReq is struct mnt_id_req, version 0 (MNT_ID_REQ_SIZE_VER0).
type mntIDReq struct {
	size  uint32
	spare uint32
	mntID uint64
	param uint64
}

// lsmtRoot is LSMT_ROOT: list from the caller's root.
const lsmtRoot = ^uint64(0)

// changed reports whether the table differs from the one seen at the previous call (the first call
// reports a change), and remembers the current one. A table that cannot be read counts as changed.
func (m *mountTable) changed() bool {
	ids, err := m.list()
	if errors.Is(err, unix.ENOSYS) {
		text, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return true
		}
		same := m.text != nil && bytes.Equal(text, m.text)
		m.text = text
		return !same
	}
	if err != nil {
		return true
	}
	same := m.ids != nil && slices.Equal(ids, m.ids)
	m.ids = append(m.ids[:0], ids...)
	return !same
}

// list returns the ids of every mount below this process's root, in m.buf (grown as needed).
func (m *mountTable) list() ([]uint64, error) {
	if m.buf == nil {
		m.buf = make([]uint64, 256)
	}
	for {
		req := mntIDReq{size: uint32(unsafe.Sizeof(mntIDReq{})), mntID: lsmtRoot}
		n, _, errno := unix.Syscall6(unix.SYS_LISTMOUNT, uintptr(unsafe.Pointer(&req)),
			uintptr(unsafe.Pointer(&m.buf[0])), uintptr(len(m.buf)), 0, 0, 0)
		switch {
		case errno != 0:
			return nil, fmt.Errorf("listmount: %w", errno)
		case int(n) < len(m.buf):
			return m.buf[:n], nil
		}
		m.buf = make([]uint64, 2*len(m.buf))
	}
}
