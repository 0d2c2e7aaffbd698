package deploy

import (
	"path/filepath"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// nobody is the account a root daemon falls back to (identity model: --agent-user, else the
// workspace's owner when not root, else nobody).
var nobody = &account{name: "nobody", uid: 65534, gid: 65534}

// rootDaemon starts clihostd as root on a private state directory and socket under dir, in a
// directory whose ./.cli holds the operator's mark and project bundles (so the daemon serves the built-in
// catalog plus it, with its default bundle sources), with extra flags.
func rootDaemon(t *testing.T, what, dir string, extra ...string) *daemon {
	t.Helper()
	mkdir(t, filepath.Join(dir, "state"), 0o700, 0, 0)
	mkdir(t, filepath.Join(dir, "run"), 0o755, 0, 0)
	cwd := filepath.Join(dir, "cwd")
	mkdir(t, cwd, 0o755, 0, 0)
	writeBundles(t, filepath.Join(cwd, ".cli"), markBundle())
	writeBundles(t, filepath.Join(cwd, ".cli"), projectBundle())
	argv := append([]string{bin.daemon, "--state", filepath.Join(dir, "state"), "--socket", filepath.Join(dir, "run", "clihostd.sock"),
		"--http", "127.0.0.1:0"}, extra...)
	return startDaemon(t, daemonSpec{what: what, argv: argv, env: userEnv(nil), dir: cwd})
}

// privateRootWorkspace makes root's private project the way it is in /root/project: a 0700
// directory, holding data.json and a git repository, under a 0700 root-owned directory; it
// returns the workspace.
func privateRootWorkspace(t *testing.T, dir string) string {
	t.Helper()
	home := filepath.Join(dir, "root")
	mkdir(t, home, 0o700, 0, 0)
	ws := filepath.Join(home, "project")
	project(t, nil, ws)
	mkdir(t, ws, 0o700, 0, 0)
	return ws
}

// TestRootHost runs clihostd as root (no --agent-user) beside root's private project: a call there
// is refused with workspace_denied naming the workspace, the uid and the fix (not the exec's
// permission denied). With --agent-user and the workspace granted to that user by an ACL, jq and
// git status (a repository root owns) work. `clihostctl install gh` on the root host, with gh
// installed by Debian, verifies its version as a uid with a HOME of its own.
func TestRootHost(t *testing.T) {
	need(t)
	fixture.Need(t, "jq", "git", "gh")
	dir := scratch(t)
	ws := privateRootWorkspace(t, dir)
	defWS := filepath.Join(dir, "srv-workspace")
	mkdir(t, defWS, 0o755, 0, 0)

	t.Run("no agent user", func(t *testing.T) {
		what := "a root daemon without --agent-user, root's private workspace " + ws
		d := rootDaemon(t, what, filepath.Join(dir, "plain"), "--workspace", defWS)
		expectWorkspaceDenied(t, what, d.call(t, nil, ws, "jq", "filter", jqInput), ws, nobody, nobody.uid, true)

		expectInstalled(t, "clihostctl install gh on a root host (gh from Debian's apt)", ctl(t, nil, d.socket, "install", "gh", "--json"))
	})

	t.Run("agent user granted the workspace", func(t *testing.T) {
		// The operator's fix: an agent user, granted the workspace (and search on its parent).
		run(t, nil, "/", "setfacl", "-m", "u:"+agent.name+":x", filepath.Dir(ws))
		run(t, nil, "/", "setfacl", "-R", "-m", "u:"+agent.name+":rwX,d:u:"+agent.name+":rwX", ws)
		what := "a root daemon with --agent-user " + agent.name + " granted root's private workspace " + ws + " by ACL"
		d := rootDaemon(t, what, filepath.Join(dir, "agent"), "--workspace", defWS, "--agent-user", agent.name)
		checkJQ(t, what, d.mustCall(t, nil, ws, "jq", "filter", jqInput, "the agent user may use the workspace"))
		checkGitStatus(t, what, d.mustCall(t, nil, ws, "git", "status", `{}`, "no dubious-ownership refusal for a workspace granted to the agent user"))
		if uid, ok, _ := d.ranAs(t, nil, ws, "the call runs as the agent user"); ok && uid != agent.uid {
			t.Errorf("%s: a root caller's call ran as uid %d, want the agent user's %d", what, uid, agent.uid)
		}
	})
}
