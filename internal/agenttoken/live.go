package agenttoken

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Live is a state directory's tokens as another process (clihostd on the same state directory)
// changes them: each Check first looks whether the token file, the tokens folder, any file in it
// or the revoked list changed since the last look, and reads them again when one did, so that a
// token revoked there is refused here at once and one made there is accepted.
type Live struct {
	state string
	mu    sync.Mutex
	stamp string
	store *Store
}

// OpenLive opens the tokens of state directory dir (Open: the default token made at first use).
func OpenLive(dir string) (*Live, error) {
	l := &Live{state: dir}
	if _, err := l.current(); err != nil {
		return nil, err
	}
	return l, nil
}

// File is the file of the token name.
func (l *Live) File(name string) string { return (&Store{state: l.state}).File(name) }

// Check is Store.Check against the tokens as they are now. When they cannot be read again, it
// returns the error and no token is accepted.
func (l *Live) Check(header string) (string, Reason, error) {
	s, err := l.current()
	if err != nil {
		return "", Reason{Kind: WrongToken}, err
	}
	name, reason := s.Check(header)
	return name, reason, nil
}

// current is the store, read again when the files changed since the last look.
func (l *Live) current() (*Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	stamp := l.stampNow()
	if l.store != nil && stamp == l.stamp {
		return l.store, nil
	}
	s, err := Open(l.state)
	if err != nil {
		l.store, l.stamp = nil, ""
		return nil, err
	}
	// The stamp taken before Open: a change during Open makes the next look read them again.
	l.store, l.stamp = s, stamp
	return s, nil
}

// stampNow describes the token files as they are: each one's inode, size, change and
// modification times (the folder's too, so that a token made or deleted shows).
func (l *Live) stampNow() string {
	dir := filepath.Join(l.state, "tokens")
	paths := []string{filepath.Join(l.state, "token"), dir}
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	var b strings.Builder
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			fmt.Fprintf(&b, "%s -\n", p)
			continue
		}
		fmt.Fprintf(&b, "%s %d %d %d.%d %d.%d %d %o\n", p, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, st.Uid, st.Mode)
	}
	return b.String()
}
