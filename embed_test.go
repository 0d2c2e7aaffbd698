package clihost

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestEmbeddedProgram builds testdata/embed, a tiny main using the Go API and nothing else (no
// clihost-sandbox helper beside it: it re-executes itself as the sandbox's init, through the
// nsinit/entry import this package makes), and runs it as root and as an unprivileged user: it
// calls jq from the catalog in the sandbox, makes a file as the identity model says (never as root),
// and the sandbox refuses it a file outside its workspace. Then again with the clihost-sandbox
// helper beside it.
func TestEmbeddedProgram(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Need(t, "jq", "id", "cat", "go")
	dir := t.TempDir()
	build := func(out, pkg string) {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	build("embed", "./testdata/embed")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, dir)
	u := fixture.User(t, "clihost-t-embed")
	// run runs the program as prog in a workspace owned by owner; the CLIs must run as want.
	run := func(t *testing.T, prog, owner fixture.TestUser, want int) {
		ws := t.TempDir()
		if err := os.Chown(ws, owner.UID, owner.GID); err != nil {
			t.Fatal(err)
		}
		if owner.UID == 0 { // root's workspace, open to all: the CLIs still run as nobody
			if err := os.Chmod(ws, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		fixture.Reachable(t, ws)
		cmd := exec.Command(filepath.Join(dir, "embed"), ws)
		cmd.Dir = ws
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"}
		if prog.UID != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(prog.UID), Gid: uint32(prog.GID)}}
		}
		out, err := fixture.Run(cmd)
		if err != nil || out.Code != 0 {
			t.Fatalf("embed as uid %d: %v %+v", prog.UID, err, out)
		}
		for _, line := range []string{
			`jq: ok "an embedding program\n"`,
			"touch: ok \"\"\n",
			"outside: error upstream_error: cat: /etc/hostname: Permission denied",
		} {
			if !strings.Contains(out.Stdout, line) {
				t.Errorf("embed as uid %d: no %q in\n%s\nstderr: %s", prog.UID, line, out.Stdout, out.Stderr)
			}
		}
		st, err := os.Stat(filepath.Join(ws, "made-in-the-sandbox"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid != uint32(want) {
			t.Errorf("embed as uid %d: the CLI ran as uid %d, want %d", prog.UID, uid, want)
		}
	}
	root := fixture.TestUser{Name: "root"}
	nobody := fixture.TestUser{Name: "nobody", UID: fixture.AgentID, GID: fixture.AgentID}
	for _, layout := range []string{"re-exec", "helper"} {
		t.Run(layout, func(t *testing.T) {
			if layout == "helper" {
				build("clihost-sandbox", "./cmd/clihost-sandbox")
			}
			// Root: the CLIs run as the workspace's owner, never as root (nobody for root's own).
			t.Run("root", func(t *testing.T) { run(t, root, u, u.UID) })
			t.Run("root-in-roots-workspace", func(t *testing.T) { run(t, root, root, fixture.AgentID) })
			t.Run("root-agents-workspace", func(t *testing.T) { run(t, root, nobody, fixture.AgentID) })
			// Unprivileged: the CLIs run as the program's user, in a user namespace.
			t.Run("unprivileged", func(t *testing.T) { run(t, u, u, u.UID) })
		})
	}
}
