package escape

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// The git bundles: "git" writes files only (the probe's copy-tree case copies a payload prepared
// under OUTSIDE/payload into the workspace, as any tool with fs.write on it could write them);
// "gitexec" runs the real git (and git's own helpers, which live in git-core) for the positive
// controls.
func init() {
	sandboxes["git"] = `
  network: { egress: [] }
  fs: { read: ["./**", "OUTSIDE/payload/**"], write: ["./**"] }
  exec: { allow: false }
  env: { pass: [] }`
	sandboxes["gitexec"] = `
  network: { egress: [] }
  fs: { read: ["./**", "OUTSIDE/payload/**"], write: ["./**"] }
  exec: { allow: true, spawn: ["git", "/usr/lib/git-core/git"] }
  env: { pass: [], set: { GIT_CONFIG_NOSYSTEM: "1" } }`
}

// gitVector is one way a call's writes could make the owner's next git command run a program.
type gitVector struct {
	name string
	// repo: the workspace is a git repository with one commit (else an empty directory).
	repo bool
	// files are what the call writes, relative to the workspace: a name ending in "/" is a
	// directory; a file under a hooks/ directory is executable. MARK in a content is replaced by
	// the marker command (touch MARKER; :), WS by the workspace.
	files map[string]string
	// prepare, when set, adds to the payload dir or the workspace before the call (ws is the
	// workspace).
	prepare func(t *testing.T, ws, payload string)
	// after, when set, checks the workspace once the owner's git commands ran.
	after func(t *testing.T, ws string)
	// owner are the git commands the workspace owner runs afterwards: a directory relative to
	// the workspace, then git's arguments.
	owner [][]string
}

// skeleton returns the files of a minimal git directory at dir, with config.
func skeleton(dir, config string) map[string]string {
	return map[string]string{
		dir + "/HEAD":     "ref: refs/heads/main\n",
		dir + "/objects/": "",
		dir + "/refs/":    "",
		dir + "/config":   config,
	}
}

// merge returns the union of file maps.
func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

const fsmonitorConfig = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"MARK\"\n"

