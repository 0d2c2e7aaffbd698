package host

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/output"
)

// noLogin fails t when a failed call's error points at a login.
func noLogin(t *testing.T, what string, env Envelope) {
	t.Helper()
	if env.OK || env.Error == nil {
		t.Fatalf("%s: the call succeeded: %+v", what, env)
	}
	e := env.Error
	if e.Category == output.CategoryAuthentication || e.Code == "auth_required" || strings.Contains(strings.ToLower(e.Hint), "log in") ||
		strings.Contains(e.Hint, "login") {
		t.Fatalf("%s: a refused path is reported as a login problem: %+v", what, e)
	}
}

// permission fails t unless env is a permission error whose hint contains every one of want.
func permission(t *testing.T, what string, env Envelope, want ...string) {
	t.Helper()
	noLogin(t, what, env)
	e := env.Error
	if e.Category != output.CategoryPermission || e.Retryable || e.Fallback {
		t.Fatalf("%s: category %q (retryable %v, fallback %v), want permission: %+v", what, e.Category, e.Retryable, e.Fallback, e)
	}
	for _, w := range want {
		if !strings.Contains(e.Hint, w) {
			t.Fatalf("%s: the hint does not say %q: %q (stderr %q)", what, w, e.Hint, e.Stderr)
		}
	}
}

// TestRefusedReadNamesThePathAndTheRule runs the catalog's jq and rg on /etc/shadow: their file
// inputs are format: path, so the host refuses the call before the CLI starts, as a permission
// error (path_traversal_blocked) that names the input and says what to pass, never a login. The
// sandbox's own refusal and its hint are tested on refusalBundles below.
func TestRefusedReadNamesThePathAndTheRule(t *testing.T) {
	fixture.Need(t, "jq", "rg")
	h, _ := catalogHost(t)
	ws := fixture.Workspace(t)
	env := h.Call(context.Background(), bundle(t, h, "jq"), "filter", js(t, `{"filter": ".", "files": ["/etc/shadow"]}`), Caller{Workspace: ws}, CallOptions{})
	permission(t, "jq /etc/shadow", env, "relative path inside the workspace")
	if env.Error.Code != "path_traversal_blocked" || env.Error.Pointer != "/files/0" || !strings.Contains(env.Error.Message, `"/etc/shadow" is an absolute path`) {
		t.Fatalf("jq /etc/shadow: %+v", env.Error)
	}
	env = h.Call(context.Background(), bundle(t, h, "rg"), "search", js(t, `{"pattern": "root", "path": "/etc/shadow"}`), Caller{Workspace: ws}, CallOptions{})
	permission(t, "rg /etc/shadow", env, "relative path inside the workspace")
	if env.Error.Code != "path_traversal_blocked" || env.Error.Pointer != "/path" {
		t.Fatalf("rg /etc/shadow: %+v", env.Error)
	}
}

// refusalBundles are bundles around coreutils' cat (tool read: cat the files) and mkdir (tool mkdir),
// reading the workspace, writing ./out, with locked/ denied.
func refusalBundles() map[string]string {
	sb := `sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: ["./out/**"], deny: ["locked/**"] }
  exec: { allow: false }
  env: { pass: [] }
`
	cli := func(program string) string {
		return strings.Replace(fixture.CLI(program, program, "  run: ./tools/run/TOOL.md\n"), `sandbox:
  network: { egress: [] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env: { pass: [] }
`, sb, 1)
	}
	tool := func(id string) string {
		return `---
name: Run
id: ` + id + `.run
description: Runs the program on paths.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { paths: { type: array, items: { type: string, pattern: "^[^-]" } } }, required: [paths] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.paths}"] }
---
`
	}
	return map[string]string{
		"cat/CLI.md": cli("cat"), "cat/tools/run/TOOL.md": tool("cat"),
		"mkdir/CLI.md": cli("mkdir"), "mkdir/tools/run/TOOL.md": tool("mkdir"),
	}
}

