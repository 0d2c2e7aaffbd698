package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/clihost/clihost/bundles"
	"github.com/clihost/clihost/manifest"
)

// fixture is a workspace and a home on the real filesystem, with every path already resolved.
type fixture struct {
	t         *testing.T
	ws, home  string
	bin       string // /bin/true, resolved
	interp    string // its ELF interpreter, resolved ("" when static)
	searchDir string // PATH for spawn lookups
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	bin := realPath(t, "/bin/true")
	f := &fixture{t: t, ws: realTemp(t), home: realTemp(t), bin: bin, searchDir: "/usr/bin:/bin"}
	if i, _, _, _, err := interpreterOf(bin); err == nil && i != "" {
		f.interp = realPath(t, i)
	}
	return f
}

func realTemp(t *testing.T) string {
	t.Helper()
	return realPath(t, t.TempDir())
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return r
}

// write creates a file (and its directories) with the given content and mode.
func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	mkdir(t, filepath.Dir(link))
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// bundle builds a bundle with the given sandbox and, when tool is not nil, one tool narrowing it.
func bundle(sb manifest.Sandbox, tool *manifest.Sandbox) (*manifest.Bundle, *manifest.ToolEntry) {
	b := &manifest.Bundle{CLI: &manifest.CLI{ID: "demo", Version: "1.0.0", Bin: "true", Sandbox: sb}}
	if tool == nil {
		return b, nil
	}
	te := &manifest.ToolEntry{Path: []string{"run"}, Tool: &manifest.Tool{ID: "demo.run", Sandbox: tool}}
	b.Tools = []*manifest.ToolEntry{te}
	return b, te
}

func (f *fixture) input(sb manifest.Sandbox) Input {
	b, _ := bundle(sb, nil)
	return Input{Bundle: b, Binary: f.bin, Workspace: f.ws, Home: f.home, PATH: f.searchDir}
}

func (f *fixture) compile(in Input) *Policy {
	f.t.Helper()
	p, err := Compile(in)
	if err != nil {
		f.t.Fatalf("Compile: %v", err)
	}
	return p
}

func fsSandbox(read, write, deny []string) manifest.Sandbox {
	return manifest.Sandbox{FS: &manifest.FS{Read: read, Write: write, Deny: deny}}
}

func compileErr(t *testing.T, in Input, want string) error {
	t.Helper()
	_, err := Compile(in)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Compile error = %v, want one containing %q", err, want)
	}
	return err
}

func wantRule(t *testing.T, p *Policy, r PathRule) {
	t.Helper()
	if !slices.Contains(p.Rules, r) {
		t.Errorf("rules lack %+v; have %+v", r, p.Rules)
	}
}

func ruleOn(p *Policy, path string) bool {
	return slices.ContainsFunc(p.Rules, func(r PathRule) bool { return r.Path == path })
}

func wantIn(t *testing.T, what string, list []string, items ...string) {
	t.Helper()
	for _, it := range items {
		if !slices.Contains(list, it) {
			t.Errorf("%s lacks %s; have %v", what, it, list)
		}
	}
}

func wantNotIn(t *testing.T, what string, list []string, items ...string) {
	t.Helper()
	for _, it := range items {
		if slices.Contains(list, it) {
			t.Errorf("%s holds %s; have %v", what, it, list)
		}
	}
}

func wantNote(t *testing.T, p *Policy, sub string) {
	t.Helper()
	if !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, sub) }) {
		t.Errorf("no note mentions %q; notes: %q", sub, p.Notes)
	}
}

func TestWorkspaceAndHomeResolution(t *testing.T) {
	f := newFixture(t)
	other := realTemp(t)
	write(t, filepath.Join(other, "app.conf"), "x", 0o644)
	mkdir(t, filepath.Join(f.ws, "src"))
	p := f.compile(f.input(fsSandbox(
		[]string{"./**", "~/.config/tool/**", filepath.Join(other, "app.conf"), "~"},
		[]string{"src/**", "notes.txt"}, nil)))
	wantRule(t, p, PathRule{Path: f.ws, Access: Read, Subtree: true})
	wantRule(t, p, PathRule{Path: filepath.Join(f.home, ".config/tool"), Access: Read, Subtree: true})
	wantRule(t, p, PathRule{Path: filepath.Join(other, "app.conf"), Access: Read})
	wantRule(t, p, PathRule{Path: f.home, Access: Read})
	wantRule(t, p, PathRule{Path: filepath.Join(f.ws, "src"), Access: Read | Write, Subtree: true})
	wantRule(t, p, PathRule{Path: filepath.Join(f.ws, "notes.txt"), Access: Read | Write})
	if want := []string{filepath.Join(f.ws, "notes.txt"), filepath.Join(f.ws, "src")}; !reflect.DeepEqual(p.Writable, want) {
		t.Errorf("Writable = %v, want %v", p.Writable, want)
	}
	for _, r := range append(slices.Clone(p.Rules), p.Runtime...) {
		if !filepath.IsAbs(r.Path) || filepath.Clean(r.Path) != r.Path || strings.Contains(r.Path, "..") {
			t.Errorf("rule path %q is not absolute and clean", r.Path)
		}
	}
}

