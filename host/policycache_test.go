package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestKeptPolicyFollowsTheWorkspace attacks the sandbox policy a host keeps between calls (see
// sandbox.Cache) in the real sandbox: a tool may read its workspace but .env. After a call made
// while .env did not exist, the workspace's owner makes .env a link to data/token.txt; a policy
// compiled now masks the link's target too (an empty file in its place), so the next call must not
// read the token, though the calls before it used a kept policy that knew no .env.
func TestKeptPolicyFollowsTheWorkspace(t *testing.T) {
	fixture.Need(t, "cat")
	fixture.NeedSandbox(t, SandboxAvailable())
	cli := strings.Replace(fixture.CLI("cat", "catp", "  show: ./tools/show/TOOL.md\n"), `fs: { read: [], write: [] }`,
		`fs: { read: ["./**"], write: [], deny: ["./.env"] }`, 1)
	h, _ := writeBundle(t, map[string]string{
		"catp/CLI.md": cli,
		"catp/tools/show/TOOL.md": `---
name: Show
id: catp.show
description: Print a file.
version: 1.0.0
inputs: { type: object, properties: { path: { type: string } }, required: [path] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["--", "${input.path}"] }
---
`,
	}, Options{})
	ws := fixture.Workspace(t)
	for name, content := range map[string]string{"notes.txt": "notes\n", "data/token.txt": "tok-1234\n"} {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := bundle(t, h, "catp")
	show := func(path string) Envelope {
		return h.Call(context.Background(), b, "show", map[string]any{"path": path}, Caller{Workspace: ws}, CallOptions{})
	}
	for i := range 3 {
		if env := show("data/token.txt"); !env.OK || env.Value != "tok-1234\n" {
			t.Fatalf("call %d: the token is readable before .env exists: %+v", i, env.Error)
		}
	}
	if h.PoliciesReused() == 0 {
		t.Fatal("no call used a kept policy: this test proves nothing")
	}
	if err := os.Symlink("data/token.txt", filepath.Join(ws, ".env")); err != nil {
		t.Fatal(err)
	}
	if env := show("data/token.txt"); env.OK && strings.Contains(env.Value.(string), "tok-1234") {
		t.Fatal("read the target of the denied .env, made a link after the last call")
	}
	if env := show("notes.txt"); !env.OK {
		t.Fatalf("the workspace's other files: %+v", env.Error)
	}
}
