package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// TestDaemonKilledDuringVersionCheckLeavesNoFolder: a root daemon whose agent may use neither the
// workspace nor a home (the state directory under a folder it cannot search) runs a version check in
// a new folder of its temporary folder, given to the agent and removed when the check ends. A daemon
// killed with SIGKILL during the check cannot remove it: the next daemon does, at start.
func TestDaemonKilledDuringVersionCheckLeavesNoFolder(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Need(t, "dash", "sleep")
	bundles := t.TempDir()
	writeFile(t, filepath.Join(bundles, "slow", "CLI.md"), `---
name: slow version
id: slow
description: A version check that takes its time.
version: 1.0.0
bin: sh
install: [{ method: apt, package: dash }]
version_check: { cmd: "sh -c 'sleep 30; echo 1.0.0'", parse: '(\d+\.\d+\.\d+)', range: ">=1", timeout_ms: 60000 }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: true, spawn: [sleep] }
  env: { pass: [] }
commands:
  v: ./tools/v/TOOL.md
---
`)
	writeFile(t, filepath.Join(bundles, "slow", "tools", "v", "TOOL.md"), `---
name: V
id: slow.v
description: Prints the version.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["-c", "echo 1.0.0"] }
---
`)
	fixture.Reachable(t, filepath.Join(bundles, "slow", "tools", "v"))
	above := t.TempDir()
	state := filepath.Join(above, "state") // under a 0700 folder: nobody gets no home
	ws := t.TempDir()                      // root's, 0700: nobody may not use it
	for _, d := range []string{above, ws} {
		if err := os.Chmod(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tmp := t.TempDir()
	fixture.Reachable(t, tmp)
	start := func() (*exec.Cmd, *fixture.Proc, *fixture.Lines) {
		cmd := exec.Command(bin.daemon, "--config", "", "--state", state, "--socket", filepath.Join(state, "ctl.sock"), "--http", "127.0.0.1:0",
			"--workspace", ws, "--bundles", bundles, "--no-catalog")
		cmd.Env = []string{"PATH=" + systemPath, "HOME=" + t.TempDir(), "TMPDIR=" + tmp, "CLIHOST_BUNDLES="}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		proc := fixture.Start(t, cmd)
		log := fixture.Follow(stderr)
		if _, err := log.Wait("clihostd ready", time.Minute); err != nil {
			t.Fatalf("clihostd %v", err)
		}
		return cmd, proc, log
	}
	cmd, proc, log := start()
	// status checks the version (the daemon may have begun at its start already).
	status := exec.Command(bin.ctl, "--socket", filepath.Join(state, "ctl.sock"), "status", "slow")
	status.Env = []string{"PATH=" + systemPath, "HOME=" + t.TempDir()}
	var statusOut strings.Builder
	status.Stdout, status.Stderr = &statusOut, &statusOut
	if err := status.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = status.Process.Kill(); _ = status.Wait() }()
	var left []string
	for deadline := time.Now().Add(30 * time.Second); len(left) == 0; time.Sleep(50 * time.Millisecond) {
		left, _ = filepath.Glob(filepath.Join(tmp, "clihost-check-*"))
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's version check made no folder in its TMPDIR\n%s\n%s", strings.Join(log.All(), "\n"), statusOut.String())
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = proc.Wait()
	if _, err := os.Stat(left[0]); err != nil {
		t.Fatalf("after SIGKILL: %v", err)
	}
	cmd2, proc2, _ := start()
	defer func() { _ = cmd2.Process.Kill(); _ = proc2.Wait() }()
	if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
		t.Fatalf("a restarted daemon left the killed one's version check folder %s (%v)", left[0], err)
	}
}