func TestWriteImpliesReadAndMerges(t *testing.T) {
	f := newFixture(t)
	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"**"}, nil)))
	var onWS []PathRule
	for _, r := range p.Rules {
		if r.Path == f.ws {
			onWS = append(onWS, r)
		}
	}
	if want := []PathRule{{Path: f.ws, Access: Read | Write, Subtree: true}}; !reflect.DeepEqual(onWS, want) {
		t.Errorf("workspace rules = %+v, want %+v", onWS, want)
	}
	wantIn(t, "Writable", p.Writable, f.ws)
}

func TestSubtreeVersusLiteral(t *testing.T) {
	f := newFixture(t)
	mkdir(t, filepath.Join(f.ws, "docs"))
	p := f.compile(f.input(fsSandbox([]string{"docs/**", "docs"}, nil, nil)))
	wantRule(t, p, PathRule{Path: filepath.Join(f.ws, "docs"), Access: Read, Subtree: true})
	wantRule(t, p, PathRule{Path: filepath.Join(f.ws, "docs"), Access: Read})
}

func TestSymlinkedPrefixResolved(t *testing.T) {
	f := newFixture(t)
	mkdir(t, filepath.Join(f.ws, "real/sub"))
	symlink(t, "real", filepath.Join(f.ws, "link"))
	mkdir(t, filepath.Join(f.home, "dotfiles/config"))
	symlink(t, filepath.Join(f.home, "dotfiles/config"), filepath.Join(f.home, ".config"))
	p := f.compile(f.input(fsSandbox([]string{"link/sub/**", "link/missing/file", "~/.config/tool/**"}, nil, nil)))
	wantRule(t, p, PathRule{Path: filepath.Join(f.ws, "real/sub"), Access: Read, Subtree: true})
	wantRule(t, p, PathRule{Path: filepath.Join(f.ws, "real/missing/file"), Access: Read})
	wantRule(t, p, PathRule{Path: filepath.Join(f.home, "dotfiles/config/tool"), Access: Read, Subtree: true})
	if ruleOn(p, filepath.Join(f.ws, "link/sub")) {
		t.Error("a rule kept the symlinked path instead of its target")
	}
}

func TestWorkspaceEscapeIsError(t *testing.T) {
	f := newFixture(t)
	outside := realTemp(t)
	write(t, filepath.Join(outside, "secret.txt"), "s", 0o600)
	symlink(t, outside, filepath.Join(f.ws, "out"))
	symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(f.ws, "notes/evil.txt"))
	symlink(t, filepath.Join(f.ws, "nowhere"), filepath.Join(f.ws, "dangling"))
	for _, tc := range []struct{ read, want string }{
		{"out/**", "outside the workspace"},
		{"out/secret.txt", "outside the workspace"},
		{"notes/*.txt", "outside the workspace"},
		{"dangling/**", "dangling symlink"},
	} {
		compileErr(t, f.input(fsSandbox([]string{tc.read}, nil, nil)), tc.want)
	}
}

func TestLastComponentWildcardExpanded(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"a.json", "b.json", "c.txt"} {
		write(t, filepath.Join(f.ws, "conf", n), "{}", 0o644)
	}
	write(t, filepath.Join(f.home, ".config/git/config"), "", 0o644)
	p := f.compile(f.input(fsSandbox([]string{"conf/*.json", "conf/*.yaml", "~/.config/git/*"}, nil, nil)))
	wantRule(t, p, PathRule{Path: filepath.Join(f.ws, "conf/a.json"), Access: Read})
	wantRule(t, p, PathRule{Path: filepath.Join(f.ws, "conf/b.json"), Access: Read})
	wantRule(t, p, PathRule{Path: filepath.Join(f.home, ".config/git/config"), Access: Read})
	if ruleOn(p, filepath.Join(f.ws, "conf/c.txt")) || ruleOn(p, filepath.Join(f.ws, "conf")) {
		t.Errorf("the wildcard granted more than its matches: %+v", p.Rules)
	}
	wantNote(t, p, `"conf/*.yaml" matched nothing`)
}

func TestUngrantablePatternsAreErrors(t *testing.T) {
	f := newFixture(t)
	compileErr(t, f.input(fsSandbox([]string{"**/.git/**"}, nil, nil)), "cannot be granted")
	compileErr(t, f.input(fsSandbox(nil, []string{"a/*/b"}, nil)), "cannot be granted")
	compileErr(t, f.input(fsSandbox([]string{"../up/**"}, nil, nil)), ".. is not allowed")
	compileErr(t, f.input(fsSandbox([]string{"~root/.ssh"}, nil, nil)), "~user")
	in := f.input(fsSandbox([]string{"./**"}, nil, nil))
	in.Workspace = ""
	compileErr(t, in, "has none")
}

