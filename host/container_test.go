package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
)

// jqBoxBundle is a bundle whose tool runs jq with the filter and file given, under runner (a
// runner block, inline).
func jqBoxBundle(runner string) map[string]string {
	return map[string]string{
		"box/CLI.md": `---
name: jq in a box
id: box
description: jq, run as the runner block says.
version: 1.0.0
bin: jq
install: [{ method: apt, package: jq }]
version_check: { cmd: "jq --version", parse: 'jq-(\d+\.\d+(?:\.\d+)?)', range: ">=1" }
runner: ` + runner + `
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [], deny: ["**/.env"] }
  exec: { allow: false }
  env: { pass: [BOX_TOKEN] }
commands:
  read: ./tools/read/TOOL.md
  env: ./tools/env/TOOL.md
  raw: ./tools/raw/TOOL.md
  spin: ./tools/spin/TOOL.md
---
`,
		"box/tools/read/TOOL.md": `---
name: Read
id: box.read
description: Apply a filter to a file.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { filter: { type: string }, file: { type: string } }, required: [filter, file] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.filter}", "${input.file}"] }
---
`,
		"box/tools/env/TOOL.md": `---
name: Env
id: box.env
description: The environment jq sees.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: object }
runner: { cli: ../../CLI.md, argv: [-n, -c, "env"], output: { format: json } }
---
`,
		"box/tools/raw/TOOL.md": `---
name: Raw
id: box.raw
description: A file as text.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { file: { type: string } }, required: [file] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [-R, -r, ".", "${input.file}"] }
---
`,
		"box/tools/spin/TOOL.md": `---
name: Spin
id: box.spin
description: Build an array of n numbers (memory), or loop forever (time).
version: 1.0.0
timeout_ms: 3000
inputs: { type: object, additionalProperties: false, properties: { filter: { type: string } }, required: [filter] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.filter}", -n] }
---
`,
	}
}

// envWith is a LookupEnv over the process's environment with the given overrides.
func envWith(over map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := over[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}
}

