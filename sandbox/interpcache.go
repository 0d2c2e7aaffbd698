package sandbox

import (
	"io/fs"
	"sync"
	"syscall"
	"time"
)

// fileStamp identifies one state of a file's content: any write changes its modification or
// change time (or its size), and a replacement its inode.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// racyWindow is how long after a file's last change an answer read from it is not kept: a file
// written again within the same tick of the file system's clock could keep its stamp (git's "racy
// clean" rule).
var racyWindow = 2 * time.Second

// stampOf returns fi's stamp, and whether an answer read from the file now may be kept.
func stampOf(fi fs.FileInfo) (fileStamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, false
	}
	s := fileStamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
	old := func(ts syscall.Timespec) bool { return time.Since(time.Unix(ts.Unix())) >= racyWindow }
	return s, old(st.Mtim) && old(st.Ctim)
}

// interpAnswer is what interpreterOf said of one file in one state.
type interpAnswer struct {
	stamp       fileStamp
	interp, arg string
	script      bool
}

// maxInterpCache bounds the interpreters remembered (a few per bundle).
const maxInterpCache = 512

// interps remembers, per resolved executable, its interpreter for as long as the file keeps its
// stamp: reading and parsing the ELF headers of the binary and of its loader was a fifth of a
// compilation. An executable whose stamp changed is read again.
var interps struct {
	mu sync.Mutex
	m  map[string]interpAnswer
}

// interpreterOf is interpreterOf(p) through the cache; p is resolved (no symbolic links) and the
// view's lstat of it gives its stamp.
func (c *compiler) interpreterOf(p string) (interp, arg string, script bool, err error) {
	fi, err := c.fs.lstat(p)
	if err != nil {
		return interpreterOf(p)
	}
	stamp, keep := stampOf(fi)
	interps.mu.Lock()
	a, ok := interps.m[p]
	interps.mu.Unlock()
	if ok && a.stamp == stamp {
		return a.interp, a.arg, a.script, nil
	}
	interp, arg, script, err = interpreterOf(p)
	if err != nil || !keep {
		return interp, arg, script, err
	}
	interps.mu.Lock()
	if interps.m == nil || len(interps.m) >= maxInterpCache {
		interps.m = map[string]interpAnswer{}
	}
	interps.m[p] = interpAnswer{stamp: stamp, interp: interp, arg: arg, script: script}
	interps.mu.Unlock()
	return interp, arg, script, nil
}
