package sandbox

import (
	"sync"

	"github.com/clihost/clihost/internal/filestamp"
)

// interpAnswer is what interpreterOf said of one file in one state.
type interpAnswer struct {
	stamp       filestamp.Stamp
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
		c.fs.asked.markOpaque("an executable read that its lstat did not find")
		return interpreterOf(p)
	}
	stamp, keep := filestamp.Of(fi)
	interps.mu.Lock()
	a, ok := interps.m[p]
	interps.mu.Unlock()
	if ok && a.stamp == stamp {
		c.fs.asked.stamp(p, fi)
		return a.interp, a.arg, a.script, nil
	}
	interp, arg, script, err = interpreterOf(p)
	if err != nil || !keep {
		// Read within RacyWindow of its last change: its stamp may not tell a later change.
		c.fs.asked.markOpaque("an executable read just after it changed")
		return interp, arg, script, err
	}
	c.fs.asked.stamp(p, fi)
	interps.mu.Lock()
	if interps.m == nil || len(interps.m) >= maxInterpCache {
		interps.m = map[string]interpAnswer{}
	}
	interps.m[p] = interpAnswer{stamp: stamp, interp: interp, arg: arg, script: script}
	interps.mu.Unlock()
	return interp, arg, script, nil
}
