package nsinit

import (
	"bytes"
	"fmt"
	"os"
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
}

// read returns the current text of /proc/self/mountinfo in m.buf (grown as needed; valid until the
// next read).
func (m *mountTable) read() ([]byte, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	defer f.Close()
	if m.buf == nil {
		m.buf = make([]byte, 0, 16<<10)
	}
	b := bytes.NewBuffer(m.buf[:0])
	if _, err := b.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	m.buf = b.Bytes()
	return m.buf, nil
}
