package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// touchOutBundle writes a bundle touch whose tool make touches input file, granted fs.write
// ./out/** only, and returns its folder.
func touchOutBundle(t *testing.T) string {
	t.Helper()
	dir := fixture.Write(t, map[string]string{
		"touch/CLI.md": strings.Replace(fixture.CLI("touch", "touch", "  make: ./tools/make/TOOL.md\n"), "write: []", `write: ["./out/**"]`, 1),
		"touch/tools/make/TOOL.md": `---
name: Make
id: touch.make
description: Touch a file.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { file: { type: string, format: path, pattern: "^[^-]" } }, required: [file] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.file}"] }
---
`,
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, dir)
	return dir
}

// TestDaemonWriteBesideGrantUnderTmp: a daemon (root, and unprivileged) whose calls take pooled
// sandbox inits serves a tool granted only ./out/** in a workspace under /tmp. out/ is written on
// the host; a write beside it fails visibly (the call is not OK, the file is not on the host),
// where it used to land in the sandbox's private /tmp and report success.
func TestDaemonWriteBesideGrantUnderTmp(t *testing.T) {
	fixture.NeedRoot(t)
	t.Run("root", func(t *testing.T) {
		ws := fixture.Workspace(t)
		d := startDaemonWith(t, t.TempDir(), ws, nil, "--bundles", touchOutBundle(t), "--sandbox-pool", "1")
		checkWriteBeside(t, d, ws)
	})
	t.Run("unprivileged", func(t *testing.T) {
		agent := fixture.User(t, agentName)
		base := t.TempDir()
		fixture.Reachable(t, base)
		state, ws := filepath.Join(base, "state"), filepath.Join(base, "ws")
		for _, dir := range []string{state, ws} {
			privateDir(t, dir, agent.UID, agent.GID, 0o755)
		}
		if err := os.Chmod(filepath.Dir(bin.daemon), 0o755); err != nil {
			t.Fatal(err)
		}
		as := func(cmd *exec.Cmd) {
			cmd.Dir = "/"
			cmd.Env = []string{"PATH=" + systemPath, "HOME=" + agent.Home, "CLIHOST_BUNDLES="}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(agent.UID), Gid: uint32(agent.GID), Groups: groupsOf(agent)}}
		}
		d := startDaemonWith(t, state, ws, as, "--bundles", touchOutBundle(t), "--sandbox-pool", "1")
		checkWriteBeside(t, d, ws)
	})
}

// checkWriteBeside makes d's touch tool write out/result.txt, then beside.txt, in ws, until the
// second call took a pooled init.
func checkWriteBeside(t *testing.T, d *daemonProc, ws string) {
	t.Helper()
	if !strings.HasPrefix(ws, "/tmp/") {
		t.Fatalf("the workspace %s is not under /tmp", ws)
	}
	call := func(file string) identityEnvelope {
		return parseEnvelope(t, d.ctl(t, "call", "touch", "make", "--workspace", ws, "--input", `{"file": "`+file+`"}`))
	}
	if env := call("out/result.txt"); !env.OK {
		t.Fatalf("touch out/result.txt: %+v", env.Error)
	}
	if _, err := os.Stat(filepath.Join(ws, "out", "result.txt")); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		time.Sleep(500 * time.Millisecond) // the pool refills
		hits := poolHits(t, d)
		env := call("beside.txt")
		t.Logf("touch beside.txt: ok %v, error %+v", env.OK, env.Error)
		if env.OK {
			t.Fatalf("a write beside out/ reported success (it went where the host cannot see it): %+v", env)
		}
		if _, err := os.Lstat(filepath.Join(ws, "beside.txt")); err == nil {
			t.Fatal("wrote beside out/")
		}
		if env.Error == nil || !strings.Contains(env.Error.Message, "Read-only file system") && !strings.Contains(env.Error.Message, "Permission denied") {
			t.Fatalf("the write beside out/ must fail with EROFS or EACCES: %+v", env.Error)
		}
		if poolHits(t, d) > hits {
			return
		}
		if attempt == 4 {
			t.Fatal("no call took a pooled init")
		}
	}
}

// poolHits reads the daemon's count of calls whose sandbox was built ahead of them (they took a
// pooled sandbox init or a zygote's ready thread) from its metrics.
func poolHits(t *testing.T, d *daemonProc) int {
	t.Helper()
	return poolTakes(t, d, "hit") + poolTakes(t, d, "zygote")
}
