package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/sandbox"
	"github.com/clihost/clihost/sandbox/nsinit"
)

func TestWorkspaceWriteRootsDeclared(t *testing.T) {
	b := &manifest.Bundle{CLI: &manifest.CLI{ID: "demo", Version: "1.0.0", Bin: "true", Sandbox: manifest.Sandbox{FS: &manifest.FS{
		Write: []string{"./**", "./out/**", "./build/cache/**", "./report.txt", "~/.demo/**", "./*.log"}}}}}
	if got, want := workspaceWriteRoots(b, nil), []string{"out", "build/cache"}; !slices.Equal(got, want) {
		t.Fatalf("workspaceWriteRoots = %q, want %q", got, want)
	}
	// A tool narrows: only what both grant is created.
	te := &manifest.ToolEntry{Path: []string{"run"}, Tool: &manifest.Tool{ID: "demo.run", Sandbox: &manifest.Sandbox{FS: &manifest.FS{Write: []string{"./out/**"}}}}}
	if got := workspaceWriteRoots(b, te); !slices.Equal(got, []string{"out"}) {
		t.Fatalf("with a tool = %q", got)
	}
}

// TestMakeWorkspaceRoots: a declared write folder is created inside the workspace, never through a
// symbolic link planted there (out → a folder outside) or over a file.
func TestMakeWorkspaceRoots(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	asRoot := os.Geteuid() == 0
	id := sandbox.Identity{UID: os.Geteuid(), GID: os.Getegid()}
	if asRoot {
		id = sandbox.Identity{UID: 65534, GID: 65534}
	}
	os.Symlink(outside, filepath.Join(ws, "planted"))
	os.Symlink("/etc", filepath.Join(ws, "etc"))
	os.WriteFile(filepath.Join(ws, "file"), nil, 0o600)
	if err := makeWorkspaceRoots(ws, id, []string{"out", "build/cache", "planted/x", "etc/x", "file/x"}, asRoot); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"out", "build", "build/cache"} {
		st, err := os.Lstat(filepath.Join(ws, d))
		if err != nil || !st.IsDir() {
			t.Fatalf("%s: %v %v", d, st, err)
		}
		if uid := int(st.Sys().(*syscall.Stat_t).Uid); uid != id.UID {
			t.Errorf("%s belongs to %d, want %d", d, uid, id.UID)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("created through the planted link: %v", entries)
	}
	if _, err := os.Lstat("/etc/x"); err == nil {
		t.Error("created /etc/x")
	}
}

// TestWriteFolderCreatedForTheCall: a tool whose bundle grants fs.write ./out/** can write out/ on
// the host, and a write beside it fails visibly (the call is not OK, nothing appears on the host),
// wherever the workspace lies: under /tmp (which the sandbox covers with its own tmpfs, where the
// directories leading to out/ are made), elsewhere, and readable (fs.read ./**) or not; with
// sandboxes started for their calls and taken from a pool of inits (as the daemon runs them).
func TestWriteFolderCreatedForTheCall(t *testing.T) {
	for _, pooled := range []bool{false, true} {
		for _, tc := range []struct{ name, read, parent string }{
			{"tmp", "[]", ""},
			{"tmp-readable", `["./**"]`, ""},
			{"var-tmp", "[]", "/var/tmp"},
			{"var-tmp-readable", `["./**"]`, "/var/tmp"},
		} {
			name := tc.name
			if pooled {
				name += "-pooled"
			}
			t.Run(name, func(t *testing.T) {
				var opts Options
				if pooled {
					opts.Sandbox.Pool = nsinit.NewPool(nsinit.PoolConfig{Max: 1})
					t.Cleanup(opts.Sandbox.Pool.Close)
				}
				testWriteFolder(t, tc.read, tc.parent, opts)
			})
		}
	}
}

// testWriteFolder runs TestWriteFolderCreatedForTheCall with fs.read read, the workspace made under
// parent ("" for the test's own temporary directory, under /tmp), the host made with opts.
func testWriteFolder(t *testing.T, read, parent string, opts Options) {
	cli := strings.Replace(fixture.CLI("touch", "touch", "  make: ./tools/make/TOOL.md\n"), "write: []", `write: ["./out/**"]`, 1)
	files := map[string]string{
		"touch/CLI.md": strings.Replace(cli, "read: []", "read: "+read, 1),
		"touch/tools/make/TOOL.md": `---
name: Make
id: touch.make
description: Touch a file.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { file: { type: string, format: path, pattern: "^[^-]" } }, required: [file] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.file}"] }
---
`,
	}
	h, _ := writeBundle(t, files, opts)
	b := bundle(t, h, "touch")
	ws := fixture.Workspace(t)
	if parent != "" {
		dir, err := os.MkdirTemp(parent, "ws-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		fixture.GiveToAgent(t, dir)
		ws = dir
	}
	env := h.Call(context.Background(), b, "make", map[string]any{"file": "out/result.txt"}, Caller{Workspace: ws}, CallOptions{})
	if !env.OK {
		t.Fatalf("touch out/result.txt: %+v", env.Error)
	}
	if _, err := os.Stat(filepath.Join(ws, "out", "result.txt")); err != nil {
		t.Fatal(err)
	}
	// Pooled: until the call takes a ready init (Take starts a call cold when the waiting init went
	// stale, or holds more memory than the call's limit leaves room for).
	pool := opts.Sandbox.Pool
	for attempt := 0; ; attempt++ {
		for deadline := time.Now().Add(10 * time.Second); pool != nil && pool.Stats().Ready == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		var hits int64 // calls that took a ready init or the zygote's ready thread
		if pool != nil {
			hits = pool.Stats().Hits + pool.Stats().Zygote
		}
		env = h.Call(context.Background(), b, "make", map[string]any{"file": "beside.txt"}, Caller{Workspace: ws}, CallOptions{})
		t.Logf("touch beside.txt: ok %v, error %+v", env.OK, env.Error)
		if env.OK {
			t.Fatalf("a write beside out/ reported success (it went where the host cannot see it): %+v", env)
		}
		if pool == nil || pool.Stats().Hits+pool.Stats().Zygote > hits {
			break
		}
		if attempt == 4 {
			t.Fatalf("no call took a pooled init: %+v", pool.Stats())
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "beside.txt")); err == nil {
		t.Fatal("wrote beside out/")
	}
}