// gitVectors are the vectors of issue 10 §1, each a complete attack on today's sweep.
var gitVectors = []gitVector{
	{name: "commondir", repo: true,
		files: merge(map[string]string{".git/commondir": "../.evil\n"}, skeleton(".evil", fsmonitorConfig)),
		owner: [][]string{{".", "status"}}},
	{name: "commondir-outside-root", repo: true,
		files: map[string]string{".git/commondir": "OUTSIDECOMMON\n"},
		owner: [][]string{{".", "status"}}},
	{name: "gitfile-top-level", repo: false,
		files: merge(map[string]string{".git": "gitdir: .evil\n"}, skeleton(".evil", fsmonitorConfig)),
		owner: [][]string{{".", "status"}}},
	{name: "gitfile-nested", repo: true,
		files: merge(map[string]string{"sub/.git": "gitdir: ../.evilsub\n", "sub/f.txt": "x\n"}, skeleton(".evilsub", fsmonitorConfig)),
		owner: [][]string{{"sub", "status"}}},
	{name: "gitfile-symlink", repo: false,
		files: merge(map[string]string{".git": "->.evil"}, skeleton(".evil", fsmonitorConfig)),
		owner: [][]string{{".", "status"}}},
	{name: "bare-skeleton-sshcommand", repo: true,
		files: skeleton("vendor/mirror.git", "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tsshCommand = \"MARK\"\n"+
			"[remote \"origin\"]\n\turl = ssh://git.invalid/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"),
		owner: [][]string{{"vendor/mirror.git", "fetch", "origin"}}},
	{name: "worktree-config-worktree", repo: true,
		files: merge(map[string]string{
			".git/worktrees/wt/HEAD":            "ref: refs/heads/main\n",
			".git/worktrees/wt/commondir":       "../../../.evilc\n",
			".git/worktrees/wt/gitdir":          "WS/wt/.git\n",
			".git/worktrees/wt/config.worktree": "[core]\n\tfsmonitor = \"MARK\"\n",
			"wt/.git":                           "gitdir: ../.git/worktrees/wt\n",
		}, skeleton(".evilc", "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n")),
		owner: [][]string{{"wt", "status"}}},
	{name: "config-worktree-extension", repo: true,
		files: merge(skeleton("inner/.git", "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n"),
			map[string]string{"inner/.git/config.worktree": "[core]\n\tfsmonitor = \"MARK\"\n"}),
		owner: [][]string{{"inner", "status"}}},
	{name: "include", repo: true,
		files: merge(skeleton("inc/.git", "[core]\n\trepositoryformatversion = 0\n[include]\n\tpath = ../../evil.inc\n[includeIf \"gitdir:/\"]\n\tpath = ../../evil.inc\n"),
			map[string]string{"evil.inc": "[core]\n\tfsmonitor = \"MARK\"\n"}),
		owner: [][]string{{"inc", "status"}}},
	{name: "hooks-new-repo", repo: true,
		files: merge(skeleton("newrepo/.git", "[core]\n\trepositoryformatversion = 0\n"),
			map[string]string{"newrepo/.git/hooks/pre-commit": "#!/bin/sh\nMARK\n"}),
		owner: [][]string{{"newrepo", "-c", "user.name=owner", "-c", "user.email=owner@example.com", "commit", "--allow-empty", "-m", "x"}}},
	{name: "hookspath", repo: true,
		files: merge(skeleton("hp/.git", "[core]\n\trepositoryformatversion = 0\n\thooksPath = ../myhooks\n"),
			map[string]string{"hp/myhooks/pre-commit": "#!/bin/sh\nMARK\n"}),
		owner: [][]string{{"hp", "-c", "user.name=owner", "-c", "user.email=owner@example.com", "commit", "--allow-empty", "-m", "x"}}},
	{name: "attributes-filter-driver", repo: true,
		files: merge(skeleton("attr/.git", "[core]\n\trepositoryformatversion = 0\n[filter \"evil\"]\n\tclean = \"MARK cat\"\n"),
			map[string]string{"attr/.git/info/attributes": "* filter=evil\n", "attr/file.txt": "x\n"}),
		owner: [][]string{{"attr", "add", "file.txt"}}},
	{name: "gitmodules-submodule", repo: true,
		files: merge(map[string]string{
			".gitmodules": "[submodule \"sub\"]\n\tpath = sub\n\turl = ./sub\n\tupdate = !MARK\n",
			"sub/.git":    "gitdir: ../.git/modules/sub\n",
		}, skeleton(".git/modules/sub", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ../../../sub\n\tfsmonitor = \"MARK\"\n")),
		prepare: gitlinkIndex,
		owner:   [][]string{{".", "status"}, {"sub", "status"}, {".", "submodule", "update"}}},
	// The owner's config includes files next to it (include.path and includeIf, relative to the
	// including file): the call never touches the masked .git/config, it writes the included files.
	{name: "included-by-the-owners-config", repo: true,
		files: map[string]string{
			"shared.gitconfig": sharedGitconfig + "[core]\n\tfsmonitor = \"MARK\"\n",
			"cond.gitconfig":   "[core]\n\tfsmonitor = \"MARK\"\n",
		},
		prepare: ownerIncludes,
		owner:   [][]string{{".", "status"}},
		after: func(t *testing.T, ws string) {
			if got := readFile(t, filepath.Join(ws, "shared.gitconfig")); got != sharedGitconfig {
				t.Errorf("shared.gitconfig is now %q, want what it held before the call, %q", got, sharedGitconfig)
			}
		}},
}

// sharedGitconfig is a file the owner's .git/config includes, as it was before the call.
const sharedGitconfig = "[user]\n\tname = owner\n[alias]\n\tst = status\n"

