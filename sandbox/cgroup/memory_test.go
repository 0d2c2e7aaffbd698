package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMemoryCurrent reads memory.current of a group's v2 directory (what nsinit.Pool compares a
// call's memory limit with before it hands a waiting init the call), and answers false without a
// v2 group or without the file — on any host: the directory here is a stand-in.
func TestMemoryCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.current"), []byte("4194304\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, ok := (&Group{v2: dir}).MemoryCurrent(); !ok || n != 4<<20 {
		t.Errorf("MemoryCurrent = %d, %v; want 4194304, true", n, ok)
	}
	if _, ok := (&Group{v2: t.TempDir()}).MemoryCurrent(); ok {
		t.Error("a v2 group without memory.current: ok")
	}
	if _, ok := (&Group{}).MemoryCurrent(); ok {
		t.Error("a group without v2: ok")
	}
	var none *Group
	if _, ok := none.MemoryCurrent(); ok {
		t.Error("a nil group: ok")
	}
}
