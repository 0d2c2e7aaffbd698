package host

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/sandbox"
)

func TestHomeWriteRoots(t *testing.T) {
	b := &manifest.Bundle{CLI: &manifest.CLI{ID: "demo", Version: "1.0.0", Bin: "true", Sandbox: manifest.Sandbox{FS: &manifest.FS{
		Write: []string{"~/.gemini/**", "~/.config/demo/**", "~/.netrc", "./out/**", "/var/tmp/demo/**", "~/*.log"}}}}}
	got := homeWriteRoots(b, nil)
	if want := []string{".gemini", ".config/demo"}; !slices.Equal(got, want) {
		t.Fatalf("homeWriteRoots = %q, want %q", got, want)
	}
	// A tool narrows: only what both declare is written.
	te := &manifest.ToolEntry{Path: []string{"run"}, Tool: &manifest.Tool{ID: "demo.run", Sandbox: &manifest.Sandbox{FS: &manifest.FS{Write: []string{"~/.gemini/**"}}}}}
	if got := homeWriteRoots(b, te); !slices.Equal(got, []string{".gemini"}) {
		t.Fatalf("homeWriteRoots with a tool = %q", got)
	}
}

// TestMakeWriteRoots: missing ~ write roots are created (0700, owned by the call's identity when the
// host is root), never through a symbolic link or over a file, and an existing folder keeps its
// owner.
func TestMakeWriteRoots(t *testing.T) {
	home := t.TempDir()
	outside := t.TempDir()
	asRoot := os.Geteuid() == 0
	id := sandbox.Identity{UID: os.Geteuid(), GID: os.Getegid()}
	if asRoot {
		id = sandbox.Identity{UID: 65534, GID: 65534}
	}
	if err := os.Symlink(outside, filepath.Join(home, ".planted")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(home, ".config"), 0o755); err != nil {
		t.Fatal(err)
	}
	rels := []string{".gemini", ".config/demo/deep", ".planted/x", ".file/x"}
	if err := makeWriteRoots(home, id, rels, asRoot); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".gemini", ".config/demo", ".config/demo/deep"} {
		st, err := os.Lstat(filepath.Join(home, d))
		if err != nil || !st.IsDir() || st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v %v, want a 0700 folder", d, st, err)
			continue
		}
		if uid := int(st.Sys().(*syscall.Stat_t).Uid); uid != id.UID {
			t.Errorf("%s belongs to uid %d, want %d", d, uid, id.UID)
		}
	}
	if st, _ := os.Lstat(filepath.Join(home, ".config")); int(st.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
		t.Error("an existing folder changed owner")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("a folder was created through the planted link: %v", entries)
	}
	if st, err := os.Lstat(filepath.Join(home, ".planted")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was replaced: %v %v", st, err)
	}
	// No home: nothing to create, no error.
	if err := makeWriteRoots(noHome, id, rels, asRoot); err != nil {
		t.Fatal(err)
	}
	if err := makeWriteRoots(filepath.Join(home, "gone"), id, rels, asRoot); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, "gone")); err == nil {
		t.Error("a missing home was created")
	}
}

// TestGiveToOnlyWhatTheHostMade: a folder swapped in under the name the host just created (not
// empty, or not the host's) is not handed to the call's uid.
func TestGiveToOnlyWhatTheHostMade(t *testing.T) {
	fixture.NeedRoot(t) // chown; the unprivileged host never changes an owner
	id := sandbox.Identity{UID: 65534, GID: 65534}
	dir := t.TempDir()
	full, theirs, fresh := filepath.Join(dir, "full"), filepath.Join(dir, "theirs"), filepath.Join(dir, "fresh")
	for _, d := range []string{full, theirs, fresh} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(full, "secret"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 1, 1); err != nil {
		t.Fatal(err)
	}
	for d, wantUID := range map[string]int{full: 0, theirs: 1, fresh: id.UID} {
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = giveTo(fd, id)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(d)
		if uid := int(st.Sys().(*syscall.Stat_t).Uid); uid != wantUID {
			t.Errorf("%s belongs to %d, want %d", d, uid, wantUID)
		}
	}
}