// ownerIncludes makes the workspace's own .git/config include ../shared.gitconfig (which exists,
// with sharedGitconfig) and, under a condition that holds, ../cond.gitconfig (which does not).
func ownerIncludes(t *testing.T, ws, _ string) {
	t.Helper()
	config := filepath.Join(ws, ".git", "config")
	f, err := os.OpenFile(config, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString("[include]\n\tpath = ../shared.gitconfig\n[includeIf \"gitdir:" + ws + "/\"]\n\tpath = ../cond.gitconfig\n")
	must(t, errors.Join(err, f.Close()))
	must(t, os.WriteFile(filepath.Join(ws, "shared.gitconfig"), []byte(sharedGitconfig), 0o644))
	fixture.GiveToAgent(t, ws)
}

// TestGitMetadata covers issue 10 §1: a call with fs.write on the workspace writes git metadata
// (never the masked .git/config or .git/hooks) that would make the owner's next git command run a
// program of the call's choosing. For each vector the call runs through the real host and
// sandbox, then the workspace's owner runs the real git there; the marker program must not have
// run, and the call's result must say what was neutralised. Positive controls: git run inside
// the sandbox (init, commit, clone of a local repository) still works, and its config survives.
func TestGitMetadata(t *testing.T) {
	s := newSuite(t)
	fixture.Need(t, "git")
	payloads := filepath.Join(outside, "payload")
	must(t, os.MkdirAll(payloads, 0o755))
	outsideCommon := filepath.Join(payloads, "outside-common")
	writeTree(t, outsideCommon, skeleton(".", fsmonitorConfig))
	for _, v := range gitVectors {
		t.Run(v.name, func(t *testing.T) {
			ws := gitWorkspace(t, v.repo)
			marker := filepath.Join(markerDir(t), "ran")
			mark := "touch " + marker + "; :"
			payload := filepath.Join(payloads, strings.ReplaceAll(v.name, "/", "-"))
			files := map[string]string{}
			for p, c := range v.files {
				c = strings.ReplaceAll(c, "MARK", mark)
				c = strings.ReplaceAll(c, "WS", ws)
				files[p] = strings.ReplaceAll(c, "OUTSIDECOMMON", filepath.Join(outsideCommon, "."))
			}
			writeTree(t, payload, files)
			if v.prepare != nil {
				v.prepare(t, ws, payload)
			}
			env, r := callEnv(t, s.h, "git", ws, "copy-tree", payload, ws)
			allowed("").check(t, r)
			t.Logf("warnings: %q", env.Warnings)
			for _, cmd := range v.owner {
				out := ownerGit(t, filepath.Join(ws, cmd[0]), cmd[1:]...)
				t.Logf("owner: git %q in %s: %s", cmd[1:], cmd[0], out)
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("the owner's `git %s` ran the program the call chose", strings.Join(cmd[1:], " "))
				}
			}
			if !anyContains(env.Warnings, "clihost-quarantined") {
				t.Errorf("no warning names what was neutralised: %q", env.Warnings)
			}
			if v.after != nil {
				v.after(t, ws)
			}
		})
	}
	t.Run("control/git-init-commit", func(t *testing.T) {
		ws := gitWorkspace(t, false)
		env, r := callEnv(t, s.h, "gitexec", ws, "git-init", ws)
		allowed("").check(t, r)
		if len(env.Warnings) > 0 {
			t.Errorf("warnings %q", env.Warnings)
		}
		if out := ownerGit(t, ws, "log", "--format=%s"); !strings.Contains(out, "made in the sandbox") {
			t.Errorf("the owner's git log: %s", out)
		}
		config := readFile(t, filepath.Join(ws, ".git", "config"))
		for _, key := range []string{"repositoryformatversion = 0", "filemode = true", "bare = false", "logallrefupdates = true"} {
			if !strings.Contains(config, key) {
				t.Errorf(".git/config lost %q:\n%s", key, config)
			}
		}
	})
	t.Run("control/git-clone", func(t *testing.T) {
		// A git bundle file: cloning a repository directory would run git-upload-pack through
		// /bin/sh, which the bundle does not list.
		repo := filepath.Join(t.TempDir(), "clone-source")
		gitRepo(t, repo)
		src := filepath.Join(payloads, "clone-source.bundle")
		if out, err := exec.Command("git", "-C", repo, "bundle", "create", src, "--all").CombinedOutput(); err != nil {
			t.Fatalf("git bundle: %v\n%s", err, out)
		}
		must(t, os.Chmod(src, 0o644))
		ws := gitWorkspace(t, false)
		env, r := callEnv(t, s.h, "gitexec", ws, "git-clone", src, filepath.Join(ws, "clone"))
		allowed("").check(t, r)
		if len(env.Warnings) > 0 {
			t.Errorf("warnings %q", env.Warnings)
		}
		config := readFile(t, filepath.Join(ws, "clone", ".git", "config"))
		for _, key := range []string{"url = " + src, "fetch = +refs/heads/*:refs/remotes/origin/*", "[branch \"main\"]", "remote = origin", "merge = refs/heads/main"} {
			if !strings.Contains(config, key) {
				t.Errorf("the clone's config lost %q:\n%s", key, config)
			}
		}
		if out := ownerGit(t, filepath.Join(ws, "clone"), "log", "--format=%s"); !strings.Contains(out, "initial") {
			t.Errorf("the owner's git log in the clone: %s", out)
		}
	})
}