func TestMandatoryDenies(t *testing.T) {
	f := newFixture(t)
	mkdir(t, filepath.Join(f.home, ".ssh"))
	in := f.input(fsSandbox([]string{"~/**"}, nil, nil))
	in.LookupEnv = func(k string) (string, bool) {
		v, ok := map[string]string{"XDG_RUNTIME_DIR": "/run/user/4242", "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1"}[k]
		return v, ok
	}
	in.ExtraDeny = []string{"/var/lib/clihost-test/state", filepath.Join(f.ws, "clihostd.sock")}
	p := f.compile(in)
	run, err := resolve("/run")
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := resolve("/tmp/ssh-x")
	if err != nil {
		t.Fatal(err)
	}
	wantIn(t, "Deny", p.Deny,
		filepath.Join(f.home, ".ssh"), filepath.Join(f.home, ".gnupg"), filepath.Join(f.home, ".aws"),
		filepath.Join(f.home, ".kube"), filepath.Join(f.home, ".config/gcloud"), filepath.Join(f.home, ".docker"),
		filepath.Join(f.home, ".netrc"), filepath.Join(f.home, ".git-credentials"), filepath.Join(f.home, ".npmrc"),
		filepath.Join(f.home, ".pypirc"), filepath.Join(f.home, ".config/gh"),
		filepath.Join(f.home, ".bashrc"), filepath.Join(f.home, ".profile"), filepath.Join(f.home, ".zshrc"),
		run, filepath.Join(tmp, "agent.1"), // /run holds docker, containerd, podman, D-Bus and $XDG_RUNTIME_DIR
		"/var/lib/clihost-test/state", filepath.Join(f.ws, "clihostd.sock"))
	// ~/** grants the home, but a broad grant never lifts a mandatory deny.
	wantRule(t, p, PathRule{Path: f.home, Access: Read, Subtree: true})

	in.ExtraDeny = []string{"relative/sock"}
	compileErr(t, in, "not an absolute path")
}

func TestDeclaredRunPathKeepsTheSocketMasks(t *testing.T) {
	f := newFixture(t)
	run, err := resolve("/run")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(run, "lock")); err != nil {
		t.Skip("no /run/lock here")
	}
	// Declaring a path under /run lifts the mask of /run, never those of the daemon sockets.
	p := f.compile(f.input(fsSandbox([]string{filepath.Join(run, "lock") + "/**"}, nil, nil)))
	wantNotIn(t, "Deny", p.Deny, run)
	wantIn(t, "Deny", p.Deny, filepath.Join(run, "docker.sock"), filepath.Join(run, "dbus/system_bus_socket"))
}

func TestDeclaredCredentialsAreNotDenied(t *testing.T) {
	f := newFixture(t)
	mkdir(t, filepath.Join(f.home, ".config/gh"))
	write(t, filepath.Join(f.home, ".config/git/config"), "", 0o644)
	write(t, filepath.Join(f.home, ".config/git/credentials"), "https://u:tok@host", 0o600)
	p := f.compile(f.input(fsSandbox([]string{"~/.config/gh/**", "~/.config/git/*"}, []string{"~/.config/gh/**"}, nil)))
	gh := filepath.Join(f.home, ".config/gh")
	wantNotIn(t, "Deny", p.Deny, gh)
	wantIn(t, "Deny", p.Deny, filepath.Join(f.home, ".ssh"), filepath.Join(f.home, ".config/git/credentials"))
	wantRule(t, p, PathRule{Path: gh, Access: Read | Write, Subtree: true})
	wantIn(t, "Writable", p.Writable, gh)
	wantNote(t, p, "~/.config/gh lifted")
	// The wildcard matched the git credential store, which stays denied: its rule is dropped.
	wantRule(t, p, PathRule{Path: filepath.Join(f.home, ".config/git/config"), Access: Read})
	if ruleOn(p, filepath.Join(f.home, ".config/git/credentials")) {
		t.Error("a wildcard match inside a mandatory deny was granted")
	}
	wantNote(t, p, "credentials lies inside the denied path")
}

func TestCredentialDeclaredInsideLiftsOnlyWithoutBroaderGrant(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.home, ".ssh/known_hosts"), "", 0o644)
	write(t, filepath.Join(f.home, ".ssh/id_ed25519"), "", 0o600)
	ssh, known := filepath.Join(f.home, ".ssh"), filepath.Join(f.home, ".ssh/known_hosts")

	p := f.compile(f.input(fsSandbox([]string{"~/.ssh/known_hosts"}, nil, nil)))
	wantNotIn(t, "Deny", p.Deny, ssh)
	wantRule(t, p, PathRule{Path: known, Access: Read})
	if ruleOn(p, ssh) || ruleOn(p, filepath.Join(f.home, ".ssh/id_ed25519")) {
		t.Errorf("more of ~/.ssh than declared is granted: %+v", p.Rules)
	}

	// With ~/** granted too, lifting the mask would expose all of ~/.ssh: it stays.
	p = f.compile(f.input(fsSandbox([]string{"~/.ssh/known_hosts", "~/**"}, nil, nil)))
	wantIn(t, "Deny", p.Deny, ssh)
	if ruleOn(p, known) {
		t.Error("a rule inside a kept mandatory deny survived")
	}
	wantNote(t, p, "known_hosts lies inside the denied path")
}

