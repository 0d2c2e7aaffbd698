package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInterpreterCacheFollowsTheFile: the interpreters remembered for an executable are used only
// while the reads that decided them get the same bytes. With the cache warm (a script written just
// now), rewriting it in place with another interpreter of the same length, or replacing it by
// another file, gives the next compilation the new interpreter, never the remembered one.
func TestInterpreterCacheFollowsTheFile(t *testing.T) {
	f := newFixture(t)
	sh, ls := realPath(t, "/usr/bin/sh"), realPath(t, "/usr/bin/ls")
	script := filepath.Join(realTemp(t), "tool")
	write(t, script, "#!/usr/bin/sh\n", 0o755)
	in := f.input(fsSandbox(nil, nil, nil))
	in.Binary = script
	wantIn(t, "Exec", f.compile(in).Exec, sh)
	interps.mu.Lock()
	_, warm := interps.m[script]
	interps.mu.Unlock()
	if !warm {
		t.Fatal("the interpreter was not remembered: this test proves nothing")
	}

	// The same length, in place (same inode and size, maybe the same times).
	rewriteInPlace(t, script, "#!/usr/bin/ls\n")
	p := f.compile(in)
	wantIn(t, "Exec", p.Exec, ls)
	wantNotIn(t, "Exec", p.Exec, sh)

	// Replaced by another file (a new inode) holding the first interpreter again.
	tmp := script + ".new"
	write(t, tmp, "#!/usr/bin/sh\n", 0o755)
	if err := os.Rename(tmp, script); err != nil {
		t.Fatal(err)
	}
	p = f.compile(in)
	wantIn(t, "Exec", p.Exec, sh)
	wantNotIn(t, "Exec", p.Exec, ls)
}
