package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/clihost/clihost/manifest"
)

// TestRuntimeHoldsWhatNodeReads: Node exits 13 at startup when OpenSSL's configuration exists but
// cannot be read, so the runtime set holds it (the file alone, never /etc/ssl/private), with the
// resolver's and the service databases' files a Node CLI reads before its first request.
func TestRuntimeHoldsWhatNodeReads(t *testing.T) {
	f := newFixture(t)
	p := f.compile(f.input(manifest.Sandbox{}))
	var paths []string
	for _, r := range p.Runtime {
		paths = append(paths, r.Path)
	}
	for _, want := range []string{"/etc/ssl/openssl.cnf", "/etc/host.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols"} {
		if _, err := os.Stat(want); err != nil {
			continue // not on this host: nothing to grant
		}
		r, err := filepath.EvalSymlinks(want)
		if err != nil {
			t.Fatal(err)
		}
		if !ruleOn(&Policy{Rules: p.Runtime}, r) {
			t.Errorf("the runtime set has no rule on %s: %v", r, paths)
		}
	}
	wantNotIn(t, "Runtime", paths, "/etc/ssl", "/etc/ssl/private", "/etc/machine-id", "/etc/shadow")
}

// npmTree lays out an npm install the way npm does: node_modules/.bin/tool → the package's script,
// its platform package beside it with a native binary, and returns the tree and the .bin link.
func npmTree(t *testing.T, root string) (tree, link string) {
	t.Helper()
	tree = filepath.Join(root, "node_modules")
	write(t, filepath.Join(tree, "@acme", "tool", "bin", "tool.js"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(tree, "@acme", "tool-linux-x64", "vendor", "tool"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(tree, "dep", "index.js"), "", 0o644)
	mkdir(t, filepath.Join(tree, ".bin"))
	link = filepath.Join(tree, ".bin", "tool")
	symlink(t, "../@acme/tool/bin/tool.js", link)
	return tree, link
}

// TestNpmPackageTree: a binary installed by npm reads its node_modules tree (its package and the
// dependencies hoisted beside it) and nothing above it; exec.spawn may name a file inside the tree
// (a launcher's native binary), and only inside it.
func TestNpmPackageTree(t *testing.T) {
	f := newFixture(t)
	root := realTemp(t)
	tree, link := npmTree(t, root)
	write(t, filepath.Join(root, "secret.txt"), "x", 0o644)
	outside := filepath.Join(root, "outside-tool")
	write(t, outside, "#!/bin/sh\n", 0o755)
	symlink(t, outside, filepath.Join(tree, "@acme", "tool-linux-x64", "vendor", "escape"))

	sb := fsSandbox(nil, nil, nil)
	sb.Exec = &manifest.Exec{Allow: new(true), Spawn: []string{"@acme/tool-linux-x64/vendor/tool", "@acme/tool-linux-arm64/vendor/tool"}}
	in := f.input(sb)
	in.Binary = link
	p := f.compile(in)
	wantRule(t, &Policy{Rules: p.Runtime}, PathRule{Path: tree, Access: Read, Subtree: true})
	if ruleOn(&Policy{Rules: p.Runtime}, root) || ruleOn(&Policy{Rules: p.Runtime}, filepath.Join(root, "secret.txt")) {
		t.Errorf("the runtime set reaches above the node_modules tree: %+v", p.Runtime)
	}
	wantIn(t, "Exec", p.Exec, filepath.Join(tree, "@acme", "tool", "bin", "tool.js"), filepath.Join(tree, "@acme", "tool-linux-x64", "vendor", "tool"))
	wantNotIn(t, "Exec", p.Exec, filepath.Join(tree, "dep", "index.js"))
	wantNote(t, p, `"@acme/tool-linux-arm64/vendor/tool": not found in the binary's node_modules tree`)
	for _, r := range p.Runtime {
		if r.Access != Read {
			t.Errorf("runtime rule %+v is not read-only", r)
		}
	}

	// Hostile entries: climbing out, a symlink leading out of the tree, a non-clean path.
	for _, tc := range []struct{ spawn, want string }{
		{"../outside-tool", "may not climb out"},
		{"@acme/../../outside-tool", "may not climb out"},
		{"@acme/tool-linux-x64/vendor/escape", "outside the package tree"},
		{"@acme//tool-linux-x64/vendor/tool", "must be clean"},
	} {
		sb.Exec.Spawn = []string{tc.spawn}
		in := f.input(sb)
		in.Binary = link
		compileErr(t, in, tc.want)
	}

	// A binary that is not in a node_modules tree (the same CLI installed natively): no tree, and a
	// relative spawn entry runs nothing (a note says so); a hostile one is still an error.
	sb.Exec.Spawn = []string{"@acme/tool-linux-x64/vendor/tool"}
	p = f.compile(f.input(sb))
	if ruleOn(&Policy{Rules: p.Runtime}, tree) || len(p.Exec) != len(f.compile(f.input(fsSandbox(nil, nil, nil))).Exec) {
		t.Errorf("a binary outside node_modules got the tree or the spawn entry: %+v %v", p.Runtime, p.Exec)
	}
	wantNote(t, p, `"@acme/tool-linux-x64/vendor/tool": not found in the binary's node_modules tree`)
	sb.Exec.Spawn = []string{"../x"}
	compileErr(t, f.input(sb), "may not climb out")
}

func TestPackageTree(t *testing.T) {
	for bin, want := range map[string]string{
		"/usr/local/lib/node_modules/@google/gemini-cli/bundle/gemini.js": "/usr/local/lib/node_modules",
		"/srv/app/node_modules/.pnpm/x@1/node_modules/x/bin/x.js":         "/srv/app/node_modules",
		"/usr/bin/jq":                 "",
		"/node_modules/x":             "/node_modules",
		"/srv/node_modules":           "",
		"/srv/not_node_modules/x/bin": "",
	} {
		if got := packageTree(bin); got != want {
			t.Errorf("packageTree(%s) = %q, want %q", bin, got, want)
		}
	}
}
