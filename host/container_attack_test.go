package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// toolImage builds, offline, an image holding only the given host programs and the shared
// libraries ldd names for them (podman import of a rootfs tarball, with podman import's --change
// instructions), tagged localhost/clihost-test-NAME:RANDOM, and returns its name; removed after
// the test.
func toolImage(t *testing.T, name string, changes []string, programs ...string) string {
	t.Helper()
	root := t.TempDir()
	files := append([]string(nil), programs...)
	for _, p := range programs {
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", p, err)
		}
		files = append(files, regexp.MustCompile(`/\S+`).FindAllString(string(out), -1)...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fixture.WriteFile(dst, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"tmp", "etc"} {
		_ = os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	tarball := filepath.Join(t.TempDir(), "rootfs.tar")
	if out, err := exec.Command("tar", "-C", root, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	image := "localhost/clihost-test-" + name + ":" + hex.EncodeToString(r[:])
	args := []string{"import"}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	if out, err := exec.Command("podman", append(args, tarball, image)...).CombinedOutput(); err != nil {
		t.Fatalf("podman import: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "--force", image).Run() })
	return image
}

// chmodBoxBundle is an engine: sandbox bundle whose CLI is chmod, with the whole workspace
// writable: its one tool sets a mode on a workspace file.
func chmodBoxBundle(image string) map[string]string {
	return map[string]string{
		"box/CLI.md": `---
name: chmod in a box
id: box
description: chmod, run in a container.
version: 1.0.0
bin: chmod
install: [{ method: apt, package: coreutils }]
version_check: { cmd: "chmod --version", parse: '(\d+\.\d+)', range: ">=1" }
runner: { engine: sandbox, image: "` + image + `" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: ["./**"] }
  exec: { allow: false }
  env: { pass: [] }
commands:
  mode: ./tools/mode/TOOL.md
---
`,
		"box/tools/mode/TOOL.md": `---
name: Mode
id: box.mode
description: Set a file's mode.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { mode: { type: string }, file: { type: string } }, required: [mode, file] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.mode}", "${input.file}"] }
---
`,
	}
}

// TestSandboxEngineNoSetuidLeftInWorkspace: a CLI in a container cannot leave a set-user-ID file
// in the workspace, which whoever later runs it on the host (where the workspace is not nosuid)
// would run as the call's uid. The kernel sandbox refuses such a mode with seccomp; the
// container's default seccomp profile allows it, so the host clears the bit after the call.
func TestSandboxEngineNoSetuidLeftInWorkspace(t *testing.T) {
	fixture.Need(t, "podman", "ldd", "tar", "chmod")
	image := toolImage(t, "tools", []string{"ENV=PATH=/usr/bin:/bin"}, "/bin/chmod")
	h, _ := writeBundle(t, chmodBoxBundle(image), Options{})
	b := bundle(t, h, "box")
	ws := t.TempDir()
	prog := filepath.Join(ws, "prog")
	if err := fixture.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	env := h.Call(context.Background(), b, "mode", js(t, `{"mode": "4755", "file": "prog"}`), Caller{Workspace: ws}, CallOptions{})
	st, err := os.Lstat(prog)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSetuid != 0 {
		t.Fatalf("the container left a set-user-ID file in the workspace: %s %v (call: %+v %+v)", prog, st.Mode(), env, env.Error)
	}
	if env.Error != nil && env.Error.Code == "runner_unavailable" {
		t.Fatalf("the container did not run: %+v", env.Error)
	}
	if len(env.Warnings) != 1 || !strings.Contains(env.Warnings[0], "set-user-ID") {
		t.Fatalf("want one warning naming the cleared bit, got %q", env.Warnings)
	}
}

// lsBoxBundle is an engine: sandbox bundle whose CLI is ls, reading the workspace and writing only
// its out folder.
func lsBoxBundle(image string) map[string]string {
	return map[string]string{
		"box/CLI.md": `---
name: ls in a box
id: box
description: ls, run in a container.
version: 1.0.0
bin: ls
install: [{ method: apt, package: coreutils }]
version_check: { cmd: "ls --version", parse: '(\d+\.\d+)', range: ">=1" }
runner: { engine: sandbox, image: "` + image + `" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: ["./out/**"] }
  exec: { allow: false }
  env: { pass: [] }
commands:
  list: ./tools/list/TOOL.md
---
`,
		"box/tools/list/TOOL.md": `---
name: List
id: box.list
description: List a folder.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { dir: { type: string } }, required: [dir] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["-a", "--", "${input.dir}"] }
---
`,
	}
}

// TestSandboxEngineMountSwapRace: a writable folder of the workspace that another process (a
// concurrent call with the workspace writable) swaps for a symbolic link to a host folder between
// the policy's check and the runtime's mount must never show the host folder in the container:
// the runtime follows a bind mount's source, so what it mounted is checked against what the
// policy saw before the CLI starts. The kernel sandbox refuses such a swap (nsinit's openPlan).
func TestSandboxEngineMountSwapRace(t *testing.T) {
	fixture.Need(t, "podman", "ldd", "tar", "ls")
	image := toolImage(t, "tools", []string{"ENV=PATH=/usr/bin:/bin"}, "/bin/ls")
	h, _ := writeBundle(t, lsBoxBundle(image), Options{})
	b := bundle(t, h, "box")
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "HOST-ONLY-MARKER"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, hostDir)
	ws := t.TempDir()
	out, aside := filepath.Join(ws, "out"), filepath.Join(ws, "out.real")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the racing process: out is a folder, then a link to hostDir, then a folder again
		defer close(done)
		for {
			select {
			case <-stop:
				_ = os.Remove(out)
				_ = os.Rename(aside, out)
				return
			default:
			}
			if os.Rename(out, aside) == nil {
				_ = os.Symlink(hostDir, out)
				time.Sleep(time.Millisecond)
				_ = os.Remove(out)
				_ = os.Rename(aside, out)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { close(stop); <-done }()
	ran := 0
	for i := 0; i < 40; i++ {
		env := h.Call(context.Background(), b, "list", js(t, `{"dir": "out"}`), Caller{Workspace: ws}, CallOptions{})
		if s, _ := env.Value.(string); strings.Contains(s, "HOST-ONLY-MARKER") {
			t.Fatalf("call %d: the container listed the host folder through the swapped link: %q", i, s)
		}
		if env.OK {
			ran++
		}
	}
	t.Logf("%d of 40 calls ran", ran)
}

// TestSandboxEngineBinNotInImage: a bin the image lacks is not_installed with a hint about the
// image, not a runtime failure, and leaves no container behind.
func TestSandboxEngineBinNotInImage(t *testing.T) {
	fixture.Need(t, "podman", "ldd", "tar", "ls")
	image := toolImage(t, "tools", []string{"ENV=PATH=/usr/bin:/bin"}, "/bin/ls")
	files := lsBoxBundle(image)
	files["box/CLI.md"] = strings.NewReplacer("bin: ls\n", "bin: clihost-absent-cli\n", `cmd: "ls --version"`, `cmd: "clihost-absent-cli --version"`).Replace(files["box/CLI.md"])
	h, _ := writeBundle(t, files, Options{})
	ws := fixture.Workspace(t)
	env := h.Call(context.Background(), bundle(t, h, "box"), "list", js(t, `{"dir": "."}`), Caller{Workspace: ws}, CallOptions{})
	if env.OK || env.Error == nil || env.Error.Code != "not_installed" || !strings.Contains(env.Error.Hint, "image") {
		t.Fatalf("want not_installed, got %+v %+v", env, env.Error)
	}
	// Only this test's image: other tests on the host run containers of their own.
	if out, _ := exec.Command("podman", "ps", "-a", "--filter", "ancestor="+image, "--format", "{{.Names}} {{.Status}}").Output(); strings.Contains(string(out), "clihost-") {
		t.Fatalf("a container outlived its call: %s", out)
	}
}

// TestSandboxEngineWorkspaceThroughLink: a workspace named through a symbolic link (a home under
// /home → /data/home) is the folder it leads to, as for engine: subprocess: the container sees its
// files.
func TestSandboxEngineWorkspaceThroughLink(t *testing.T) {
	fixture.Need(t, "podman", "ldd", "tar", "ls")
	image := toolImage(t, "tools", []string{"ENV=PATH=/usr/bin:/bin"}, "/bin/ls")
	h, _ := writeBundle(t, lsBoxBundle(image), Options{})
	real := t.TempDir()
	if err := os.WriteFile(filepath.Join(real, "seen.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, real)
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), bundle(t, h, "box"), "list", js(t, `{"dir": "."}`), Caller{Workspace: link}, CallOptions{})
	if s, _ := env.Value.(string); !env.OK || !strings.Contains(s, "seen.txt") {
		t.Fatalf("want seen.txt listed, got %+v %+v", env, env.Error)
	}
}

// TestSandboxEngineDockerRefused: on a host whose only runtime is a docker whose engine answers,
// an engine: sandbox call is refused naming podman (docker cannot set up a container without
// starting it, so its mounts cannot be checked first), docker never creates or runs a container,
// and lint warns on that host (runner-host).
func TestSandboxEngineDockerRefused(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "docker.log")
	script := "#!/bin/sh\necho \"$@\" >> " + log + "\necho 27.0\n"
	if err := fixture.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h, _ := writeBundle(t, jqBoxBundle("{ engine: sandbox, image: localhost/clihost-absent:1 }"), Options{LookupEnv: envWith(map[string]string{"PATH": dir})})
	b := bundle(t, h, "box")
	env := h.Call(context.Background(), b, "read", js(t, `{"filter": ".", "file": "x"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if env.OK || env.Error == nil || env.Error.Code != "runner_unavailable" || !strings.Contains(env.Error.Message, "needs podman") {
		t.Fatalf("want runner_unavailable naming podman, got %+v %+v", env, env.Error)
	}
	calls, _ := os.ReadFile(log)
	for _, verb := range []string{"run", "create", "start"} {
		if strings.Contains("\n"+string(calls), "\n"+verb+" ") {
			t.Fatalf("docker was asked to %s: %s", verb, calls)
		}
	}
	var rules []string
	for _, f := range h.RunnerFindings(context.Background(), b) {
		rules = append(rules, f.Rule)
	}
	if !slices.Contains(rules, "runner-host") {
		t.Fatalf("lint on a docker-only host: %v, want runner-host", rules)
	}
}

// TestSandboxEngineTmpdirThroughLink: a TMPDIR named through a symbolic link (where the env file
// and the masks' empty files are made) does not make the mount check refuse every call.
func TestSandboxEngineTmpdirThroughLink(t *testing.T) {
	fixture.Need(t, "podman", "ldd", "tar", "ls")
	image := toolImage(t, "tools", []string{"ENV=PATH=/usr/bin:/bin"}, "/bin/ls")
	files := lsBoxBundle(image)
	files["box/CLI.md"] = strings.Replace(files["box/CLI.md"], `write: ["./out/**"] }`, `write: ["./out/**"], deny: ["**/.env"] }`, 1)
	h, _ := writeBundle(t, files, Options{})
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "tmp")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	for _, name := range []string{"seen.txt", ".env"} {
		if err := os.WriteFile(filepath.Join(ws, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixture.GiveToAgent(t, ws)
	t.Setenv("TMPDIR", link)
	env := h.Call(context.Background(), bundle(t, h, "box"), "list", js(t, `{"dir": "."}`), Caller{Workspace: ws}, CallOptions{})
	if s, _ := env.Value.(string); !env.OK || !strings.Contains(s, "seen.txt") {
		t.Fatalf("want seen.txt listed, got %+v %+v", env, env.Error)
	}
}
