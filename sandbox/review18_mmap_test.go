package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// TestR18StampMissesMappedWrite: a process holding a shared writable mapping of the binary changes
// its content without the kernel updating mtime or ctime while the page stays dirty and writable
// in its page table (the times are updated at the write fault only, until writeback
// write-protects the page again): no stamp tells. After the second mapped write, Cache.Compile
// must not return the policy of the old content, nor a compilation the interpreter it remembers.
// (Review 18 found both did, when they trusted the file's stamp.)
func TestR18StampMissesMappedWrite(t *testing.T) {
	f := newFixture(t)
	script := filepath.Join(realTemp(t), "tool")
	write(t, script, "#!/usr/bin/sh\n", 0o755)
	fd, err := os.OpenFile(script, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	mem, err := unix.Mmap(int(fd.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	mem[2] = '/' // the write fault: the times change now, once
	in := f.input(fsSandbox(nil, nil, nil))
	in.Binary = script
	c := NewCache()
	before := cacheCheck(t, c, in, "first call", false)
	cacheCheck(t, c, in, "second call", true)
	var st0, st1 unix.Stat_t
	unix.Lstat(script, &st0)
	copy(mem, "#!/usr/bin/ls\n") // no fault: the page is writable already
	unix.Lstat(script, &st1)
	if st0.Ctim != st1.Ctim || st0.Mtim != st1.Mtim {
		t.Skip("the kernel updated the times of the mapped write (the page was written back): nothing to test")
	}
	got, err := c.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	remembered, err := Compile(in) // through the interpreters remembered (interps)
	if err != nil {
		t.Fatal(err)
	}
	interps.mu.Lock()
	interps.m = nil // a fresh compilation: one that never read this file before
	interps.mu.Unlock()
	want, err := Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(remembered.Exec, want.Exec) {
		t.Errorf("a compilation used the interpreter remembered for the old content: %v, want %v", remembered.Exec, want.Exec)
	}
	if reflect.DeepEqual(want.Exec, before.Exec) {
		t.Fatalf("the new #! line did not change Exec (%v): the test proves nothing", want.Exec)
	}
	if !reflect.DeepEqual(got.Exec, want.Exec) {
		t.Errorf("the cache kept the policy of the binary's old content:\n cache Exec: %v\n fresh Exec: %v", got.Exec, want.Exec)
	}
}