// TestSandboxEngineRefusedWithoutRuntime: engine: sandbox on a host whose PATH has no podman and
// no docker whose engine answers is refused with runner_unavailable naming what is missing, and
// the CLI never runs (on the host or anywhere): no exit code. Today's main ran it on the host.
func TestSandboxEngineRefusedWithoutRuntime(t *testing.T) {
	fixture.Need(t, "jq")
	bare := t.TempDir()
	noAnswer := t.TempDir() // a docker client whose engine does not answer
	if err := fixture.WriteFile(filepath.Join(noAnswer, "docker"), []byte("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{bare, "needs podman or docker; none found on PATH"},
		{noAnswer, "docker's engine does not answer"},
	} {
		h, _ := writeBundle(t, jqBoxBundle("{ engine: sandbox, image: localhost/clihost-absent:1 }"), Options{LookupEnv: envWith(map[string]string{"PATH": tc.path})})
		b := bundle(t, h, "box")
		ws := fixture.Workspace(t)
		env := h.Call(context.Background(), b, "read", js(t, `{"filter": ".", "file": "/etc/hostname"}`), Caller{Workspace: ws}, CallOptions{})
		if env.OK || env.Error == nil || env.Error.Code != "runner_unavailable" || !strings.Contains(env.Error.Message, tc.want) ||
			!strings.Contains(env.Error.Hint, "podman") || env.ExitCode != nil || env.Error.ExitCode != nil {
			t.Fatalf("PATH=%s: want runner_unavailable %q and nothing run, got %+v %+v", tc.path, tc.want, env, env.Error)
		}
	}
}

// TestInProcessEngineRefusedAtCall: engine: in-process is a lint error; a bundle that reaches a call
// anyway (findings dropped, as a Go program building bundles might) is refused, not run.
func TestInProcessEngineRefusedAtCall(t *testing.T) {
	fixture.Need(t, "jq")
	files := jqBoxBundle("{ engine: in-process }")
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		_ = os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg := fixture.Load(t, dir)
	var rules []string
	for _, f := range reg.AllFindings() {
		rules = append(rules, f.Rule)
	}
	if strings.Join(rules, ",") != "runner-engine-in-process" {
		t.Fatalf("lint: %v, want runner-engine-in-process", rules)
	}
	h := New(reg, Options{})
	b := reg.Entries()[0].Bundle
	b.Findings = nil
	env := h.Call(context.Background(), b, "read", js(t, `{"filter": ".", "file": "x"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if env.OK || env.Error.Code != "runner_unavailable" || !strings.Contains(env.Error.Message, "in-process") || env.ExitCode != nil {
		t.Fatalf("want runner_unavailable, got %+v %+v", env, env.Error)
	}
}

// jqImage builds, offline, an image holding only the host's /usr/bin/jq and the shared libraries
// ldd names (podman import of a rootfs tarball), and returns its name; removed after the test. Its
// ENTRYPOINT (a hostile image's) must never wrap a call.
func jqImage(t *testing.T) string {
	t.Helper()
	return toolImage(t, "jq", []string{"ENV=PATH=/usr/bin", `ENTRYPOINT ["/usr/bin/jq", "-n", "\"the image's entrypoint ran\""]`}, "/usr/bin/jq")
}

// TestSandboxEngineRunsInContainer runs a tool of an engine: sandbox bundle through podman, end to
// end (host.Call): it reads a workspace file through the bind mount, cannot read a host file
// outside the workspace that the host's own jq reads, sees only the bundle's environment (no host
// variable), and an absent image is refused with the pull command.
func TestSandboxEngineRunsInContainer(t *testing.T) {
	fixture.Need(t, "podman", "jq", "ldd", "tar")
	image := jqImage(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "host.json")
	if err := os.WriteFile(secret, []byte(`{"host": "secret"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, secretDir) // readable by the call's uid: only the container keeps it out
	lookup := envWith(map[string]string{"BOX_TOKEN": "tok-1", "HOST_ONLY": "leak"})
	h, _ := writeBundle(t, jqBoxBundle("{ engine: sandbox, image: \""+image+"\", limits: { memory_mb: 128 } }"), Options{LookupEnv: lookup})
	b := bundle(t, h, "box")
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "in.json"), []byte(`{"a": 41}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)

	env := h.Call(context.Background(), b, "read", js(t, `{"filter": ".a + 1", "file": "in.json"}`), Caller{Workspace: ws}, CallOptions{})
	if !env.OK || strings.TrimSpace(env.Value.(string)) != "42" {
		t.Fatalf("workspace file: %+v %+v", env, env.Error)
	}
	if out, err := exec.Command("jq", ".host", secret).Output(); err != nil || !strings.Contains(string(out), "secret") {
		t.Fatalf("the host's jq cannot read %s (%v): the test proves nothing", secret, err)
	}
	env = h.Call(context.Background(), b, "read", js(t, `{"filter": ".host", "file": "`+secret+`"}`), Caller{Workspace: ws}, CallOptions{})
	if env.OK || env.Error == nil || !strings.Contains(env.Error.Stderr, "No such file") {
		t.Fatalf("a host file outside the workspace was readable: %+v %+v", env, env.Error)
	}
	env = h.Call(context.Background(), b, "env", js(t, `{}`), Caller{Workspace: ws}, CallOptions{})
	vars, _ := env.Value.(map[string]any)
	if !env.OK || vars["BOX_TOKEN"] != "tok-1" || vars["HOST_ONLY"] != nil || vars["HOME"] != "/tmp" {
		t.Fatalf("environment: %+v %+v", env.Value, env.Error)
	}
	for k := range vars {
		if strings.Contains(strings.ToLower(k), "proxy") {
			t.Errorf("the container got %s", k)
		}
	}

	h2, _ := writeBundle(t, jqBoxBundle("{ engine: sandbox, image: \""+image+"-absent\" }"), Options{LookupEnv: lookup})
	env = h2.Call(context.Background(), bundle(t, h2, "box"), "read", js(t, `{"filter": ".", "file": "in.json"}`), Caller{Workspace: ws}, CallOptions{})
	if env.OK || env.Error.Code != "runner_unavailable" || !strings.Contains(env.Error.Message, "podman pull "+image+"-absent") || env.ExitCode != nil {
		t.Fatalf("absent image: %+v %+v", env, env.Error)
	}
}

// TestSandboxEngineHostile: in the container the bundle's deny paths in the workspace are masked
// (an existing .env reads empty), the workspace is read-only when the bundle grants no write, a
// CLI that runs past its timeout is stopped and its container removed, and one that allocates
// past runner.limits.memory_mb is killed.
func TestSandboxEngineHostile(t *testing.T) {
	fixture.Need(t, "podman", "jq", "ldd", "tar")
	image := jqImage(t)
	h, _ := writeBundle(t, jqBoxBundle("{ engine: sandbox, image: \""+image+"\", limits: { memory_mb: 64 } }"), Options{})
	b := bundle(t, h, "box")
	ws := t.TempDir()
	for name, data := range map[string]string{".env": "TOKEN=hunter2\n", "sub/.env": "TOKEN=hunter3\n", "ok.txt": "visible\n"} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixture.GiveToAgent(t, ws)
	call := func(tool, input string) Envelope {
		return h.Call(context.Background(), b, tool, js(t, input), Caller{Workspace: ws}, CallOptions{})
	}
	if env := call("raw", `{"file": "ok.txt"}`); !env.OK || env.Value != "visible\n" {
		t.Fatalf("ok.txt: %+v %+v", env, env.Error)
	}
	for _, f := range []string{".env", "sub/.env", ws + "/sub/../.env"} {
		env := call("raw", `{"file": "`+f+`"}`)
		if strings.Contains(env.Value.(string)+string(fmt.Sprint(env.Error)), "hunter") {
			t.Fatalf("%s was readable in the container: %+v %+v", f, env, env.Error)
		}
	}
	// jq writes nothing itself: the mounts the call gets say whether the workspace is writable.
	mounts, err := workspaceMounts(mustPlan(t, h, b, ws), ws, t.TempDir())
	if err != nil || len(mounts) == 0 || mounts[0].Target != ws || !mounts[0].ReadOnly {
		t.Fatalf("workspace mounts %+v %v: want the workspace first, read-only (fs.write: [])", mounts, err)
	}

	start := time.Now()
	env := call("spin", `{"filter": "def f: f; f"}`)
	if env.OK || env.Error.Code != "timeout" || time.Since(start) > 30*time.Second {
		t.Fatalf("spin: %+v %+v after %s", env, env.Error, time.Since(start))
	}
	// Only this test's containers (its image is its own): other tests run containers at the same time.
	if out, _ := exec.Command("podman", "ps", "-a", "--filter", "ancestor="+image, "--format", "{{.Names}}").Output(); strings.Contains(string(out), "clihost-") {
		t.Fatalf("a container outlived its call: %s", out)
	}
	env = call("spin", `{"filter": "[range(50000000)] | length"}`)
	if env.OK || env.Error.ExitCode == nil || (*env.Error.ExitCode != 137 && *env.Error.ExitCode != -1) {
		t.Fatalf("50M numbers in 64 MiB: want the CLI killed (OOM, 137), got %+v %+v", env, env.Error)
	}
}

// mustPlan is the kernel sandbox's plan of a call of b's spin tool in ws.
func mustPlan(t *testing.T, h *Host, b *manifest.Bundle, ws string) *isolation.Plan {
	t.Helper()
	var env []string
	plan, _, e := h.confine(b, b.Tool("spin"), "/usr/bin/podman", Caller{Workspace: ws}, &env)
	if e != nil {
		t.Fatalf("confine: %+v", e)
	}
	return plan
}

// TestSandboxEngineLimitIsResourceExhausted: a container call killed at its runner.limits (the
// OOM killer at memory_mb, RLIMIT_CPU at cpu_ms) fails with resource_exhausted naming the limits
// and their values, as a kernel-sandbox call does, not as a CLI that exited 137 on its own.
func TestSandboxEngineLimitIsResourceExhausted(t *testing.T) {
	fixture.Need(t, "podman", "jq", "ldd", "tar")
	image := jqImage(t)
	files := jqBoxBundle("{ engine: sandbox, image: \"" + image + "\", limits: { memory_mb: 64, cpu_ms: 1000 } }")
	// A second of CPU may take many seconds of a loaded machine's wall clock.
	files["box/tools/spin/TOOL.md"] = strings.Replace(files["box/tools/spin/TOOL.md"], "timeout_ms: 3000", "timeout_ms: 120000", 1)
	h, _ := writeBundle(t, files, Options{})
	b := bundle(t, h, "box")
	ws := t.TempDir()
	fixture.GiveToAgent(t, ws)
	for _, filter := range []string{"[range(50000000)] | length", "last(range(1e15))"} {
		env := h.Call(context.Background(), b, "spin", js(t, `{"filter": "`+filter+`"}`), Caller{Workspace: ws}, CallOptions{})
		if env.OK || env.Error == nil || env.Error.Code != "resource_exhausted" || env.Error.Category != "resource" ||
			!strings.Contains(env.Error.Message, "memory limit 64 MiB") || !strings.Contains(env.Error.Message, "CPU time limit 1s") {
			t.Fatalf("%s: want resource_exhausted naming the limits, got %+v %+v", filter, env, env.Error)
		}
	}
	// The container's conmon writes a file "oom" in its working directory when the kernel kills the
	// container for memory: the call's own folder, not the host's (here the test's).
	if _, err := os.Stat("oom"); !errors.Is(err, os.ErrNotExist) {
		os.Remove("oom")
		t.Errorf("a container killed for memory left a file in the host's working directory (%v)", err)
	}
}

// TestSandboxEngineGetsInventorySecrets: an engine: sandbox bundle's SECRETS.md secrets reach the
// container's environment as they reach a kernel-sandbox call (and come back redacted), and a
// required one that is unset refuses the call before any container starts.
func TestSandboxEngineGetsInventorySecrets(t *testing.T) {
	fixture.Need(t, "podman", "jq", "ldd", "tar")
	image := jqImage(t)
	files := jqBoxBundle("{ engine: sandbox, image: \"" + image + "\" }")
	files["box/CLI.md"] = strings.Replace(files["box/CLI.md"], "sandbox:\n", "auth: { ref: ./SECRETS.md }\nsandbox:\n", 1)
	files["box/SECRETS.md"] = "---\nsecrets:\n  - { slug: box-secret, name: Box secret, description: The key the CLI reads. }\n---\n"
	engine := setupEngine(t)
	h, _ := writeBundle(t, files, Options{Setup: engine})
	b := bundle(t, h, "box")
	ws := t.TempDir()
	fixture.GiveToAgent(t, ws)
	call := func() Envelope {
		return h.Call(context.Background(), b, "env", js(t, `{}`), Caller{Workspace: ws, User: "alice"}, CallOptions{})
	}
	if env := call(); env.OK || env.Error.Code != "setup_required" || !strings.Contains(env.Error.Hint, "clihostctl secret set box BOX_SECRET") {
		t.Fatalf("unset required secret: %+v %+v", env, env.Error)
	}
	if err := engine.SetSecret(lifecycle.Scope{Bundle: b.Key(), Workspace: ws, User: "alice"}, "box-secret", "s3cr3t-value"); err != nil {
		t.Fatal(err)
	}
	env := call()
	vars, _ := env.Value.(map[string]any)
	if !env.OK || vars["BOX_SECRET"] != "[REDACTED]" {
		t.Fatalf("the container did not get BOX_SECRET (or it came back unredacted): %+v %+v", env.Value, env.Error)
	}
	// A multi-line value (a PEM key) reaches it too: secrets do not go through the env file,
	// which refuses newlines and would put the plaintext on disk (AIP-19).
	pem := "-----BEGIN KEY-----\nabc\n-----END KEY-----"
	if err := engine.SetSecret(lifecycle.Scope{Bundle: b.Key(), Workspace: ws, User: "alice"}, "box-secret", pem); err != nil {
		t.Fatal(err)
	}
	env = call()
	vars, _ = env.Value.(map[string]any)
	if !env.OK || vars["BOX_SECRET"] != "[REDACTED]" {
		t.Fatalf("a multi-line secret did not reach the container: %+v %+v", env.Value, env.Error)
	}
}
