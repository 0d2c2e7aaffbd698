// Package filestamp tells whether a file changed since an answer was read from it, for caches
// keyed on files (the user database, an executable's interpreter, the sandbox helper): its stamp
// (device, inode, size, modification and change times) changes with every write (times, size) and
// replacement (inode).
package filestamp

import (
	"io/fs"
	"syscall"
	"time"
)

// Stamp identifies one state of a file's content.
type Stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// RacyWindow is how long after a file's last change an answer read from it is not kept: a file
// written again within the same tick of the file system's clock could keep its stamp (git's "racy
// clean" rule). Tests may lower it.
var RacyWindow = 2 * time.Second

// Of returns the stamp of the file fi describes, and whether an answer read from it now may be
// kept (its last change is older than RacyWindow). Without stat data it returns false.
func Of(fi fs.FileInfo) (Stamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Stamp{}, false
	}
	return of(st)
}

// Path is Of for the file at path (following symbolic links); false when it cannot be stat'ed.
func Path(path string) (Stamp, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return Stamp{}, false
	}
	return of(&st)
}

func of(st *syscall.Stat_t) (Stamp, bool) {
	s := Stamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
	old := func(ts syscall.Timespec) bool { return time.Since(time.Unix(ts.Unix())) >= RacyWindow }
	return s, old(st.Mtim) && old(st.Ctim)
}
