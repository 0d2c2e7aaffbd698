package registry

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// swapFS is a source's FS that, at the first Open of a file named in swaps (by path on disk),
// replaces that file with a symlink to its target and then opens it: the moment between the
// loader's checks (bundle-file-outside, regular file) and its read. Stat passes through.
type swapFS struct {
	inner fs.FS
	root  string // the FS's folder on disk
	swaps map[string]string
	mu    *sync.Mutex
}

func (s swapFS) Open(name string) (fs.File, error) {
	p := filepath.Join(s.root, filepath.FromSlash(name))
	s.mu.Lock()
	if target, ok := s.swaps[p]; ok {
		delete(s.swaps, p)
		if err := os.Remove(p); err != nil {
			panic(err)
		}
		if err := os.Symlink(target, p); err != nil {
			panic(err)
		}
	}
	s.mu.Unlock()
	return s.inner.Open(name)
}

func (s swapFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(s.inner, name) }

func (s swapFS) Sub(dir string) (fs.FS, error) {
	inner, err := fs.Sub(s.inner, dir)
	if err != nil {
		return nil, err
	}
	return swapFS{inner: inner, root: filepath.Join(s.root, filepath.FromSlash(dir)), swaps: s.swaps, mu: s.mu}, nil
}

// TestSwappedForSymlinkAfterCheck: bundle files that pass the bundle-file-outside check and are
// then swapped for symlinks before they are read: a TOOL.md linked to a file outside the source,
// a CLI.md linked to one outside, and a TOOL.md linked to another bundle's file in the same
// source. None of the linked content is read: each bundle is refused (or its tool) with a
// finding that says the file leads outside; an untouched bundle beside them loads.
func TestSwappedForSymlinkAfterCheck(t *testing.T) {
	outside := t.TempDir()
	outTool := filepath.Join(outside, "TOOL.md")
	if err := os.WriteFile(outTool, []byte(strings.Replace(miniTool, "Runs mini.", "OUTSIDE CONTENT", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	outCLI := filepath.Join(outside, "CLI.md")
	cli := strings.NewReplacer("%ID%", "cli-swap", "%VER%", "1.0.0").Replace(miniCLI)
	if err := os.WriteFile(outCLI, []byte(strings.Replace(cli, "description:", "description: OUTSIDE CONTENT", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, id := range []string{"tool-swap", "cli-swap", "sibling-swap", "good"} {
		writeBundle(t, filepath.Join(root, id), id, "1.0.0")
	}
	sibling := filepath.Join(root, "good", "tools", "run", "TOOL.md")
	if err := os.WriteFile(sibling, []byte(strings.Replace(miniTool, "Runs mini.", "OTHER BUNDLE'S CONTENT", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := DirSource(root)
	if err != nil {
		t.Fatal(err)
	}
	src.FS = swapFS{inner: src.FS, root: root, mu: &sync.Mutex{}, swaps: map[string]string{
		filepath.Join(root, "tool-swap", "tools", "run", "TOOL.md"):    outTool,
		filepath.Join(root, "cli-swap", "CLI.md"):                      outCLI,
		filepath.Join(root, "sibling-swap", "tools", "run", "TOOL.md"): "../../../good/tools/run/TOOL.md",
	}}
	r, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Entries() {
		b := e.Bundle
		if strings.Contains(b.Body, "CONTENT") || (b.CLI != nil && strings.Contains(b.CLI.Description, "CONTENT")) {
			t.Errorf("%s: read the linked CLI.md: %q", b.File, b.CLI.Description)
		}
		for _, tl := range b.Tools {
			if tl.Tool != nil && strings.Contains(tl.Tool.Description, "CONTENT") && path.Base(path.Dir(b.File)) != "good" {
				t.Errorf("%s: read the linked TOOL.md: %q", tl.File, tl.Tool.Description)
			}
		}
		name := filepath.Base(b.Dir)
		if name == "good" {
			if len(b.Findings) != 0 || len(b.Tools) != 1 || b.Tools[0].Tool == nil {
				t.Errorf("good: %v", b.Findings)
			}
			continue
		}
		if len(b.Findings) != 1 || !strings.Contains(b.Findings[0].Message, "leads outside the folder") {
			t.Errorf("%s: findings %v, want one saying the file leads outside the folder", name, b.Findings)
		}
	}
	if n := len(r.Entries()); n != 4 {
		t.Errorf("%d bundles, want 4", n)
	}
}
