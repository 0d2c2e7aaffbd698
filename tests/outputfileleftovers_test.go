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

// TestDaemonKilledDuringOutputFileCallLeavesNoFile: a runner.output.file tool's standard output goes
// to a new file in the workspace folder it names, renamed onto the path when the call succeeds. A
// daemon killed with SIGKILL during the call must leave nothing in the workspace (no hidden
// .clihost-stdout-* file for git status to list, as large as the output so far): the file has no
// name until the call succeeds.
func TestDaemonKilledDuringOutputFileCallLeavesNoFile(t *testing.T) {
	fixture.Need(t, "dash", "head", "sleep", "touch")
	bundles := t.TempDir()
	writeFile(t, filepath.Join(bundles, "out", "CLI.md"), `---
name: sh to a file
id: out
description: sh, its output to a workspace file.
version: 1.0.0
bin: sh
install: [{ method: apt, package: dash }]
version_check: { cmd: "sh -c 'echo 1.0.0'", parse: '(\d+\.\d+\.\d+)', range: ">=1" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: ["./**"] }
  exec: { allow: true, spawn: [head, sleep, touch] }
  env: { pass: [] }
commands:
  write: ./tools/write/TOOL.md
---
`)
	writeFile(t, filepath.Join(bundles, "out", "tools", "write", "TOOL.md"), `---
name: Write
id: out.write
description: Writes a megabyte, then waits.
version: 1.0.0
inputs:
  type: object
  additionalProperties: false
  properties: { file: { type: string, format: path }, wait: { type: boolean } }
  required: [file]
outputs: { type: object }
timeout_ms: 60000
runner:
  cli: ../../CLI.md
  argv: ["-c", "head -c 1000000 /dev/zero; touch started; [ \"$1\" != true ] || sleep 50", "sh", "${input.wait}"]
  output: { format: text, file: file }
---
`)
	fixture.GiveToAgent(t, bundles)
	state := t.TempDir()
	ws := fixture.Workspace(t)
	d := startDaemonWith(t, state, ws, nil, "--bundles", bundles, "--no-catalog")

	// The positive control: a call that succeeds leaves its output at the path, and nothing else.
	if r := d.ctl(t, "call", "out", "write", "--workspace", ws, "--input", `{"file": "done.bin", "wait": false}`); r.code != 0 || !strings.Contains(r.stdout, `"bytes": 1000000`) {
		t.Fatalf("call: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if st, err := os.Stat(filepath.Join(ws, "done.bin")); err != nil || st.Size() != 1000000 {
		t.Fatalf("done.bin: %v %v", st, err)
	}
	_ = os.Remove(filepath.Join(ws, "started"))

	call := exec.Command(bin.ctl, "--socket", d.socket, "call", "out", "write", "--workspace", ws, "--input", `{"file": "big.bin", "wait": true}`)
	call.Env = []string{"PATH=" + systemPath, "HOME=" + t.TempDir()}
	if err := call.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = call.Process.Kill(); _ = call.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call did not start\n%s", strings.Join(d.log.All(), "\n"))
		}
	}
	if err := d.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = d.proc.Wait()
	entries, _ := os.ReadDir(ws)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "done.bin started" {
		t.Fatalf("a daemon killed during an output.file call left %v in the workspace (want only done.bin and started)", names)
	}
}