// TestRefusalsOfCatAndMkdir: coreutils' refusals name the rule: a file the sandbox grants but
// whose own mode refuses the CLI (with the mode), a path outside the workspace, a write into a
// directory the bundle's fs.deny masks, a write outside fs.write.
func TestRefusalsOfCatAndMkdir(t *testing.T) {
	fixture.Need(t, "cat", "mkdir")
	h, _ := writeBundle(t, refusalBundles(), Options{})
	ws := fixture.Workspace(t)
	for _, d := range []string{"locked", "out"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "closed.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	if err := os.Chmod(filepath.Join(ws, "closed.txt"), 0); err != nil {
		t.Fatal(err)
	}
	call := func(tool string, paths ...string) Envelope {
		return h.Call(context.Background(), bundle(t, h, tool), "run", map[string]any{"paths": toAny(paths)}, Caller{Workspace: ws}, CallOptions{})
	}
	permission(t, "cat closed.txt", call("cat", "closed.txt"),
		"grants reading "+filepath.Join(ws, "closed.txt"), "the file's own permissions refused it: mode 0000")
	permission(t, "cat /etc/shadow", call("cat", "/etc/shadow"), "/etc/shadow is outside the workspace", "sandbox.fs.read of cat@1 (tool run)")
	permission(t, "mkdir locked/x", call("mkdir", "locked/x"), "is masked by the bundle's sandbox.fs.deny ("+filepath.Join(ws, "locked")+")")
	permission(t, "mkdir new", call("mkdir", "new"), "not writing it (its sandbox.fs.write grants ./out/**)")
	if env := call("mkdir", "out/new"); !env.OK {
		t.Fatalf("positive control, mkdir out/new: %+v", env.Error)
	}
}

