package sandbox

import "sync"

// interpAnswer is what interpreterOf said of one file, and the reads it made of it.
type interpAnswer struct {
	reads       []fileRead
	interp, arg string
	script      bool
}

// maxInterpCache bounds the interpreters remembered (a few per bundle).
const maxInterpCache = 512

// interps remembers, per resolved executable, its interpreter and the reads that decided it:
// parsing the ELF headers of the binary and of its loader was a fifth of a compilation. The
// answer is used again while the same reads of the file get the same bytes (a few pages read
// again, see sameReads), so a file rewritten in any way, within a tick of its clock or through a
// shared mapping that changes no time, is read anew.
var interps struct {
	mu sync.Mutex
	m  map[string]interpAnswer
}

// interpreterOf is interpreterOf(p) through the cache, its reads recorded in the compilation's
// journal; p is resolved (no symbolic links).
func (c *compiler) interpreterOf(p string) (interp, arg string, script bool, err error) {
	interps.mu.Lock()
	a, ok := interps.m[p]
	interps.mu.Unlock()
	if ok && sameReads(p, a.reads) {
		c.fs.asked.content(p, a.reads)
		return a.interp, a.arg, a.script, nil
	}
	interp, arg, script, reads, err := interpreterOf(p)
	if err != nil {
		return interp, arg, script, err
	}
	c.fs.asked.content(p, reads)
	interps.mu.Lock()
	if interps.m == nil || len(interps.m) >= maxInterpCache {
		interps.m = map[string]interpAnswer{}
	}
	interps.m[p] = interpAnswer{reads: reads, interp: interp, arg: arg, script: script}
	interps.mu.Unlock()
	return interp, arg, script, nil
}