// anyContains reports whether one of list contains sub.
func anyContains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// callEnv runs the probe's case in bundle id's sandbox with workspace ws and returns the envelope
// (for its warnings) and the probe's report.
func callEnv(t *testing.T, h *host.Host, id, ws, probeCase string, args ...string) (host.Envelope, report) {
	t.Helper()
	env := callProbe(t, h, id, ws, probeCase, args...)
	r := reportOf(t, id, probeCase, args, env)
	t.Logf("%s %s → %s %s %s: %s", id, probeCase, r.Result, r.Step, r.Errno, r.Detail)
	return env, r
}

// gitWorkspace returns a workspace outside /tmp owned by the agent (the user tools run as, and
// the owner who runs git afterwards): a repository with one commit when repo is set.
func gitWorkspace(t *testing.T, repo bool) string {
	t.Helper()
	ws, err := os.MkdirTemp("/var/tmp", "clihost-git-ws-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(ws) })
	must(t, os.Chmod(ws, 0o755))
	if repo {
		gitRepo(t, ws)
	}
	fixture.GiveToAgent(t, ws)
	return ws
}

// gitRepo makes dir a repository on branch main with one commit ("initial"), as root.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644))
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "README"},
		{"-c", "user.name=owner", "-c", "user.email=owner@example.com", "commit", "-q", "-m", "initial"},
	} {
		cmd := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
}

// gitlinkIndex puts in the payload an index that records sub as a submodule (a gitlink), so
// that the owner's git status in the workspace looks into it.
func gitlinkIndex(t *testing.T, ws, payload string) {
	t.Helper()
	scratch := filepath.Join(t.TempDir(), "scratch")
	if out, err := exec.Command("cp", "-a", ws, scratch).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
		cmd.Dir = scratch
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	head := git("rev-parse", "HEAD")
	git("update-index", "--add", "--cacheinfo", "160000,"+head+",sub")
	data, err := os.ReadFile(filepath.Join(scratch, ".git", "index"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(payload, ".git", "index"), data, 0o644))
}

// markerDir returns a directory the owner (the agent uid) may create the marker in.
func markerDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "clihost-git-marker-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o777))
	return dir
}

// writeTree writes files (see gitVector.files; a content starting with "->" is a symbolic link
// to the rest; hooks and *.sh are executable) under dir, world-readable.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	must(t, os.MkdirAll(dir, 0o755))
	for _, p := range names {
		full := filepath.Join(dir, p)
		if strings.HasSuffix(p, "/") {
			must(t, os.MkdirAll(full, 0o755))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		c := files[p]
		if target, ok := strings.CutPrefix(c, "->"); ok {
			must(t, os.Symlink(target, full))
			continue
		}
		mode := os.FileMode(0o644)
		if strings.Contains(p, "hooks/") || strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		must(t, os.WriteFile(full, []byte(c), mode))
		must(t, os.Chmod(full, mode))
	}
}

// readFile returns the content of p on the host.
func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// ownerGit runs the real git as the workspace's owner (the agent uid) in dir, with a home of its
// own and no system config, and returns its output. Its exit status does not matter: what it ran
// does.
func ownerGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	home := markerDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: fixture.AgentID, Gid: fixture.AgentID}}
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

