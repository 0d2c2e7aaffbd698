package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// Attacks on clihostd through a workspace that holds what the daemon later reads, executes or
// trusts: its state directory (bin/, where Install puts the CLIs every later call runs, and homes/,
// the HOMEs it keeps for each uid, whose .bashrc, .gitconfig and .npmrc later calls read). A tool
// allowed to write ./** must never get to write them.

// writerBundle writes a bundle "wr" whose tool run runs `bash -c SCRIPT` in the sandbox with the
// workspace writable (fs.write ./**), and returns its folder (outside every workspace).
func writerBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "wr", "CLI.md"), `---
name: Writer
id: wr
description: Runs a bash script that writes its workspace; for the state-in-workspace attacks.
version: 1.0.0
bin: bash
install: [{ method: apt, package: bash }]
version_check: { cmd: "bash --version", parse: 'GNU bash, version (\d+\.\d+)', range: ">=4" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: ["./**"] }
  exec: { allow: true, spawn: [mkdir, mv, touch, cp, ls] }
  env: { pass: [] }
commands:
  run: ./tools/run/TOOL.md
---
`)
	writeFile(t, filepath.Join(dir, "wr", "tools", "run", "TOOL.md"), `---
name: Run
id: wr.run
description: Runs a bash script.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { script: { type: string } }, required: [script] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["-c", "${input.script}"] }
---
`)
	fixture.Reachable(t, dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asUser is the startDaemonWith hook that runs clihostd as u with HOME home, no bundles from the
// environment, and the extra variables env (KEY=VALUE).
func asUser(u fixture.TestUser, home string, env ...string) func(*exec.Cmd) {
	return func(c *exec.Cmd) {
		c.Env = append([]string{"PATH=" + systemPath, "HOME=" + home, "CLIHOST_BUNDLES="}, env...)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: groupsOf(u)}}
	}
}

// plantScript writes into the state directory at rel (relative to the workspace): a program in
// bin/ and a .bashrc in another uid's kept home, and, failing that (a root daemon's bin/ is not
// the agent's), moves the state directory aside and puts a folder of its own in its place.
func plantScript(rel string) string {
	return `s=` + rel + `; mkdir -p $s/bin $s/homes/4242; echo '#!/bin/sh' > $s/bin/planted; echo 'echo owned' > $s/homes/4242/.bashrc; ` +
		`if [ ! -e $s/bin/planted ]; then mv $s $s.aside && mkdir -p $s/bin && echo '#!/bin/sh' > $s/bin/planted; fi; ls -la $s/bin; true`
}

// refusedUntouched checks that a call was refused with workspace_denied naming the state directory,
// and that nothing was planted in state.
func refusedUntouched(t *testing.T, r result, state string) {
	t.Helper()
	if r.code == 0 || !strings.Contains(r.stdout, "workspace_denied") || !strings.Contains(r.stdout, "state") {
		t.Errorf("call in a workspace holding the state directory: exit %d, want workspace_denied naming the state directory\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, p := range []string{filepath.Join(state, "bin", "planted"), filepath.Join(state, "homes", "4242"), state + ".aside"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the tool wrote %s, in the daemon's state directory", p)
		}
	}
}

// TestStateDirInWorkspaceUserDaemon: an unprivileged clihostd whose state is in its user's home
// (~/.local/state/clihost), and its user calling with --workspace ~ (and the state directory
// itself, its bin/, and ~ through a symbolic link, and a folder made after the daemon started):
// each call is refused with workspace_denied, and nothing lands in bin/ or homes/.
func TestStateDirInWorkspaceUserDaemon(t *testing.T) {
	fixture.NeedRoot(t) // to run the daemon as a user of its own
	u := fixture.User(t, "clihost-t-stws")
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	state := filepath.Join(home, ".local", "state", "clihost")
	proj := filepath.Join(home, "proj")
	for _, d := range []string{state, proj} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(t.TempDir(), "home-link")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, filepath.Dir(link))
	chownTree(t, home, u.UID, u.GID)
	fixture.Reachable(t, filepath.Dir(home))
	u.Home = home
	d := startDaemonWith(t, state, proj, asUser(u, home), "--bundles", writerBundle(t), "--no-catalog")
	call := func(ws, rel string) result {
		return d.ctlAs(t, u, "call", "wr", "run", "--workspace", ws, "--input", `{"script": "`+plantScript(rel)+`"}`)
	}
	// Positive control: the project beside the state directory works.
	if r := call(proj, "x"); r.code != 0 {
		t.Fatalf("call in %s: exit %d\n%s%s", proj, r.code, r.stdout, r.stderr)
	}
	for name, tc := range map[string]struct{ ws, rel string }{
		"the home":                  {home, ".local/state/clihost"},
		"the home through a link":   {link, ".local/state/clihost"},
		"the state directory":       {state, "."},
		"inside the state (bin)":    {filepath.Join(state, "bin"), ".."},
		"a parent made after start": {filepath.Join(home, ".local"), "state/clihost"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.MkdirAll(tc.ws, 0o700); err == nil {
				_ = os.Chown(tc.ws, u.UID, u.GID)
			}
			refusedUntouched(t, call(tc.ws, tc.rel), state)
		})
	}
}

