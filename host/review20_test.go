package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// TestR20KeptWritablePolicyAndNewRepositories attacks, in the real sandbox, the policy a host keeps
// for a tool that may write its workspace (cp -r, fs.write ./**): after calls that reused it (also
// once the workspace's folders are old enough for their listings to be kept, so that the search
// takes sub for a leaf), a repository appears in sub between calls (the owner clones one), or
// the tool's own call copies one into the workspace. The next calls write a pre-commit hook into
// that repository: it must be masked or removed, never left for the owner's next commit to run.
//
// Every change the test makes in the workspace after a call goes through an os.Root on it.
func TestR20KeptWritablePolicyAndNewRepositories(t *testing.T) {
	fixture.Need(t, "cp")
	fixture.NeedSandbox(t, SandboxAvailable())
	cli := strings.Replace(fixture.CLI("cp", "cpw", "  copy: ./tools/copy/TOOL.md\n"), `fs: { read: [], write: [] }`,
		`fs: { read: ["./**"], write: ["./**"] }`, 1)
	h, _ := writeBundle(t, map[string]string{
		"cpw/CLI.md": cli,
		"cpw/tools/copy/TOOL.md": `---
name: Copy
id: cpw.copy
description: Copy a file or folder.
version: 1.0.0
inputs: { type: object, properties: { src: { type: string }, dst: { type: string } }, required: [src, dst] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["-r", "--", "${input.src}", "${input.dst}"] }
---
`,
	}, Options{})
	ws := fixture.Workspace(t)
	for name, content := range map[string]string{"ws/evil.sh": "#!/bin/sh\necho owned\n", "ws/sub/a.txt": "a\n",
		"sub2/.keep":       "",
		"tmpl/dotgit/HEAD": "ref: refs/heads/main\n", "tmpl/dotgit/config": "", "tmpl/dotgit/hooks/README": "", "tmpl/dotgit/objects/x": "", "tmpl/dotgit/refs/heads/main": ""} {
		p := filepath.Join(ws, strings.TrimPrefix(name, "ws/"))
		r20must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		r20must(t, os.WriteFile(p, []byte(content), 0o755))
	}
	fixture.GiveToAgent(t, ws)
	root, err := os.OpenRoot(ws)
	r20must(t, err)
	defer root.Close()
	b := bundle(t, h, "cpw")
	cp := func(src, dst string) Envelope {
		return h.Call(context.Background(), b, "copy", map[string]any{"src": src, "dst": dst}, Caller{Workspace: ws}, CallOptions{})
	}
	hookBody := func(rel string) string {
		b, err := root.ReadFile(rel)
		if err != nil {
			return ""
		}
		return string(b)
	}
	for i := range 3 {
		if env := cp("evil.sh", "out.txt"); !env.OK {
			t.Fatalf("call %d: %+v", i, env.Error)
		}
	}
	time.Sleep(2100 * time.Millisecond) // the folders' listings get kept by the next walks (sub: a leaf)
	for i := range 3 {
		if env := cp("evil.sh", "out.txt"); !env.OK {
			t.Fatalf("call %d after the pause: %+v", i, env.Error)
		}
	}
	if h.PoliciesReused() == 0 {
		t.Fatal("no call used a kept policy: this test proves nothing")
	}

	// The owner clones a repository into sub between calls.
	for _, d := range []string{"sub/.git", "sub/.git/hooks", "sub/.git/objects", "sub/.git/refs"} {
		r20must(t, root.Mkdir(d, 0o755))
		r20must(t, root.Lchown(d, fixture.AgentID, fixture.AgentID))
	}
	r20must(t, root.WriteFile("sub/.git/HEAD", []byte("ref: refs/heads/main\n"), 0o644))
	r20must(t, root.Lchown("sub/.git/HEAD", fixture.AgentID, fixture.AgentID))
	env := cp("evil.sh", "sub/.git/hooks/pre-commit")
	t.Logf("writing sub/.git/hooks/pre-commit: ok %v, warnings %v", env.OK, env.Warnings)
	if strings.Contains(hookBody("sub/.git/hooks/pre-commit"), "owned") {
		t.Error("the hook the call wrote in the repository cloned into sub (a kept leaf) is left for the owner's next commit")
	}

	// The tool copies a repository into the workspace as sub2/.git (its own call), then writes its hook.
	if env := cp("tmpl/dotgit", "sub2/.git"); !env.OK {
		t.Logf("copying a repository in: %+v", env.Error)
	}
	env = cp("evil.sh", "sub2/.git/hooks/pre-commit")
	t.Logf("writing sub2/.git/hooks/pre-commit: ok %v, warnings %v", env.OK, env.Warnings)
	if strings.Contains(hookBody("sub2/.git/hooks/pre-commit"), "owned") {
		t.Error("the hook the call wrote in the repository an earlier call copied in is left for the owner's next commit")
	}
}

func r20must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