// TestRunConfigs covers the other tools of issue 10 §1 that run what a file in the directory
// names: a call writes npm's script-shell (and the owner's next `npm run` of a harmless script
// runs the real npm: the marker must not appear), and the configurations of yarn, rustup, cargo,
// mise, pre-commit and Mercurial that name programs, which the host must move aside. Controls: a
// harmless .npmrc, .yarnrc.yml and rust-toolchain.toml, and an .envrc (direnv asks again for
// changed content), stay.
func TestRunConfigs(t *testing.T) {
	s := newSuite(t)
	fixture.Need(t, "npm")
	payloads := filepath.Join(outside, "payload")
	must(t, os.MkdirAll(payloads, 0o755))
	ws := gitWorkspace(t, true)
	write(t, ws, map[string]string{"package.json": `{"name": "p", "version": "1.0.0", "scripts": {"ok": "true"}}`})
	fixture.GiveToAgent(t, ws)
	marker := filepath.Join(markerDir(t), "ran")
	payload := filepath.Join(payloads, "run-configs")
	writeTree(t, payload, map[string]string{
		".npmrc":                      "script-shell=" + filepath.Join(ws, "evil.sh") + "\n",
		"evil.sh":                     "#!/bin/sh\ntouch " + marker + "\n",
		".yarnrc.yml":                 "yarnPath: ./evil.sh\n",
		"rust-toolchain.toml":         "[toolchain]\npath = \"./tc\"\n",
		".cargo/config.toml":          "[target.x86_64-unknown-linux-gnu]\nrunner = \"./evil.sh\"\n",
		"mise.toml":                   "[hooks]\nenter = \"./evil.sh\"\n",
		"pkg/.pre-commit-config.yaml": "repos: [{repo: local, hooks: [{id: x, name: x, entry: ./evil.sh, language: system}]}]\n",
		".hg/hgrc":                    "[hooks]\npre-status = ./evil.sh\n",
		"ok/.npmrc":                   "registry=https://registry.npmjs.org/\n",
		"ok/.yarnrc.yml":              "nodeLinker: node-modules\n",
		"ok/rust-toolchain.toml":      "[toolchain]\nchannel = \"stable\"\n",
		".envrc":                      "./evil.sh\n",
	})
	env, r := callEnv(t, s.h, "git", ws, "copy-tree", payload, ws)
	allowed("").check(t, r)
	t.Logf("warnings: %q", env.Warnings)
	home := markerDir(t)
	cmd := exec.Command("npm", "run", "ok")
	cmd.Dir = ws
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "NO_UPDATE_NOTIFIER=1", "npm_config_update_notifier=false", "npm_config_offline=true"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: fixture.AgentID, Gid: fixture.AgentID}}
	out, err := cmd.CombinedOutput()
	t.Logf("owner: npm run ok: %v\n%s", err, out)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the owner's `npm run ok` ran the shell the call chose")
	}
	for _, rel := range []string{".npmrc", ".yarnrc.yml", "rust-toolchain.toml", ".cargo/config.toml", "mise.toml", "pkg/.pre-commit-config.yaml", ".hg/hgrc"} {
		if _, err := os.Lstat(filepath.Join(ws, rel)); err == nil {
			t.Errorf("%s is still in place", rel)
		}
		if _, err := os.Lstat(filepath.Join(ws, rel+".clihost-quarantined")); err != nil {
			t.Errorf("%s was not quarantined: %v", rel, err)
		}
		if !anyContains(env.Warnings, filepath.Join(ws, rel)) {
			t.Errorf("no warning names %s", rel)
		}
	}
	for _, rel := range []string{"ok/.npmrc", "ok/.yarnrc.yml", "ok/rust-toolchain.toml", ".envrc"} {
		if _, err := os.Lstat(filepath.Join(ws, rel)); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
}