func TestGitAndEditorMasksInWritableRoots(t *testing.T) {
	f := newFixture(t)
	ws := f.ws
	for _, gd := range []string{".git", ".git/modules/sub", "vendor/lib/.git", "gitdirs/sm"} {
		write(t, filepath.Join(ws, gd, "HEAD"), "ref: refs/heads/main\n", 0o644)
		write(t, filepath.Join(ws, gd, "config"), "[core]\n", 0o644)
		mkdir(t, filepath.Join(ws, gd, "hooks"))
	}
	write(t, filepath.Join(ws, "sm/.git"), "gitdir: ../gitdirs/sm\n", 0o644)

	ro := f.compile(f.input(fsSandbox([]string{"./**"}, nil, nil)))
	wantNotIn(t, "Deny of a read-only workspace", ro.Deny, filepath.Join(ws, ".git/hooks"), filepath.Join(ws, ".git/config"))

	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**", ".git/config"}, nil)))
	wantIn(t, "Deny", p.Deny,
		filepath.Join(ws, ".git/hooks"), filepath.Join(ws, ".git/config"),
		filepath.Join(ws, ".git/modules/sub/hooks"), filepath.Join(ws, ".git/modules/sub/config"),
		filepath.Join(ws, "vendor/lib/.git/hooks"), filepath.Join(ws, "vendor/lib/.git/config"),
		filepath.Join(ws, "gitdirs/sm/hooks"), filepath.Join(ws, "gitdirs/sm/config"),
		filepath.Join(ws, ".vscode"), filepath.Join(ws, ".idea"))
	// The literal write rule on .git/config lies inside a deny: deny wins.
	wantNotIn(t, "Writable", p.Writable, filepath.Join(ws, ".git/config"))
	if ruleOn(p, filepath.Join(ws, ".git/config")) {
		t.Error("a rule on .git/config survived its mandatory deny")
	}

	// A writable root without a repository still masks .git/hooks and .git/config, so that a
	// `git init` inside the sandbox cannot plant them.
	bare := realTemp(t)
	in := f.input(fsSandbox(nil, []string{"./**"}, nil))
	in.Workspace = bare
	wantIn(t, "Deny", f.compile(in).Deny, filepath.Join(bare, ".git/hooks"), filepath.Join(bare, ".git/config"))
}

func TestNestedGitSearchBudget(t *testing.T) {
	f := newFixture(t)
	for i := range 30 {
		write(t, filepath.Join(f.ws, fmt.Sprintf("f%02d", i)), "", 0o644)
	}
	in := f.input(fsSandbox(nil, []string{"./**"}, nil))
	in.DenyBudget = 2 // a walk may visit 2×walkFactor entries
	for i := range 2 * walkFactor {
		write(t, filepath.Join(f.ws, "many", fmt.Sprintf("f%04d", i)), "", 0o644)
	}
	p := f.compile(in)
	// Past the walk bound the git rule judges nested git metadata after the call (a note says so);
	// the writable root's own masks stay.
	wantNote(t, p, "the git rule checks their hooks and config after the call")
	wantIn(t, "Deny", p.Deny, filepath.Join(f.ws, ".git/hooks"), filepath.Join(f.ws, ".git/config"))
}

func TestDenyGlobExpansion(t *testing.T) {
	f := newFixture(t)
	other := realTemp(t)
	write(t, filepath.Join(f.ws, "a.pem"), "", 0o600)
	write(t, filepath.Join(f.ws, "x/b.pem"), "", 0o600)
	write(t, filepath.Join(f.ws, "x/y/c.txt"), "", 0o644)
	write(t, filepath.Join(f.ws, "keys.pem/inner.pem"), "", 0o600)
	write(t, filepath.Join(other, "target.pem"), "", 0o600)
	symlink(t, filepath.Join(other, "target.pem"), filepath.Join(f.ws, "link.pem"))
	mkdir(t, filepath.Join(f.home, "secret"))
	p := f.compile(f.input(fsSandbox([]string{"./**", "x/y/**"}, nil,
		[]string{"**/*.pem", "~/secret/**", filepath.Join(other, "literal"), "x/y/**"})))
	wantIn(t, "Deny", p.Deny,
		filepath.Join(f.ws, "a.pem"), filepath.Join(f.ws, "x/b.pem"), filepath.Join(f.ws, "keys.pem"),
		filepath.Join(f.home, "secret"), filepath.Join(other, "literal"), filepath.Join(f.ws, "x/y"),
		filepath.Join(f.ws, "link.pem"), filepath.Join(other, "target.pem"))
	// A matched directory is masked whole; what lies inside needs no mask of its own.
	wantNotIn(t, "Deny", p.Deny, filepath.Join(f.ws, "keys.pem/inner.pem"), filepath.Join(f.ws, "x/y/c.txt"))
	// The workspace rule contains denied paths (the enforcing layer splits it); the x/y rule lies
	// inside one and is dropped.
	wantRule(t, p, PathRule{Path: f.ws, Access: Read, Subtree: true})
	if ruleOn(p, filepath.Join(f.ws, "x/y")) {
		t.Error("a rule inside an fs.deny path survived")
	}
	wantNote(t, p, "deny wins")
}