// TestStateDirInWorkspaceRootDaemon: a root clihostd whose state directory lies in a workspace a
// user owns: at start it is refused (its own --workspace), and a root caller naming that
// workspace (the call would run as the workspace's owner, who may move the root-owned state
// directory aside and put a bin/ of its own in its place) gets workspace_denied.
func TestStateDirInWorkspaceRootDaemon(t *testing.T) {
	fixture.NeedRoot(t)
	ws := fixture.Workspace(t)
	state := filepath.Join(ws, "state")
	bundles := writerBundle(t)

	// The daemon's own workspace holding its state: refused at start, with the reason.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.daemon, "--state", state, "--socket", filepath.Join(t.TempDir(), "s.sock"),
		"--http", "127.0.0.1:0", "--workspace", ws, "--bundles", bundles, "--no-catalog")
	cmd.Env = []string{"PATH=" + systemPath, "HOME=" + t.TempDir(), "CLIHOST_BUNDLES="}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil || err == nil || !strings.Contains(string(out), "workspace") || !strings.Contains(string(out), "state") {
		t.Errorf("clihostd with its state inside its --workspace: %v (ctx %v), want it refused at start naming both\n%s", err, ctx.Err(), out)
	}

	// A root caller naming a workspace that holds the state directory.
	d := startDaemonWith(t, state, fixture.Workspace(t), nil, "--bundles", bundles, "--no-catalog")
	refusedUntouched(t, d.ctl(t, "call", "wr", "run", "--workspace", ws, "--input", `{"script": "`+plantScript("state")+`"}`), state)
}

// TestBundleDirInWorkspaceRenamed: clihostd serving --bundles from a folder inside its workspace
// (cfg/bundles) keeps that folder read-only in the sandbox. A tool that moves the folder above it
// aside (cfg → cfg.aside, taking the read-only mount with it) and puts a cfg/bundles of its own in
// its place would choose the sandbox of every later call after the next reload. After the call, the
// bundle on disk must be the one the operator wrote.
func TestBundleDirInWorkspaceRenamed(t *testing.T) {
	ws := t.TempDir()
	bundles := filepath.Join(ws, "cfg", "bundles")
	src := writerBundle(t)
	if out, err := exec.Command("cp", "-r", filepath.Join(src, "wr"), filepath.Join(ws, "wr")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if err := os.MkdirAll(filepath.Dir(bundles), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(ws, "wr"), bundles); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(bundles, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(src, "wr"), bundles).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	fixture.GiveToAgent(t, ws)
	cli := filepath.Join(bundles, "wr", "CLI.md")
	before, err := os.ReadFile(cli)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, t.TempDir(), ws, nil, "--bundles", bundles, "--no-catalog")
	script := `mv cfg cfg.aside; mkdir -p cfg/bundles && cp -r cfg.aside/bundles/wr cfg/bundles/ && echo '# widened' >> cfg/bundles/wr/CLI.md; ` +
		`echo '# widened' >> cfg.aside/bundles/wr/CLI.md; ls -la cfg cfg.aside; true`
	r := d.ctl(t, "call", "wr", "run", "--workspace", ws, "--input", `{"script": "`+script+`"}`)
	t.Logf("call: %s", r.stdout)
	after, err := os.ReadFile(cli)
	if err != nil {
		t.Fatalf("after the call (%s): %v", r.stdout, err)
	}
	if string(after) != string(before) {
		t.Errorf("the tool replaced the bundle the daemon loads (%s):\n%s\ncall: %s", cli, after, r.stdout)
	}
}

