package beneath

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"testing/fstest"
)

// tree makes a folder with files, in-folder symlinks, symlinks out of it (absolute, relative, a
// directory) and a FIFO; it returns the folder.
func tree(t *testing.T) string {
	t.Helper()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret"), "OUTSIDE")
	root := filepath.Join(t.TempDir(), "bundle")
	write(t, filepath.Join(root, "a.txt"), "inside")
	write(t, filepath.Join(root, "sub", "b.txt"), "b")
	for link, target := range map[string]string{
		"link-in":   "a.txt",
		"sub/up":    "../a.txt",
		"abs":       filepath.Join(outside, "secret"),
		"rel-out":   "../../" + filepath.Base(outside) + "/secret",
		"dirlink":   outside,
		"proc-self": "/proc/self/root" + filepath.Join(outside, "secret"),
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, ".."), filepath.Join(root, "sub", "parent")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(f fs.FS, name string) (string, error) {
	b, err := fs.ReadFile(f, name)
	return string(b), err
}

// withoutOpenat2 runs the rest of the test as on a kernel without openat2.
func withoutOpenat2(t *testing.T) {
	old := haveOpenat2
	haveOpenat2 = func() bool { return false }
	t.Cleanup(func() { haveOpenat2 = old })
}

// TestConfined: with openat2, files and symlinks that stay beneath the folder open; every way out
// (an absolute link, a relative one with .., a linked directory, a magic /proc link, a link to
// the parent) is refused with ErrOutside, by Open, Stat and Sub alike; a FIFO is refused
// (ErrNotFile) at once rather than waiting for a writer.
func TestConfined(t *testing.T) {
	if !haveOpenat2() {
		t.Skip("this kernel has no openat2")
	}
	testConfined(t, true)
}

// TestConfinedWithoutOpenat2: where the kernel has no openat2 every symbolic link is refused, the
// ones that stay inside too, and the rest is as with openat2.
func TestConfinedWithoutOpenat2(t *testing.T) {
	withoutOpenat2(t)
	testConfined(t, false)
}

func testConfined(t *testing.T, openat2 bool) {
	root := tree(t)
	f, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.txt", "sub/b.txt"} {
		if got, err := read(f, name); err != nil || got != map[string]string{"a.txt": "inside", "sub/b.txt": "b"}[name] {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	for _, name := range []string{"link-in", "sub/up"} {
		got, err := read(f, name)
		if openat2 && (err != nil || got != "inside") {
			t.Errorf("%s (a link inside): %q, %v; want the file inside", name, got, err)
		}
		if !openat2 && !errors.Is(err, ErrOutside) {
			t.Errorf("%s (a link, no openat2): %q, %v; want ErrOutside", name, got, err)
		}
	}
	for _, name := range []string{"abs", "rel-out", "dirlink/secret", "proc-self", "sub/parent/a.txt"} {
		if got, err := read(f, name); !errors.Is(err, ErrOutside) {
			t.Errorf("Open %s: %q, %v; want ErrOutside", name, got, err)
		}
		if _, err := f.Stat(name); !errors.Is(err, ErrOutside) {
			t.Errorf("Stat %s: %v; want ErrOutside", name, err)
		}
	}
	if _, err := f.Sub("dirlink"); !errors.Is(err, ErrOutside) {
		t.Errorf("Sub dirlink: %v; want ErrOutside", err)
	}
	if _, err := f.Open("fifo"); !errors.Is(err, ErrNotFile) {
		t.Errorf("Open fifo: %v; want ErrNotFile", err)
	}
	if fi, err := f.Stat("fifo"); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
		t.Errorf("Stat fifo: %v, %v", fi, err)
	}
	for _, name := range []string{"../a.txt", "/etc/passwd", ""} {
		if _, err := f.Open(name); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("Open %q: %v; want ErrInvalid", name, err)
		}
	}
	// A Sub is confined to its own folder: sub/up leads to the parent's a.txt.
	sub, err := fs.Sub(f, "sub")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read(sub, "b.txt"); err != nil || got != "b" {
		t.Errorf("sub b.txt: %q, %v", got, err)
	}
	if got, err := read(sub, "up"); !errors.Is(err, ErrOutside) {
		t.Errorf("sub up: %q, %v; want ErrOutside", got, err)
	}
}

// TestSwapAfterOpen: the folder's descriptor is taken once; renaming the folder away and putting a
// symlink to somewhere else in its place does not change what the FS serves.
func TestSwapAfterOpen(t *testing.T) {
	root := tree(t)
	f, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	write(t, filepath.Join(other, "a.txt"), "OTHER")
	if err := os.Rename(root, root+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, root); err != nil {
		t.Fatal(err)
	}
	if got, err := read(f, "a.txt"); err != nil || got != "inside" {
		t.Errorf("a.txt after the swap: %q, %v; want the opened folder's", got, err)
	}
}

// TestFS: the FS passes testing/fstest's checks on a tree of plain files and folders.
func TestFS(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "a.txt"), "a")
	write(t, filepath.Join(root, "d", "e", "f.txt"), "f")
	f, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(f, "a.txt", "d/e/f.txt"); err != nil {
		t.Fatal(err)
	}
	file, err := f.Open("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if b, _ := io.ReadAll(file); string(b) != "a" {
		t.Errorf("read %q", b)
	}
}

// TestExecutable: an executable file beneath the folder, directly or through a link that stays
// inside, is found by its real path; one through a link out (or a path with ..) is ErrOutside; a
// file without execute bits is refused.
func TestExecutable(t *testing.T) {
	root := tree(t)
	if err := os.Chmod(filepath.Join(root, "a.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(root, "a.txt")
	for _, rel := range []string{"./a.txt", "a.txt"} {
		if p, err := Executable(root, rel); err != nil || p != real {
			t.Errorf("Executable(%q) = %q, %v; want %q", rel, p, err, real)
		}
	}
	if p, err := Executable(root, "link-in"); haveOpenat2() && (err != nil || p != real) {
		t.Errorf("Executable(link-in) = %q, %v; want %q", p, err, real)
	}
	for _, rel := range []string{"abs", "rel-out", "../bundle/a.txt", "/bin/sh"} {
		if p, err := Executable(root, rel); !errors.Is(err, ErrOutside) {
			t.Errorf("Executable(%q) = %q, %v; want ErrOutside", rel, p, err)
		}
	}
	if _, err := Executable(root, "sub/b.txt"); err == nil || errors.Is(err, ErrOutside) {
		t.Errorf("Executable(sub/b.txt), mode 0644: %v; want not executable", err)
	}
}
