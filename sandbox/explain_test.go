package sandbox

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainNamesTheRule asks a compiled policy why each kind of path is refused: every answer
// names the path and the rule (which mask, which list), or the file's own mode when the sandbox
// grants the access.
func TestExplainNamesTheRule(t *testing.T) {
	f := newFixture(t)
	mkdir(t, filepath.Join(f.home, ".ssh"))
	write(t, filepath.Join(f.ws, "data.json"), "{}", 0o600)
	write(t, filepath.Join(f.ws, "out/result.json"), "{}", 0o644)
	write(t, filepath.Join(f.ws, "secrets/key"), "k", 0o644)
	write(t, filepath.Join(f.ws, "tool.sh"), "#!/bin/sh\n", 0o755)
	in := f.input(fsSandbox([]string{"./**", "~/**"}, []string{"./out/**"}, []string{"secrets/**"}))
	in.ExtraDeny = []string{"/var/lib/clihost-test/state"}
	p := f.compile(in)
	for _, c := range []struct{ path, want string }{
		{"/etc/shadow", "/etc/shadow is outside the workspace " + f.ws + " and is not in the sandbox.fs.read of demo@1 (it grants ./**, ~/**); the sandbox refused it"},
		{filepath.Join(f.home, ".ssh/id_ed25519"), filepath.Join(f.home, ".ssh/id_ed25519") + " is masked by the mandatory deny of other programs' credentials (" + filepath.Join(f.home, ".ssh") + ")"},
		{filepath.Join(f.home, ".bashrc"), filepath.Join(f.home, ".bashrc") + " is masked by the mandatory deny of shell and login startup files"},
		{"secrets/key", filepath.Join(f.ws, "secrets/key") + " is masked by the bundle's sandbox.fs.deny (" + filepath.Join(f.ws, "secrets") + ")"},
		{"/var/lib/clihost-test/state/state.db", "is masked by the mask of clihost's own files"},
		{"data.json", "the sandbox of demo@1 grants reading " + filepath.Join(f.ws, "data.json") + ", not writing it (its sandbox.fs.write grants ./out/**); if it was a read, the file's own permissions refused it: mode 0600"},
		{"out/result.json", "the sandbox of demo@1 grants " + filepath.Join(f.ws, "out/result.json") + " (read and write); the file's own permissions refused it: mode 0644"},
		{"tool.sh", "grants reading " + filepath.Join(f.ws, "tool.sh") + ", not executing it"},
		{"/proc/1/environ", "the sandbox mounts its own /proc"},
		{"out/missing.json", filepath.Join(f.ws, "out/missing.json") + " does not exist"},
	} {
		if got := p.Explain(c.path); !strings.Contains(got, c.want) {
			t.Errorf("Explain(%s) = %q, want it to say %q", c.path, got, c.want)
		}
	}
	if got := (*Policy)(nil).Explain("/x"); got != "" {
		t.Errorf("a nil policy explains %q", got)
	}
}

// TestExplainWritableMaskAndTool: a git hook in a writable workspace is masked by the mandatory
// mask, and a tool's policy names the tool.
func TestExplainWritableMaskAndTool(t *testing.T) {
	f := newFixture(t)
	mkdir(t, filepath.Join(f.ws, ".git/hooks"))
	tool := fsSandbox([]string{"./**"}, []string{"./**"}, nil)
	b, te := bundle(tool, &tool)
	p := f.compile(Input{Bundle: b, Tool: te, Binary: f.bin, Workspace: f.ws, Home: f.home})
	got := p.Explain(".git/hooks/pre-commit")
	if want := "is masked by the mandatory mask of git hooks, git config and editor task files in writable directories"; !strings.Contains(got, want) {
		t.Errorf("Explain(.git/hooks/pre-commit) = %q, want %q", got, want)
	}
	if got := p.Explain("/opt"); !strings.Contains(got, "sandbox.fs.read of demo@1 (tool run)") {
		t.Errorf("Explain(/opt) = %q: the tool is not named", got)
	}
}

// TestExplainDoesNotResolveRefusedPaths: a refused path is named as given, not by the target its
// symbolic link has on the host (which the sandbox does not show).
func TestExplainDoesNotResolveRefusedPaths(t *testing.T) {
	f := newFixture(t)
	outside := realTemp(t)
	write(t, filepath.Join(outside, "hidden-target"), "x", 0o644)
	symlink(t, filepath.Join(outside, "hidden-target"), filepath.Join(outside, "link"))
	p := f.compile(f.input(fsSandbox([]string{"./**"}, nil, nil)))
	got := p.Explain(filepath.Join(outside, "link"))
	if !strings.HasPrefix(got, filepath.Join(outside, "link")+" is outside the workspace") || strings.Contains(got, "hidden-target") {
		t.Fatalf("Explain = %q", got)
	}
}