// TestExecutableDirInWorkspaceUserDaemon: an unprivileged clihostd installed in its user's home
// (~/go/bin, as go install puts it), with its state elsewhere, and its user calling with
// --workspace ~: a tool could write ~/go/bin/clihost-sandbox, the helper every sandbox of the
// daemon's next run starts from, outside any sandbox. The call is refused with workspace_denied.
func TestExecutableDirInWorkspaceUserDaemon(t *testing.T) {
	fixture.NeedRoot(t)
	u := fixture.User(t, "clihost-t-stws")
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	gobin := filepath.Join(home, "go", "bin")
	if err := os.MkdirAll(gobin, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", bin.daemon, filepath.Join(gobin, "clihostd")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	chownTree(t, home, u.UID, u.GID)
	fixture.Reachable(t, filepath.Dir(home))
	state := t.TempDir()
	chownTree(t, state, u.UID, u.GID)
	ws := filepath.Join(home, "proj")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ws, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	u.Home = home
	d := startDaemonWith(t, state, ws, func(c *exec.Cmd) {
		asUser(u, home)(c)
		c.Path = filepath.Join(gobin, "clihostd")
	}, "--bundles", writerBundle(t), "--no-catalog")
	r := d.ctlAs(t, u, "call", "wr", "run", "--workspace", home, "--input", `{"script": "echo '#!/bin/sh' > go/bin/clihost-sandbox; true"}`)
	if r.code == 0 || !strings.Contains(r.stdout, "workspace_denied") {
		t.Errorf("call in a workspace holding clihostd's folder: exit %d, want workspace_denied\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(gobin, "clihost-sandbox")); err == nil {
		t.Errorf("the tool planted %s beside clihostd", filepath.Join(gobin, "clihost-sandbox"))
	}
}

// TestTrustedPathsInWorkspaceUserDaemon: an unprivileged clihostd with its state outside its
// user's home, whose approval policy is the default ~/.config/clihost/approvals.yaml: a call with
// --workspace ~/.config could write the policy (which the next reload trusts: whoever writes it
// approves every call). It is refused with workspace_denied, and the policy is never written.
func TestTrustedPathsInWorkspaceUserDaemon(t *testing.T) {
	fixture.NeedRoot(t)
	u := fixture.User(t, "clihost-t-stws")
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	conf := filepath.Join(home, ".config")
	ws := filepath.Join(home, "proj")
	for _, d := range []string{conf, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	chownTree(t, home, u.UID, u.GID)
	chownTree(t, state, u.UID, u.GID)
	fixture.Reachable(t, filepath.Dir(home))
	u.Home = home
	d := startDaemonWith(t, state, ws, asUser(u, home), "--bundles", writerBundle(t), "--no-catalog")
	policy := filepath.Join(conf, "clihost", "approvals.yaml")
	for _, tc := range []struct{ ws, script string }{
		{conf, "mkdir -p clihost && echo 'rules: []' > clihost/approvals.yaml; sleep 1; true"},
	} {
		r := d.ctlAs(t, u, "call", "wr", "run", "--workspace", tc.ws, "--input", `{"script": "`+tc.script+`"}`)
		if r.code == 0 || !strings.Contains(r.stdout, "workspace_denied") {
			t.Errorf("call with --workspace %s: exit %d, want workspace_denied\n%s%s", tc.ws, r.code, r.stdout, r.stderr)
		}
	}
	if _, err := os.Lstat(policy); err == nil {
		t.Errorf("the tool wrote the approval policy %s", policy)
	}
}

// TestPodmanConfigInWorkspaceUserDaemon: an unprivileged clihostd (approval policy elsewhere) and
// its user calling with --workspace ~/.config, or ~/.local/share: a tool could write
// ~/.config/containers/containers.conf (volumes and hooks for every container the daemon's
// engine: sandbox calls start, as the daemon's user) or change the image layers in
// ~/.local/share/containers/storage that later container calls run. Both are refused with
// workspace_denied and nothing is written.
func TestPodmanConfigInWorkspaceUserDaemon(t *testing.T) {
	fixture.NeedRoot(t)
	u := fixture.User(t, "clihost-t-stws")
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	conf, share, ws := filepath.Join(home, ".config"), filepath.Join(home, ".local", "share"), filepath.Join(home, "proj")
	for _, d := range []string{conf, share, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	chownTree(t, home, u.UID, u.GID)
	chownTree(t, state, u.UID, u.GID)
	fixture.Reachable(t, filepath.Dir(home))
	u.Home = home
	d := startDaemonWith(t, state, ws, asUser(u, home), "--bundles", writerBundle(t), "--no-catalog", "--approvals", filepath.Join(state, "..", "no-policy.yaml"))
	for _, tc := range []struct{ ws, rel string }{{conf, "containers/containers.conf"}, {share, "containers/storage/planted"}} {
		script := "mkdir -p " + filepath.Dir(tc.rel) + " && echo x > " + tc.rel + "; true"
		r := d.ctlAs(t, u, "call", "wr", "run", "--workspace", tc.ws, "--input", `{"script": "`+script+`"}`)
		if r.code == 0 || !strings.Contains(r.stdout, "workspace_denied") {
			t.Errorf("call with --workspace %s: exit %d, want workspace_denied\n%s%s", tc.ws, r.code, r.stdout, r.stderr)
		}
		if _, err := os.Lstat(filepath.Join(tc.ws, tc.rel)); err == nil {
			t.Errorf("the tool wrote %s", filepath.Join(tc.ws, tc.rel))
		}
	}
}

// TestStateDirBindMountedIntoWorkspace: an unprivileged clihostd whose state directory an operator
// also bind-mounted into a project folder (~/proj/state): its paths do not overlap, but a tool
// writing the project writes the state's bin/. The call is refused with workspace_denied (the
// mount table is read: the state directory's file system and folder under another mount point),
// as is a workspace inside the bound copy.
func TestStateDirBindMountedIntoWorkspace(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Need(t, "mount", "umount")
	u := fixture.User(t, "clihost-t-stws")
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	state, ws, proj := filepath.Join(home, "state"), filepath.Join(home, "ws"), filepath.Join(home, "proj")
	bound := filepath.Join(proj, "state")
	for _, d := range []string{filepath.Join(state, "bin"), ws, bound} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	chownTree(t, home, u.UID, u.GID)
	fixture.Reachable(t, filepath.Dir(home))
	if out, err := exec.Command("mount", "--bind", state, bound).CombinedOutput(); err != nil {
		t.Skipf("bind mount: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", bound).Run() })
	u.Home = home
	d := startDaemonWith(t, state, ws, asUser(u, home), "--bundles", writerBundle(t), "--no-catalog")
	for _, tc := range []struct{ ws, rel string }{{proj, "state"}, {filepath.Join(bound, "bin"), ".."}} {
		refusedUntouched(t, d.ctlAs(t, u, "call", "wr", "run", "--workspace", tc.ws, "--input", `{"script": "`+plantScript(tc.rel)+`"}`), state)
	}
}

// TestTempDirInWorkspaceUserDaemon: an unprivileged clihostd whose temporary folder ($TMPDIR) is
// where it writes the env files (secrets included) of container calls and the folders of version
// checks, as its own user; a call with --workspace $TMPDIR would let a tool read or change them
// while another call runs. It is refused with workspace_denied.
func TestTempDirInWorkspaceUserDaemon(t *testing.T) {
	fixture.NeedRoot(t)
	u := fixture.User(t, "clihost-t-stws")
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	tmp, ws := filepath.Join(home, "tmp"), filepath.Join(home, "proj")
	for _, d := range []string{tmp, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	chownTree(t, home, u.UID, u.GID)
	chownTree(t, state, u.UID, u.GID)
	fixture.Reachable(t, filepath.Dir(home))
	u.Home = home
	d := startDaemonWith(t, state, ws, asUser(u, home, "TMPDIR="+tmp), "--bundles", writerBundle(t), "--no-catalog")
	r := d.ctlAs(t, u, "call", "wr", "run", "--workspace", tmp, "--input", `{"script": "ls -la; true"}`)
	if r.code == 0 || !strings.Contains(r.stdout, "workspace_denied") {
		t.Errorf("call with --workspace %s ($TMPDIR): exit %d, want workspace_denied\n%s%s", tmp, r.code, r.stdout, r.stderr)
	}
}

// TestStateDirBindMountRenamedIntoWorkspace: as TestStateDirBindMountedIntoWorkspace, then the
// daemon's user, refused for ~/proj, renames it (~/proj → ~/proj2, the bind mount of the state
// directory going with it: the mount table shows it at its new place, with no mount event) and
// calls at once with ~/proj2. That call is refused too and nothing lands in the state directory
// (a mount table kept by the daemon until a mount event let it write the state's bin/).
func TestStateDirBindMountRenamedIntoWorkspace(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Need(t, "mount", "umount", "mv")
	u := fixture.User(t, "clihost-t-stws")
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	state, ws, proj, renamed := filepath.Join(home, "state"), filepath.Join(home, "ws"), filepath.Join(home, "proj"), filepath.Join(home, "proj2")
	for _, d := range []string{filepath.Join(state, "bin"), ws, filepath.Join(proj, "state")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	chownTree(t, home, u.UID, u.GID)
	fixture.Reachable(t, filepath.Dir(home))
	if out, err := exec.Command("mount", "--bind", state, filepath.Join(proj, "state")).CombinedOutput(); err != nil {
		t.Skipf("bind mount: %v %s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("umount", "-l", filepath.Join(proj, "state")).Run()
		_ = exec.Command("umount", "-l", filepath.Join(renamed, "state")).Run()
	})
	u.Home = home
	d := startDaemonWith(t, state, ws, asUser(u, home), "--bundles", writerBundle(t), "--no-catalog")
	call := func(ws string) result {
		return d.ctlAs(t, u, "call", "wr", "run", "--workspace", ws, "--input", `{"script": "`+plantScript("state")+`"}`)
	}
	refusedUntouched(t, call(proj), state)
	mv := exec.Command("mv", proj, renamed)
	mv.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}}
	if out, err := mv.CombinedOutput(); err != nil {
		t.Fatalf("the user renames the project: %v %s", err, out)
	}
	refusedUntouched(t, call(renamed), state)
}
