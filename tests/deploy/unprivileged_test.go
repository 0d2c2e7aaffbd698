package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// project makes a git repository owned by a (nil: root) at dir (data.json, notes.txt, one commit, then a
// modified and an untracked file), as its owner would.
func project(t *testing.T, a *account, dir string) {
	t.Helper()
	uid, gid := a.ids()
	mkdir(t, dir, 0o755, uid, gid)
	writeFile(t, filepath.Join(dir, "data.json"), sampleJSON, 0o644, uid, gid)
	writeFile(t, filepath.Join(dir, "notes.txt"), "first line\nTODO: ship the deploy tests\n", 0o644, uid, gid)
	git := func(args ...string) {
		run(t, a, dir, append([]string{"git", "-c", "user.name=T", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"}, args...)...)
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	writeFile(t, filepath.Join(dir, "notes.txt"), "first line\nTODO: ship the deploy tests\nchanged\n", 0o644, uid, gid)
	writeFile(t, filepath.Join(dir, "new.txt"), "new\n", 0o644, uid, gid)
}

// gitStatusWant is what git status prints for project's repository.
const gitStatusWant = "## main\n M notes.txt\n?? new.txt"

// checkGitStatus asserts e is git status of project's repository.
func checkGitStatus(t *testing.T, what string, e envelope) {
	t.Helper()
	if e.OK && strings.TrimSpace(e.text()) != gitStatusWant {
		t.Errorf("%s: git status printed %q, want %q", what, e.text(), gitStatusWant)
	}
}

// TestUnprivilegedDaemon runs clihostd as an ordinary user with its default flags (a developer's
// `clihostd` in their project: state and socket under their home, the built-in catalog), and calls
// jq, git status and rg in their repository through the socket: they run in the kernel sandbox
// (user namespace path), and status says what a real call finds.
func TestUnprivilegedDaemon(t *testing.T) {
	need(t)
	fixture.Need(t, "jq", "git", "rg")
	ws := filepath.Join(alice.home, "unpriv-project")
	project(t, alice, ws)
	// Her project's ./.cli holds her own bundle (the default sources: ./.cli plus the catalog).
	writeBundles(t, filepath.Join(ws, ".cli"), markBundle())
	writeFile(t, filepath.Join(ws, ".git/info/exclude"), ".cli/\nmark-*\n", 0o644, alice.uid, alice.gid)
	t.Cleanup(func() { os.RemoveAll(ws); os.RemoveAll(filepath.Join(alice.home, ".local")) })
	what := "a daemon run by " + alice.name + " (unprivileged, default flags)"
	d := startDaemon(t, daemonSpec{what: what, argv: asUser(alice, bin.daemon, "--http", "127.0.0.1:0"),
		env: append(userEnv(alice), "SHELL=/bin/sh"), dir: ws})
	if !strings.HasPrefix(d.socket, alice.home+"/") {
		t.Errorf("%s: the default socket %s is not under the user's home", what, d.socket)
	}

	jq := d.mustCall(t, alice, ws, "jq", "filter", jqInput, "the sandbox works for an unprivileged daemon")
	checkJQ(t, what, jq)
	d.expectZygoteServed(t)
	gs := d.mustCall(t, alice, ws, "git", "status", `{}`, "git status in the user's own repository")
	checkGitStatus(t, what, gs)
	rg := d.mustCall(t, alice, ws, "rg", "search", `{"pattern": "TODO"}`, "rg in the user's own repository")
	if rg.OK && (!strings.Contains(rg.text(), "notes.txt") || !strings.Contains(rg.text(), "TODO: ship")) {
		t.Errorf("%s: rg search printed %q, want the TODO line of notes.txt", what, rg.text())
	}
	if uid, ok, _ := d.ranAs(t, alice, ws, "her own bundle runs in her project"); ok && uid != alice.uid {
		t.Errorf("%s: a file the CLI created belongs to uid %d, want the daemon's user %d", what, uid, alice.uid)
	}
	// status as the daemon's own user must say what the calls found.
	expectSandboxTruthful(t, what, d.status(t, alice), jq.OK, jq)
	expectSocketRefused(t, what, bob, d.call(t, bob, bob.home, "jq", "filter", jqInput))
}

// TestUnprivilegedDaemonWithoutUserNamespaces runs the same daemon where it cannot build the
// sandbox: in a user namespace that allows no nested one (bwrap --disable-userns), as on hosts that
// turn unprivileged user namespaces off. Calls must be refused (never run unsandboxed), and status
// must say the sandbox is unavailable, not "on".
func TestUnprivilegedDaemonWithoutUserNamespaces(t *testing.T) {
	need(t)
	fixture.Need(t, "jq", "bwrap")
	ws := filepath.Join(alice.home, "nouserns-project")
	project(t, alice, ws)
	state := filepath.Join(alice.home, "nouserns-state")
	t.Cleanup(func() { os.RemoveAll(ws); os.RemoveAll(state) })
	what := "a daemon run by " + alice.name + " where user namespaces are disabled (bwrap --disable-userns)"
	d := startDaemon(t, daemonSpec{what: what, env: append(userEnv(alice), "SHELL=/bin/sh"), dir: ws,
		argv: asUser(alice, "bwrap", "--unshare-user", "--disable-userns", "--die-with-parent", "--dev-bind", "/", "/", "--",
			bin.daemon, "--state", state, "--http", "127.0.0.1:0")})
	jq := d.call(t, alice, ws, "jq", "filter", jqInput)
	expectSandboxRefused(t, what, jq)
	expectSandboxTruthful(t, what, d.status(t, alice), jq.OK, jq)
}
