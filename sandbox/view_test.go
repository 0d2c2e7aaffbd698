package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestViewEvalSymlinks checks that a view resolves every path exactly as filepath.EvalSymlinks
// does (the same answer, or an error of the same kind), through relative and absolute links,
// chains, "..", links to files, dangling links and loops, and that resolve agrees with resolving
// through a fresh view.
func TestViewEvalSymlinks(t *testing.T) {
	d := t.TempDir()
	for _, dir := range []string{"a/b/c", "x/y", "f"} {
		if err := os.MkdirAll(filepath.Join(d, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d, "a/file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"rel":      "a/b",
		"abs":      filepath.Join(d, "x"),
		"chain":    "rel",
		"up":       "a/b/../../x/y",
		"a/b/back": "../../x",
		"tofile":   "a/file",
		"dangling": "nowhere/at/all",
		"loop1":    "loop2",
		"loop2":    "loop1",
		"x/y/root": "/",
		"dotdot":   "..",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{"", "a", "a/b/c", "rel", "rel/c", "abs/y", "chain/c/..", "up", "up/root/usr",
		"a/b/back/y", "tofile", "tofile/x", "a/file/x", "dangling", "dangling/more", "loop1", "loop1/x",
		"missing", "missing/x", "a/../rel/./c/", "x/y/root", "dotdot/" + filepath.Base(d) + "/rel", "../../..", "f//", "a/file/"}
	v := newView()
	for _, p := range paths {
		abs := filepath.Join(d, p)
		if p == "a/file/" || p == "f//" {
			abs = d + "/" + p // keep the trailing slash
		}
		want, wantErr := filepath.EvalSymlinks(abs)
		got, gotErr := v.evalSymlinks(abs)
		if got != want || (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
			t.Errorf("evalSymlinks(%q) = %q, %v; filepath.EvalSymlinks: %q, %v", abs, got, gotErr, want, wantErr)
		}
		r1, e1 := v.resolve(abs)
		r2, e2 := newView().resolve(abs)
		if r1 != r2 || (e1 == nil) != (e2 == nil) {
			t.Errorf("resolve(%q): a used view says %q, %v; a fresh one %q, %v", abs, r1, e1, r2, e2)
		}
	}
}

// TestViewMissingParent: under a parent the view found missing, a path is missing without a
// question to the kernel, as the kernel would say.
func TestViewMissingParent(t *testing.T) {
	d := t.TempDir()
	v := newView()
	if _, err := v.lstat(filepath.Join(d, "gone")); !os.IsNotExist(err) {
		t.Fatalf("lstat of a missing folder: %v", err)
	}
	if _, err := v.lstat(filepath.Join(d, "gone", "x")); !os.IsNotExist(err) {
		t.Errorf("lstat under a missing folder: %v, want not exist", err)
	}
	if r, err := v.resolve(filepath.Join(d, "gone", "x", "y")); err != nil || r != filepath.Join(d, "gone", "x", "y") {
		t.Errorf("resolve under a missing folder: %q, %v", r, err)
	}
}