func TestDenyGlobBudget(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		write(t, filepath.Join(f.ws, "logs", fmt.Sprintf("f%d.log", i)), "", 0o644)
	}
	in := f.input(fsSandbox([]string{"./**"}, nil, []string{"logs/*.log"}))
	in.DenyBudget = 3
	err := compileErr(t, in, "could not be expanded completely")
	if !errors.Is(err, ErrDenyIncomplete) || !strings.Contains(err.Error(), filepath.Join(f.ws, "logs/*.log")) ||
		!strings.Contains(err.Error(), "at most 3 matches") || !strings.Contains(err.Error(), "narrow") {
		t.Errorf("over the budget: %v, want ErrDenyIncomplete naming the glob, the budget and a hint", err)
	}

	in.DenyBudget = 5
	p := f.compile(in)
	wantIn(t, "Deny", p.Deny, filepath.Join(f.ws, "logs/f0.log"), filepath.Join(f.ws, "logs/f4.log"))
	in.DenyBudget = -1
	compileErr(t, in, "negative")

	// Few matches, but more entries than the walk may read (2×walkFactor).
	for i := range 2*walkFactor + 10 {
		write(t, filepath.Join(f.ws, "many", fmt.Sprintf("f%04d", i)), "", 0o644)
	}
	in = f.input(fsSandbox([]string{"./**"}, nil, []string{"**/*.key"}))
	in.DenyBudget = 2
	if err := compileErr(t, in, "could not be expanded completely"); !errors.Is(err, ErrDenyIncomplete) {
		t.Errorf("over the walk bound: %v, want ErrDenyIncomplete", err)
	}
}

