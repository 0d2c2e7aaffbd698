package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// catFileBundle copies a workspace file to the standard output of cat, which runner.output.file sends
// to the file input dest names; the bundle may write only ./out/**.
func catFileBundle() map[string]string {
	cli := strings.Replace(fixture.CLI("cat", "cat", "  copy: ./tools/copy/TOOL.md\n"), "fs: { read: [], write: [] }", `fs: { read: ["./**"], write: ["./out/**"] }`, 1)
	return map[string]string{
		"cat/CLI.md": cli,
		"cat/tools/copy/TOOL.md": `---
name: Copy
id: cat.copy
description: Copy a file through stdout.
version: 1.0.0
inputs:
  type: object
  additionalProperties: false
  properties:
    src: { type: string, format: path, pattern: "^[^-]" }
    dest: { type: string, format: path }
  required: [src, dest]
outputs:
  type: object
  properties: { path: { type: string }, bytes: { type: integer } }
  required: [path, bytes]
runner:
  cli: ../../CLI.md
  argv: ["--", "${input.src}"]
  output: { format: binary, file: dest }
---
`,
	}
}

// TestStdoutToFile: the program's standard output goes to the file the input names, in a folder
// the tool may write (created for the call), and the result says where and how much; a path
// outside the write grants, through a symbolic link, or a failed call writes nothing.
func TestStdoutToFile(t *testing.T) {
	h, _ := writeBundle(t, catFileBundle(), Options{})
	b := bundle(t, h, "cat")
	ws, outside := fixture.Workspace(t), t.TempDir()
	data := strings.Repeat("0123456789", 100_000) // 1 MB, more than a pipe holds
	os.WriteFile(filepath.Join(ws, "in.txt"), []byte(data), 0o644)
	fixture.GiveToAgent(t, ws)
	call := func(src, dest string) Envelope {
		return h.Call(context.Background(), b, "copy", map[string]any{"src": src, "dest": dest}, Caller{Workspace: ws}, CallOptions{})
	}

	env := call("in.txt", "out/copy.txt")
	m, _ := env.Value.(map[string]any)
	if !env.OK || m["path"] != "out/copy.txt" || m["bytes"] == nil || m["bytes"].(interface{ String() string }).String() != "1000000" {
		t.Fatalf("copy: %#v %+v", env.Value, env.Error)
	}
	got, err := os.ReadFile(filepath.Join(ws, "out", "copy.txt"))
	if err != nil || string(got) != data {
		t.Fatalf("out/copy.txt: %d bytes, %v", len(got), err)
	}
	if os.Geteuid() == 0 {
		st, _ := os.Stat(filepath.Join(ws, "out", "copy.txt"))
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid != fixture.AgentID {
			t.Errorf("the file belongs to uid %d, want the call's %d", uid, fixture.AgentID)
		}
	}

	// A name that is a symbolic link is never written through: one out of the workspace is
	// refused, one inside it is replaced.
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	os.Symlink(victim, filepath.Join(ws, "out", "away.txt"))
	os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("keep"), 0o644)
	os.Symlink("../keep.txt", filepath.Join(ws, "out", "link"))
	if env := call("in.txt", "out/away.txt"); env.OK {
		t.Fatal("out/away.txt (a link out of the workspace) was accepted")
	}
	if env := call("in.txt", "out/link"); !env.OK {
		t.Fatalf("out/link: %+v", env.Error)
	}
	for _, f := range []string{victim, filepath.Join(ws, "keep.txt")} {
		if v, _ := os.ReadFile(f); string(v) != "keep" {
			t.Fatalf("written through a symbolic link to %s", f)
		}
	}
	if st, _ := os.Lstat(filepath.Join(ws, "out", "link")); st.Mode()&os.ModeSymlink != 0 {
		t.Fatal("out/link was not replaced")
	}

	for _, c := range []struct{ dest, code string }{
		{"beside.txt", "path_denied"}, // not in fs.write
		{"../escape.txt", "path_traversal_blocked"},
		{"out/missing/x.txt", "path_denied"}, // no such folder
	} {
		if env := call("in.txt", c.dest); env.OK || string(env.Error.Code) != c.code {
			t.Errorf("%s: %+v, want %s", c.dest, env.Error, c.code)
		}
	}
	// A folder in the way that is a symbolic link out of the workspace.
	os.Symlink(outside, filepath.Join(ws, "out", "away"))
	if env := call("in.txt", "out/away/x.txt"); env.OK {
		t.Fatal("wrote through out/away")
	}
	// A failed call leaves nothing behind, not even its temporary file.
	if env := call("nope.txt", "out/failed.txt"); env.OK || !strings.Contains(env.Error.Message, "No such file") {
		t.Fatalf("cat nope.txt: %+v", env.Error)
	}
	entries, _ := os.ReadDir(filepath.Join(ws, "out"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "away away.txt copy.txt link" {
		t.Errorf("out/ holds %q", names)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 { // victim only
		t.Errorf("outside holds %v", entries)
	}
}
