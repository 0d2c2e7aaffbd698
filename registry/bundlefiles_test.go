package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSymlinkedBundleFilesRefused loads a folder of three bundles: one whose TOOL.md is a symlink
// to a file outside, one whose vendored binary is a symlink to /bin/bash (both refused with
// bundle-file-outside), and one with an in-bundle symlink, which is served.
func TestSymlinkedBundleFilesRefused(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "TOOL.md")
	if err := os.WriteFile(outside, []byte(miniTool), 0o644); err != nil {
		t.Fatal(err)
	}
	writeBundle(t, filepath.Join(root, "tool-out"), "tool-out", "1.0.0")
	link(t, outside, filepath.Join(root, "tool-out", "tools", "run", "TOOL.md"))

	writeBundle(t, filepath.Join(root, "bin-out"), "bin-out", "1.0.0")
	vendor(t, filepath.Join(root, "bin-out"))
	link(t, "/bin/bash", filepath.Join(root, "bin-out", "bin", "mini"))

	writeBundle(t, filepath.Join(root, "good"), "good", "1.0.0")
	vendor(t, filepath.Join(root, "good"))
	if err := os.WriteFile(filepath.Join(root, "good", "mini.real"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link(t, "../mini.real", filepath.Join(root, "good", "bin", "mini"))

	r := load(t, root)
	for _, id := range []string{"tool-out", "bin-out"} {
		b, err := r.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Findings) != 1 || b.Findings[0].Rule != "bundle-file-outside" {
			t.Fatalf("%s: want exactly the bundle-file-outside error, got %v", id, b.Findings)
		}
	}
	if b, err := r.Get("good"); err != nil || len(b.Findings) != 0 || len(b.Tools) != 1 {
		t.Fatalf("good: %v %v", err, b.Findings)
	}
}

func link(t *testing.T, target, p string) {
	t.Helper()
	_ = os.Remove(p)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// vendor adds a vendored install entry ./bin/mini to the bundle in dir.
func vendor(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "CLI.md")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(data), "install:\n", "install:\n  - { method: vendored, path: ./bin/mini }\n", 1)
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}