// TestGitRefusalNamesTheFile: git diff on a tracked file the CLI may not read reports that file,
// not a login.
func TestGitRefusalNamesTheFile(t *testing.T) {
	fixture.Need(t, "git")
	h, _ := catalogHost(t)
	ws := fixture.Workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "secret.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, ws, "init", "-q")
	gitIn(t, ws, "add", "secret.txt")
	if err := os.WriteFile(filepath.Join(ws, "secret.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	if err := os.Chmod(filepath.Join(ws, "secret.txt"), 0); err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), bundle(t, h, "git"), "diff", js(t, `{}`), Caller{Workspace: ws}, CallOptions{})
	permission(t, "git diff", env, filepath.Join(ws, "secret.txt"), "mode 0000")
}

// TestAuthHintsNeedAuth: jq printing "not logged in" is an authentication failure with the login
// hint only in a bundle that declares auth; without auth it is neither.
func TestAuthHintsNeedAuth(t *testing.T) {
	fixture.Need(t, "jq")
	tool := `---
name: Fail
id: echo.fail
description: Fails the way an unauthenticated CLI does.
version: 1.0.0
inputs: { type: object, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [-n, 'error("not logged in: run login first")'] }
---
`
	withTool := func(files map[string]string) map[string]string {
		files["echo/tools/fail/TOOL.md"] = tool
		files["echo/CLI.md"] = strings.Replace(files["echo/CLI.md"], "  raw: ./tools/raw/TOOL.md\n", "  raw: ./tools/raw/TOOL.md\n  fail: ./tools/fail/TOOL.md\n", 1)
		return files
	}
	ws := fixture.Workspace(t)

	h, _ := writeBundle(t, withTool(echoBundle("jq", ">=1.5", "")), Options{})
	env := h.Call(context.Background(), bundle(t, h, "echo"), "fail", map[string]any{}, Caller{Workspace: ws}, CallOptions{})
	noLogin(t, "without auth", env)
	if !strings.Contains(env.Error.Stderr, "not logged in") {
		t.Fatalf("without auth: stderr %q", env.Error.Stderr)
	}

	auth := "auth:\n  login: { cmd: \"jq -n 1\", interactive: true, completes_when: { cmd: \"jq -n 1\", exit_code: 0 } }\n"
	h, _ = writeBundle(t, withTool(echoBundle("jq", ">=1.5", auth)), Options{})
	env = h.Call(context.Background(), bundle(t, h, "echo"), "fail", map[string]any{}, Caller{Workspace: ws}, CallOptions{})
	if env.OK || env.Error.Category != output.CategoryAuthentication || !strings.Contains(env.Error.Hint, `clihostctl login echo (runs "jq -n 1")`) {
		t.Fatalf("with auth: %+v", env.Error)
	}
}

// TestGhUnauthenticatedIsAuthentication: the real gh without credentials (auth status, pr list)
// is still an authentication failure with gh's login hint.
func TestGhUnauthenticatedIsAuthentication(t *testing.T) {
	fixture.Need(t, "gh")
	h, _ := catalogHost(t)
	h.opts.LookupEnv = func(k string) (string, bool) {
		if k == "PATH" {
			return os.LookupEnv(k)
		}
		return "", false
	}
	ws := fixture.Workspace(t)
	for _, tool := range []string{"auth status", "pr list"} {
		env := h.Call(context.Background(), bundle(t, h, "gh"), tool, js(t, `{}`), Caller{Workspace: ws}, CallOptions{})
		if env.OK || env.Error.Category != output.CategoryAuthentication || !strings.Contains(env.Error.Hint, "clihostctl login gh") {
			t.Fatalf("gh %s: %+v", tool, env.Error)
		}
	}
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestVersionCheckReportsTheFailure: the real gh failing to read its config in the sandbox (its
// config file's mode refuses the user it runs as) is reported with gh's exit code and stderr
// (redacted), the refused file and its rule; never as a version that "does not match".
func TestVersionCheckReportsTheFailure(t *testing.T) {
	fixture.Need(t, "gh")
	ws := fixture.Workspace(t)
	cfg := filepath.Join(ws, "cfg-tok-0123456789")
	if err := os.Mkdir(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.yml"), []byte("git_protocol: https\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	if err := os.Chmod(filepath.Join(cfg, "config.yml"), 0); err != nil {
		t.Fatal(err)
	}
	const token = "tok-0123456789"
	files := map[string]string{
		"ghx/CLI.md": `---
name: gh with a config
id: ghx
description: gh with a config it cannot read.
version: 1.0.0
bin: gh
install: [{ method: apt, package: gh }]
version_check: { cmd: "gh --version", parse: 'gh version (\d+\.\d+\.\d+)', range: ">=2" }
auth: { state: { env: [GHX_TOKEN] } }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: false }
  env: { pass: [GHX_TOKEN], set: { GH_CONFIG_DIR: "` + cfg + `" } }
commands:
  run: ./tools/run/TOOL.md
---
`,
		"ghx/tools/run/TOOL.md": `---
name: Run
id: ghx.run
description: gh version.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [version] }
---
`,
	}
	lookup := func(k string) (string, bool) {
		if k == "GHX_TOKEN" {
			return token, true
		}
		return os.LookupEnv(k)
	}
	h, _ := writeBundle(t, files, Options{LookupEnv: lookup})
	_, _, e := h.Verify(context.Background(), bundle(t, h, "ghx"), ws)
	if e == nil {
		t.Fatal("the version check passed")
	}
	if e.Code != "version_check_failed" || strings.Contains(e.Message, "does not match") || !strings.Contains(e.Message, `"gh --version" failed with exit code 1`) ||
		e.ExitCode == nil || *e.ExitCode != 1 || !strings.Contains(e.Stderr, "failed to read configuration") || !strings.Contains(e.Stderr, "config.yml: permission denied") {
		t.Fatalf("version check error: %+v", e)
	}
	if e.Category != output.CategoryPermission || !strings.Contains(e.Hint, "the file's own permissions refused it: mode 0000") {
		t.Fatalf("version check hint: %q (category %q)", e.Hint, e.Category)
	}
	for _, s := range []string{e.Message, e.Stderr, e.Hint} {
		if strings.Contains(s, token) || !strings.Contains(s, "cfg-[REDACTED]") {
			t.Fatalf("the secret is not redacted: %q", s)
		}
	}
}

// TestVersionOutputNotRecognised: a version command that exits 0 with output the bundle's parse
// pattern does not match quotes the output and says to check the program or the version_check,
// not to "install a matching version" (Debian's hello prints no number the pattern wants).
func TestVersionOutputNotRecognised(t *testing.T) {
	cli := strings.Replace(fixture.CLI("true", "true", "  run: ./tools/run/TOOL.md\n"),
		`parse: 'true \(GNU coreutils\) (\d+\.\d+)'`, `parse: 'truly (\d+\.\d+\.\d+)'`, 1)
	files := fixture.True()
	files["true/CLI.md"] = cli
	h := New(fixture.Registry(t, files), Options{})
	b := bundle(t, h, "true")
	_, _, e := h.Verify(context.Background(), b, fixture.Workspace(t))
	if e == nil || e.Code != "version_mismatch" || !strings.Contains(e.Message, `it begins "true (GNU coreutils)`) ||
		strings.Contains(e.Hint, "install a matching version") || !strings.Contains(e.Hint, "version_check.parse") {
		t.Fatalf("%+v, want version_mismatch quoting the output with a hint about the program or its version_check", e)
	}
}
