package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// shRootfs writes a tarball of a root filesystem holding only the host's sh (dash) and sleep and
// the libraries ldd names, readable by everyone.
func shRootfs(t *testing.T) string {
	return rootfsOf(t, []string{"/usr/bin/dash", "/usr/bin/sleep"}, map[string]string{"bin/sh": "/usr/bin/dash", "bin/sleep": "/usr/bin/sleep"})
}

// TestDaemonKilledDuringContainerCallLeavesNoFolder: an engine: sandbox call keeps its env file (and
// conmon's working directory) in a folder of the daemon's temporary folder, removed when the call
// ends. A daemon killed with SIGKILL during the call cannot remove it: the next daemon does, at
// start, and leaves alone the folders of processes that still run (here the test's own).
func TestDaemonKilledDuringContainerCallLeavesNoFolder(t *testing.T) {
	needLong(t)
	fixture.NeedRoot(t) // rootless podman refuses limits on a cgroup v1 host
	fixture.Need(t, "podman", "dash", "sleep", "ldd", "tar")
	image := "localhost/clihost-e2e-sh:leftovers"
	if out, err := exec.Command("podman", "import", shRootfs(t), image).CombinedOutput(); err != nil {
		t.Fatalf("podman import: %v %s", err, out)
	}
	t.Cleanup(func() {
		ids, _ := exec.Command("podman", "ps", "-a", "-q", "--filter", "ancestor="+image).Output()
		for _, id := range strings.Fields(string(ids)) {
			_ = exec.Command("podman", "rm", "--force", id).Run()
		}
		_ = exec.Command("podman", "rmi", "--force", image).Run()
	})
	bundles := t.TempDir()
	writeFile(t, filepath.Join(bundles, "box", "CLI.md"), `---
name: sh in a container
id: box
description: sh, run in an OCI container.
version: 1.0.0
bin: sh
install: [{ method: apt, package: dash }]
version_check: { cmd: "sh -c 'echo 1.0.0'", parse: '(\d+\.\d+\.\d+)', range: ">=1" }
runner: ./RUNNER.md
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: true, spawn: [sleep] }
  env: { pass: [] }
commands:
  wait: ./tools/wait/TOOL.md
---
`)
	writeFile(t, filepath.Join(bundles, "box", "RUNNER.md"), "---\nengine: sandbox\nimage: "+image+"\nlimits: { memory_mb: 128 }\n---\n")
	writeFile(t, filepath.Join(bundles, "box", "tools", "wait", "TOOL.md"), `---
name: Wait
id: box.wait
description: Sleeps.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
timeout_ms: 60000
runner: { cli: ../../CLI.md, argv: ["-c", "sleep 50"] }
---
`)
	fixture.GiveToAgent(t, bundles)
	tmp := t.TempDir()
	fixture.Reachable(t, tmp)
	// A folder of a process that runs (this test): never the daemon's to remove.
	live := filepath.Join(tmp, "clihost-container-"+strconv.Itoa(os.Getpid())+"-live")
	if err := os.Mkdir(live, 0o700); err != nil {
		t.Fatal(err)
	}
	withTmp := func(c *exec.Cmd) { c.Env = append(c.Env, "TMPDIR="+tmp) }
	state := t.TempDir()
	ws := fixture.Workspace(t)
	d := startDaemonWith(t, state, ws, withTmp, "--bundles", bundles, "--no-catalog")

	call := exec.Command(bin.ctl, "--socket", d.socket, "call", "box", "wait", "--workspace", ws, "--input", "{}")
	call.Env = []string{"PATH=" + systemPath, "HOME=" + t.TempDir()}
	if err := call.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = call.Process.Kill(); _ = call.Wait() }()
	var folders []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		folders, _ = filepath.Glob(filepath.Join(tmp, "clihost-container-*"))
		if len(folders) > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container call made no folder in the daemon's TMPDIR: %v\n%s", folders, strings.Join(d.log.All(), "\n"))
		}
	}
	// The runtime's client runs in it: let the container start.
	time.Sleep(500 * time.Millisecond)
	if err := d.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = d.proc.Wait()
	left, _ := filepath.Glob(filepath.Join(tmp, "clihost-container-*"))
	if len(left) != 2 {
		t.Fatalf("after SIGKILL: want the call's folder and the live one, got %v", left)
	}

	d2 := startDaemonWith(t, state, ws, withTmp, "--bundles", bundles, "--no-catalog")
	defer func() { _ = d2.cmd.Process.Kill(); _ = d2.proc.Wait() }()
	left, _ = filepath.Glob(filepath.Join(tmp, "clihost-container-*"))
	if len(left) != 1 || left[0] != live {
		t.Fatalf("a restarted daemon: want only %s left in its TMPDIR, got %v", live, left)
	}
}