func TestExecBinaryAndELFInterpreter(t *testing.T) {
	f := newFixture(t)
	if f.interp == "" {
		t.Skip("/bin/true is static here")
	}
	if ld, err := filepath.EvalSymlinks("/lib64/ld-linux-x86-64.so.2"); err == nil && ld != f.interp {
		t.Fatalf("PT_INTERP of /bin/true resolved to %s, want %s", f.interp, ld)
	}
	sb := fsSandbox(nil, nil, nil)
	sb.Exec = &manifest.Exec{Allow: new(false), Spawn: []string{"jq"}}
	p := f.compile(f.input(sb))
	if want := sorted(f.bin, f.interp); !reflect.DeepEqual(p.Exec, want) {
		t.Errorf("Exec = %v, want %v", p.Exec, want)
	}
	if p.Binary != f.bin {
		t.Errorf("Binary = %s, want %s", p.Binary, f.bin)
	}
	wantRule(t, p, PathRule{Path: f.bin, Access: Read | Exec})
	wantRule(t, p, PathRule{Path: f.interp, Access: Read | Exec})
	wantNote(t, p, "exec.spawn is ignored")
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

func TestExecScriptInterpreters(t *testing.T) {
	f := newFixture(t)
	sh := realPath(t, "/bin/sh")
	env := realPath(t, "/usr/bin/env")
	jq := realPath(t, "/usr/bin/jq")
	shInterp, _, _, _, err := interpreterOf(sh)
	if err != nil {
		t.Fatal(err)
	}
	dir := realTemp(t)
	script := filepath.Join(dir, "tool")
	write(t, script, "#!/bin/sh -e\necho hi\n", 0o755)
	in := f.input(fsSandbox(nil, nil, nil))
	in.Binary = script
	p := f.compile(in)
	want := []string{script, sh}
	if shInterp != "" {
		want = append(want, realPath(t, shInterp))
	}
	if !reflect.DeepEqual(p.Exec, sorted(want...)) {
		t.Errorf("Exec = %v, want %v", p.Exec, sorted(want...))
	}

	// #!/usr/bin/env: env and the program it runs, found on PATH.
	write(t, script, "#!/usr/bin/env -S jq -n\n", 0o755)
	wantIn(t, "Exec", f.compile(in).Exec, script, env, jq)
	write(t, script, "#!/usr/bin/env no-such-program-clihost\n", 0o755)
	p = f.compile(in)
	wantIn(t, "Exec", p.Exec, script, env)
	wantNote(t, p, "no-such-program-clihost")

	// A script run by a script (nested #!) needs both interpreters, up to the kernel's depth.
	inner := filepath.Join(dir, "inner")
	write(t, inner, "#!/bin/sh\n", 0o755)
	write(t, script, "#!"+inner+"\n", 0o755)
	wantIn(t, "Exec", f.compile(in).Exec, script, inner, sh)
	prev := inner
	for i := range 5 {
		next := filepath.Join(dir, fmt.Sprintf("chain%d", i))
		write(t, next, "#!"+prev+"\n", 0o755)
		prev = next
	}
	in.Binary = prev
	compileErr(t, in, "nested interpreters")

	write(t, script, "#!relative/interp\n", 0o755)
	in.Binary = script
	compileErr(t, in, "not an absolute path")
}

func TestExecSpawn(t *testing.T) {
	f := newFixture(t)
	jq := realPath(t, "/usr/bin/jq")
	git := realPath(t, "/usr/bin/git")
	own := realTemp(t)
	write(t, filepath.Join(own, "helper"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(own, "noexec"), "#!/bin/sh\n", 0o644)

	sb := fsSandbox(nil, nil, nil)
	sb.Exec = &manifest.Exec{Allow: new(true), Spawn: []string{"jq", "/usr/bin/git", "helper", "noexec", "no-such-cli-clihost"}}
	in := f.input(sb)
	in.PATH = "relative:" + own + "::/usr/bin"
	p := f.compile(in)
	wantIn(t, "Exec", p.Exec, f.bin, jq, git, filepath.Join(own, "helper"))
	wantNotIn(t, "Exec", p.Exec, filepath.Join(own, "noexec"))
	wantNote(t, p, `"no-such-cli-clihost": not found on PATH`)
	wantNote(t, p, `"noexec": not found on PATH`)

	// Relative PATH entries are never searched, even when the name is there.
	in.PATH = "."
	sb.Exec.Spawn = []string{"helper"}
	in.Workspace = own
	wantNotIn(t, "Exec", f.compile(in).Exec, filepath.Join(own, "helper"))

	for _, tc := range []struct{ spawn, want string }{
		{"/nonexistent/clihost-tool", "no such file"},
		{"./bin/tool", "must be clean"},
		{"", "is empty"},
		{"/usr/bin", "not a regular file"},
	} {
		sb.Exec.Spawn = []string{tc.spawn}
		compileErr(t, f.input(sb), tc.want)
	}
}

func TestNetwork(t *testing.T) {
	f := newFixture(t)
	sb := manifest.Sandbox{Network: &manifest.Network{
		Egress:  []string{"API.GitHub.com.", "*.Example.COM", "api.github.com"},
		Ingress: []string{"http://127.0.0.1:8976/callback", "http://127.0.0.1:8976/callback"},
	}}
	p := f.compile(f.input(sb))
	if want := []string{"*.example.com", "api.github.com"}; !reflect.DeepEqual(p.Egress, want) {
		t.Errorf("Egress = %v, want %v", p.Egress, want)
	}
	if want := []string{"http://127.0.0.1:8976/callback"}; !reflect.DeepEqual(p.Ingress, want) {
		t.Errorf("Ingress = %v, want %v", p.Ingress, want)
	}
	for _, n := range []*manifest.Network{nil, {Egress: []string{}}} {
		if p := f.compile(f.input(manifest.Sandbox{Network: n})); p.Egress != nil {
			t.Errorf("Egress = %#v for %+v, want nil (no network)", p.Egress, n)
		}
	}
	for _, bad := range []string{"https://github.com", "*", "10.0.0.1", "*.com"} {
		compileErr(t, f.input(manifest.Sandbox{Network: &manifest.Network{Egress: []string{bad}}}), "network.egress[0]")
	}
}

func TestEnvRefusesInjection(t *testing.T) {
	f := newFixture(t)
	sb := manifest.Sandbox{Env: &manifest.Env{
		Pass: []string{"HOME", "LD_PRELOAD", "UNSET_VAR"},
		Set:  map[string]string{"LD_LIBRARY_PATH": "/x", "FOO": "bar"},
	}}
	in := f.input(sb)
	in.LookupEnv = func(k string) (string, bool) {
		v, ok := map[string]string{"HOME": "/home/u", "LD_PRELOAD": "/tmp/evil.so"}[k]
		return v, ok
	}
	p := f.compile(in)
	wantIn(t, "Env", p.Env, "HOME=/home/u", "FOO=bar")
	for _, kv := range p.Env {
		if strings.HasPrefix(kv, "LD_") || strings.HasPrefix(kv, "UNSET_VAR=") {
			t.Errorf("Env holds %s", kv)
		}
	}
	wantNote(t, p, `"LD_PRELOAD" is refused`)
	wantNote(t, p, `"LD_LIBRARY_PATH" is refused`)
}

func TestToolNarrowing(t *testing.T) {
	f := newFixture(t)
	jq := realPath(t, "/usr/bin/jq")
	bsb := manifest.Sandbox{
		Network: &manifest.Network{Egress: []string{"github.com", "api.github.com"}},
		FS:      &manifest.FS{Read: []string{"./**"}, Write: []string{"./**"}},
		Exec:    &manifest.Exec{Allow: new(true), Spawn: []string{"jq"}},
		TTY:     &manifest.TTY{},
	}
	tsb := &manifest.Sandbox{
		Network: &manifest.Network{Egress: []string{"api.github.com"}},
		FS:      &manifest.FS{Write: []string{}, Deny: []string{"private/**"}},
		Exec:    &manifest.Exec{Allow: new(false)},
		TTY:     &manifest.TTY{Required: true},
	}
	b, tool := bundle(bsb, tsb)
	in := Input{Bundle: b, Tool: tool, Binary: f.bin, Workspace: f.ws, Home: f.home, PATH: "/usr/bin"}
	p := f.compile(in)
	if len(p.Writable) != 0 {
		t.Errorf("Writable = %v, want none: the tool's fs.write is []", p.Writable)
	}
	wantRule(t, p, PathRule{Path: f.ws, Access: Read, Subtree: true})
	wantNotIn(t, "Exec", p.Exec, jq)
	wantIn(t, "Deny", p.Deny, filepath.Join(f.ws, "private"))
	if !reflect.DeepEqual(p.Egress, []string{"api.github.com"}) || !p.TTY {
		t.Errorf("Egress = %v, TTY = %v; want the tool's", p.Egress, p.TTY)
	}

	in.Tool = nil // the bundle's own calls (version check, setup, login)
	p = f.compile(in)
	wantIn(t, "Writable", p.Writable, f.ws)
	wantIn(t, "Exec", p.Exec, jq)
}

func TestInputErrors(t *testing.T) {
	f := newFixture(t)
	good := func() Input { return f.input(fsSandbox([]string{"./**"}, nil, nil)) }
	_, tool := bundle(manifest.Sandbox{}, &manifest.Sandbox{})
	cases := []struct {
		name string
		edit func(*Input)
		want string
	}{
		{"no bundle", func(in *Input) { in.Bundle = nil }, "no bundle"},
		{"foreign tool", func(in *Input) { in.Tool = tool }, "not a decoded tool"},
		{"relative binary", func(in *Input) { in.Binary = "true" }, "not an absolute path"},
		{"missing binary", func(in *Input) { in.Binary = "/nonexistent/clihost-bin" }, "no such file"},
		{"directory binary", func(in *Input) { in.Binary = f.ws }, "not a regular file"},
		{"relative home", func(in *Input) { in.Home = "home" }, "home"},
		{"relative workspace", func(in *Input) { in.Workspace = "ws" }, "workspace"},
		{"missing workspace", func(in *Input) { in.Workspace = filepath.Join(f.ws, "gone") }, "workspace"},
		{"file workspace", func(in *Input) { in.Workspace = f.bin }, "not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := good()
			tc.edit(&in)
			compileErr(t, in, tc.want)
		})
	}
}

func TestRuntimeBaseline(t *testing.T) {
	f := newFixture(t)
	p := f.compile(f.input(manifest.Sandbox{}))
	var paths []string
	for _, r := range p.Runtime {
		if r.Access != Read {
			t.Errorf("runtime rule %+v is not read-only", r)
		}
		for _, o := range p.Runtime {
			if o.Subtree && o.Path != r.Path && within(r.Path, o.Path) {
				t.Errorf("runtime rule %s is covered by %s", r.Path, o.Path)
			}
		}
		paths = append(paths, r.Path)
	}
	if lib, err := filepath.EvalSymlinks("/usr/lib"); err == nil {
		wantRule(t, &Policy{Rules: p.Runtime}, PathRule{Path: lib, Access: Read, Subtree: true})
	}
	wantIn(t, "Runtime", paths, "/etc/passwd", "/etc/group")
	wantNotIn(t, "Runtime", paths, "/etc/resolv.conf", "/etc/hosts", "/etc/shadow", "/etc/ssl", "/dev", "/tmp")
}

func TestDeterministic(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "b.pem"), "", 0o600)
	write(t, filepath.Join(f.ws, "a.pem"), "", 0o600)
	sb := fsSandbox([]string{"./**", "~/.config/x/**"}, []string{"out/**", "./**"}, []string{"**/*.pem", "~/.ssh/**"})
	sb.Network = &manifest.Network{Egress: []string{"b.example.com", "a.example.com"}}
	sb.Env = &manifest.Env{Set: map[string]string{"Z": "1", "A": "2"}}
	in := f.input(sb)
	a, b := f.compile(in), f.compile(in)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two compilations differ:\n%+v\n%+v", a, b)
	}
	for name, list := range map[string][]string{"Deny": a.Deny, "Exec": a.Exec, "Writable": a.Writable,
		"Egress": a.Egress, "Env": a.Env, "Notes": a.Notes, "Protect": a.Protect} {
		if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
			t.Errorf("%s is not sorted and unique: %v", name, list)
		}
	}
	if !slices.IsSortedFunc(a.Rules, comparePathRule) || !slices.IsSortedFunc(a.Runtime, comparePathRule) {
		t.Error("rules are not sorted")
	}
}