// TestGitMetadataLifecycle: the bundle's own commands run outside a call (setup steps, login
// checks, background refreshes) get the git rule too, through host.LifecycleEnv's guard: a
// lifecycle command that writes a commondir to a skeleton with core.fsmonitor leaves nothing the
// owner's git status would run.
func TestGitMetadataLifecycle(t *testing.T) {
	s := newSuite(t)
	fixture.Need(t, "git")
	payloads := filepath.Join(outside, "payload")
	must(t, os.MkdirAll(payloads, 0o755))
	ws := gitWorkspace(t, true)
	marker := filepath.Join(markerDir(t), "ran")
	payload := filepath.Join(payloads, "lifecycle")
	files := merge(map[string]string{".git/commondir": "../.evil\n"}, skeleton(".evil", fsmonitorConfig))
	for p, c := range files {
		files[p] = strings.ReplaceAll(c, "MARK", "touch "+marker+"; :")
	}
	writeTree(t, payload, files)
	b, err := s.h.Bundle("git")
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env, herr := s.h.LifecycleEnv(ctx, b, host.Caller{Workspace: ws})
	if herr != nil {
		t.Fatalf("LifecycleEnv: %+v", herr)
	}
	c, err := env.Command("probe", []string{"probe", "copy-tree", payload, ws}, 30*time.Second)
	must(t, err)
	res, err := env.Run(ctx, c)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the lifecycle command: %v %+v", err, res)
	}
	t.Logf("lifecycle command: %s", res.Stdout)
	out := ownerGit(t, ws, "status")
	t.Logf("owner: git status: %s", out)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the owner's git status ran the program a lifecycle command chose")
	}
	if _, err := os.Stat(filepath.Join(ws, ".evil", "config.clihost-quarantined")); err != nil {
		t.Errorf("the skeleton's config was not rewritten: %v", err)
	}
}

// TestGitRuleFloodIsBounded: a call that plants 200 repository skeletons, each with a hook, gets
// every one of them neutralised, but its result carries at most 32 warnings and a count of the
// rest, and the audit log as many cli.sweep lines, each with the call's call_id (issue 10 §6: nothing
// a call does may flood clihost's own files).
func TestGitRuleFloodIsBounded(t *testing.T) {
	requireCorpus(t)
	const repos = 200
	reg := fixture.Registry(t, probeFiles("git", strings.ReplaceAll(sandboxes["git"], "OUTSIDE", outside)))
	var audit fixture.Buffer
	h := host.New(reg, host.Options{Audit: &audit, LookupEnv: func(k string) (string, bool) {
		if k == "PATH" {
			return probeDir + ":/usr/bin:/bin", true
		}
		return "", false
	}})
	payload := filepath.Join(outside, "payload", "flood")
	files := map[string]string{}
	for i := range repos {
		dir := filepath.Join("r"+strconv.Itoa(i), ".git")
		for p, c := range skeleton(dir, "[core]\n\trepositoryformatversion = 0\n") {
			files[p] = c
		}
		files[dir+"/hooks/pre-commit"] = "#!/bin/sh\nexit 0\n"
	}
	writeTree(t, payload, files)
	ws := gitWorkspace(t, false)
	env, r := callEnv(t, h, "git", ws, "copy-tree", payload, ws)
	allowed("").check(t, r)
	if len(env.Warnings) != 33 || !strings.Contains(env.Warnings[32], "and 168 more") {
		t.Errorf("%d warnings, want 32 and a count of the other 168: last %q", len(env.Warnings), env.Warnings[len(env.Warnings)-1])
	}
	for i := range repos {
		if _, err := os.Stat(filepath.Join(ws, "r"+strconv.Itoa(i), ".git", "hooks", "pre-commit")); err == nil {
			t.Fatalf("repository %d kept its hook", i)
		}
	}
	var callID string
	sweeps := 0
	for line := range strings.Lines(audit.String()) {
		var rec struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		switch rec.Type {
		case "cli.invoked":
			callID = rec.CallID
		case "cli.sweep":
			sweeps++
			if rec.CallID == "" {
				t.Errorf("a cli.sweep line without the call's call_id: %s", line)
			}
		}
	}
	if sweeps != 33 || callID == "" {
		t.Errorf("%d cli.sweep lines (want 33) for call %q", sweeps, callID)
	}
}
