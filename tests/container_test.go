package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// containerBundle is a bundle whose CLI (jq) runs in image under engine: sandbox.
func containerBundle(t *testing.T, image string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"box/CLI.md": `---
name: jq in a container
id: box
description: jq, run in an OCI container.
version: 1.0.0
bin: jq
install: [{ method: apt, package: jq }]
version_check: { cmd: "jq --version", parse: 'jq-(\d+\.\d+(?:\.\d+)?)', range: ">=1" }
runner: ./RUNNER.md
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [], deny: ["**/.env"] }
  exec: { allow: false }
  env: { pass: [] }
commands:
  read: ./tools/read/TOOL.md
---
`,
		"box/RUNNER.md": "---\nengine: sandbox\nimage: " + image + "\nlimits: { memory_mb: 128 }\n---\n",
		"box/tools/read/TOOL.md": `---
name: Read
id: box.read
description: A file as text.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { file: { type: string } }, required: [file] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [-R, -r, ".", "${input.file}"] }
---
`,
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixture.GiveToAgent(t, dir)
	return dir
}

// jqRootfs writes a tarball of a root filesystem holding only the host's jq and the libraries ldd
// names, readable by everyone.
func jqRootfs(t *testing.T) string { return rootfsOf(t, []string{"/usr/bin/jq"}, nil) }

// rootfsOf writes a tarball of a root filesystem holding only the host's binaries, the libraries
// ldd names for them, a /tmp and the symbolic links links (path in the root: target), readable by
// everyone.
func rootfsOf(t *testing.T, binaries []string, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files := slices.Clone(binaries)
	for _, b := range binaries {
		out, err := exec.Command("ldd", b).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", b, err)
		}
		files = append(files, regexp.MustCompile(`/\S+`).FindAllString(string(out), -1)...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_ = os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(root, f), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range links {
		_ = os.MkdirAll(filepath.Join(root, filepath.Dir(link)), 0o755)
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.MkdirAll(filepath.Join(root, "tmp"), 0o1777)
	dir := t.TempDir()
	fixture.Reachable(t, dir)
	_ = os.Chmod(dir, 0o755)
	tarball := filepath.Join(dir, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", root, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	_ = os.Chmod(tarball, 0o644)
	return tarball
}

// TestContainerEngineAsRootAndUnprivileged runs an engine: sandbox bundle (its runner in a
// RUNNER.md) with the built clihostctl, in-process, as root (rootful podman) and as an
// unprivileged user (rootless podman): the CLI reads the workspace through the bind mount and the
// bundle's denied .env reads empty. A rootless podman on a cgroup v1 host cannot enforce the memory
// limit: there the call is refused with runner_unavailable instead.
func TestContainerEngineAsRootAndUnprivileged(t *testing.T) {
	fixture.Need(t, "podman", "jq", "ldd", "tar")
	if os.Geteuid() != 0 {
		fixture.Missing(t, "needs root (it runs clihostctl as root and as another user)")
	}
	tarball := jqRootfs(t)
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil { // the user runs clihostctl
		t.Fatal(err)
	}
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	cgroupV2 := err == nil
	user := fixture.User(t, "clihost-t-agent")
	for _, tc := range []struct {
		name     string
		as       *fixture.TestUser
		refusing bool
	}{
		{"root", nil, false},
		{"unprivileged", &user, !cgroupV2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			fixture.Reachable(t, home)
			env := []string{"PATH=" + systemPath, "HOME=" + home, "XDG_RUNTIME_DIR=" + filepath.Join(home, "run"), "CLIHOST_BUNDLES="}
			cred := func(c *exec.Cmd) {
				c.Env, c.Dir = env, home
				if tc.as != nil {
					c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(tc.as.UID), Gid: uint32(tc.as.GID)}}
				}
			}
			_ = os.MkdirAll(filepath.Join(home, "run"), 0o700)
			if tc.as != nil {
				_ = os.Chmod(home, 0o755)
				if out, err := exec.Command("chown", "-R", tc.as.Name, home).CombinedOutput(); err != nil {
					t.Fatalf("chown: %v %s", err, out)
				}
			}
			image := "localhost/clihost-e2e-jq:" + tc.name
			imp := exec.Command("podman", "import", tarball, image)
			cred(imp)
			if out, err := imp.CombinedOutput(); err != nil {
				t.Fatalf("podman import as %s: %v %s", tc.name, err, out)
			}
			t.Cleanup(func() {
				rm := exec.Command("podman", "rmi", "--force", image)
				cred(rm)
				_ = rm.Run()
			})
			ws := fixture.Workspace(t)
			if tc.as != nil {
				ws = filepath.Join(home, "ws")
				_ = os.Mkdir(ws, 0o755)
			}
			_ = os.WriteFile(filepath.Join(ws, "in.txt"), []byte("visible\n"), 0o644)
			_ = os.WriteFile(filepath.Join(ws, ".env"), []byte("TOKEN=hunter2\n"), 0o644)
			if tc.as != nil {
				_ = exec.Command("chown", "-R", tc.as.Name, ws).Run()
			} else {
				fixture.GiveToAgent(t, ws)
			}
			bundles := containerBundle(t, image)
			call := func(file string) map[string]any {
				c := exec.Command(bin.ctl, "--bundles", bundles, "call", "box", "read", "--workspace", ws, "--input", `{"file": "`+file+`"}`)
				cred(c)
				var stderr strings.Builder
				c.Stderr = &stderr
				out, runErr := c.Output()
				var env map[string]any
				if err := json.Unmarshal(out, &env); err != nil {
					t.Fatalf("clihostctl call: %v (%v): %s %s", err, runErr, out, stderr.String())
				}
				return env
			}
			got := call("in.txt")
			if tc.refusing {
				e, _ := got["error"].(map[string]any)
				if got["ok"] != false || e["code"] != "runner_unavailable" || !strings.Contains(e["message"].(string), "cgroup v1") {
					t.Fatalf("rootless on cgroup v1: want runner_unavailable, got %v", got)
				}
				return
			}
			if got["ok"] != true || got["value"] != "visible\n" {
				t.Fatalf("in.txt: %v", got)
			}
			if got := call(".env"); strings.Contains(strings.ToLower(jsonText(got)), "hunter2") {
				t.Fatalf(".env was readable in the container: %v", got)
			}
			if tc.as == nil {
				// Rootful podman keeps its storage outside HOME: the calls add nothing to the
				// caller's HOME but clihostctl's own state (~/.local/state/clihost, its audit
				// log); `podman info` made ~/.rpmdb there on a Debian host with rpm.
				entries, _ := os.ReadDir(home)
				for _, e := range entries {
					if e.Name() != "run" && e.Name() != ".local" {
						t.Errorf("a container call left %s in the caller's HOME", filepath.Join(home, e.Name()))
					}
				}
			}
		})
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