func TestAccessMarshalText(t *testing.T) {
	b, err := json.Marshal(PathRule{Path: "/x", Access: Read | Write | Exec, Subtree: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"path":"/x","access":"read,write,exec","subtree":true}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}

// TestShippedBundlesCompile compiles every bundle of the shipped catalog, bundle-wide and per tool.
func TestShippedBundlesCompile(t *testing.T) {
	f := newFixture(t)
	clis, err := fs.Glob(bundles.FS(), "*/CLI.md")
	if err != nil || len(clis) == 0 {
		t.Fatalf("catalog: %v, %d bundles", err, len(clis))
	}
	for _, cli := range clis {
		b := manifest.LoadBundle(bundles.FS(), cli, manifest.LoadOptions{})
		if b.CLI == nil {
			t.Errorf("%s did not decode", cli)
			continue
		}
		for _, tool := range append([]*manifest.ToolEntry{nil}, b.Tools...) {
			if tool != nil && tool.Tool == nil {
				continue
			}
			in := Input{Bundle: b, Tool: tool, Binary: f.bin, Workspace: f.ws, Home: f.home, PATH: "/usr/bin:/bin"}
			if _, err := Compile(in); err != nil {
				t.Errorf("%v", err)
			}
		}
	}
}

func TestIngressPort(t *testing.T) {
	for raw, want := range map[string]int{
		"http://localhost:8765/callback": 8765, "http://127.0.0.1/cb": 80, "https://[::1]/": 443,
		"https://localhost:9/x": 9,
	} {
		if got, err := IngressPort(raw); err != nil || got != want {
			t.Errorf("IngressPort(%q) = %d, %v; want %d", raw, got, err, want)
		}
	}
	for _, raw := range []string{"http://example.com:8765/", "ftp://localhost:21/", "http://localhost:0/", "http://localhost:x/", "localhost:8765"} {
		if _, err := IngressPort(raw); err == nil {
			t.Errorf("IngressPort(%q) accepted", raw)
		}
	}
}

// TestDeniedHardLinkIsNoted is issue 10 §8: a denied file with other hard links stays readable
// through them (a mask hides a name, Landlock judges the tree a name lies in), so the policy says
// so; a denied file with one link gets no such note.
func TestDeniedHardLinkIsNoted(t *testing.T) {
	f := newFixture(t)
	secret, other := filepath.Join(f.ws, "secret.env"), filepath.Join(f.ws, "alone.env")
	write(t, secret, "TOKEN=x", 0o600)
	write(t, other, "TOKEN=y", 0o600)
	if err := os.Link(secret, filepath.Join(f.ws, "copy.txt")); err != nil {
		t.Fatal(err)
	}
	p := f.compile(f.input(fsSandbox([]string{"./**"}, nil, []string{"./secret.env", "./alone.env"})))
	wantNote(t, p, "fs.deny: "+secret+" has 2 hard links")
	if slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, other) }) {
		t.Errorf("a note names %s, which has one link: %q", other, p.Notes)
	}
}

// TestProtect: Input.Protect paths inside a writable root are in Policy.Protect (resolved); those
// outside every writable root, missing, or inside a deny path are not; a writable root inside a
// protected path is not writable.
func TestProtect(t *testing.T) {
	f := newFixture(t)
	other := realTemp(t)
	mkdir(t, filepath.Join(f.ws, ".cli/tool/bin"))
	mkdir(t, filepath.Join(f.ws, "out"))
	mkdir(t, filepath.Join(other, "bundles"))
	symlink(t, filepath.Join(f.ws, ".cli"), filepath.Join(other, "link"))
	in := f.input(fsSandbox([]string{"./**"}, []string{"./**", ".cli/tool/bin/**"}, []string{".cli/denied"}))
	mkdir(t, filepath.Join(f.ws, ".cli/denied"))
	in.Protect = []string{filepath.Join(other, "link", "tool"), filepath.Join(other, "bundles"),
		filepath.Join(f.ws, "missing"), filepath.Join(f.ws, ".cli/denied")}
	p := f.compile(in)
	if want := []string{filepath.Join(f.ws, ".cli/tool")}; !slices.Equal(p.Protect, want) {
		t.Errorf("Protect = %v, want %v", p.Protect, want)
	}
	wantNotIn(t, "Writable", p.Writable, filepath.Join(f.ws, ".cli/tool/bin"))
	wantIn(t, "Writable", p.Writable, f.ws)
	wantNote(t, p, "which clihost reads bundles from: not writable")
	in.Protect = []string{"relative"}
	compileErr(t, in, "not an absolute path")
}

// TestHomeAsWorkspace: when the writable workspace is the home directory, the files a shell or a
// desktop session runs at login are masked (and swept when the call creates them), and the
// directories on the user's PATH stay read-only, so a call cannot leave a program the user's next
// login or command runs.
func TestHomeAsWorkspace(t *testing.T) {
	f := newFixture(t)
	f.home = f.ws
	mkdir(t, filepath.Join(f.ws, ".local/bin"))
	write(t, filepath.Join(f.ws, ".bash_aliases"), "alias ls=ls\n", 0o644)
	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil)))
	wantIn(t, "Protect", p.Protect, filepath.Join(f.ws, ".local/bin"))
	wantNotIn(t, "Protect", p.Protect, filepath.Join(f.ws, "bin")) // absent: nothing to bind …
	wantIn(t, "Absent", p.Absent, filepath.Join(f.ws, "bin"))      // … and swept when created
	wantNotIn(t, "Deny", p.Deny, filepath.Join(f.ws, ".local/bin"))
	for _, rel := range []string{".bash_aliases", ".config/autostart", ".config/systemd/user", ".config/fish/config.fish"} {
		wantIn(t, "Deny", p.Deny, filepath.Join(f.ws, rel))
	}
	wantIn(t, "Absent", p.Absent, filepath.Join(f.ws, ".config/autostart"))
	wantNotIn(t, "Absent", p.Absent, filepath.Join(f.ws, ".bash_aliases"))
}

// TestHomeAsWorkspaceContainerConfig: the container runtime's per-user configuration
// (~/.config/containers: containers.conf's engine.runtime, conmon_path, hooks_dir, default
// volumes; storage.conf's mount_program) is read by the rootless podman clihost itself starts for
// an engine: sandbox call, outside any sandbox: a call whose writable workspace is the home must
// not be able to write it (masked when it exists, swept when the call creates it).
func TestHomeAsWorkspaceContainerConfig(t *testing.T) {
	f := newFixture(t)
	f.home = f.ws
	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil)))
	wantIn(t, "Deny", p.Deny, filepath.Join(f.ws, ".config/containers"))
	wantIn(t, "Absent", p.Absent, filepath.Join(f.ws, ".config/containers"))
	mkdir(t, filepath.Join(f.ws, ".config/containers"))
	p = f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil)))
	wantIn(t, "Deny", p.Deny, filepath.Join(f.ws, ".config/containers"))
}
