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
	"github.com/clihost/clihost/manifest"
)

// catalogBundle returns the catalog's bundle id.
func catalogBundle(t *testing.T, id string) *manifest.Bundle {
	t.Helper()
	for _, b := range catalog(t) {
		if b.ID() == id {
			return b
		}
	}
	t.Fatalf("the catalog has no %s bundle", id)
	return nil
}

// toolIDs are the tool ids of a bundle, sorted.
func toolIDs(b *manifest.Bundle) []string {
	var ids []string
	for _, e := range b.Tools {
		ids = append(ids, e.Tool.ID)
	}
	slices.Sort(ids)
	return ids
}

// catGitRepo is a fixture repository owned by a test user whose ~/.gitconfig names an author.
type catGitRepo struct {
	ws, policy string
}

// catRootGit runs git as the test (root) in dir, with no configuration but the arguments'.
func catRootGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Fixture", "-c", "user.email=fixture@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null", "GIT_AUTHOR_DATE=2024-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2024-01-02T03:04:05Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// newCatGitRepo makes a repository with two commits, an annotated and a lightweight tag, then hands
// it and the user's home to the user. files are written before the first commit.
func newCatGitRepo(t *testing.T, user string, files map[string]string) catGitRepo {
	t.Helper()
	fixture.NeedRoot(t)
	fixture.Need(t, "git")
	u := fixture.User(t, user)
	gitconfig := filepath.Join(u.Home, ".gitconfig")
	must(t, os.WriteFile(gitconfig, []byte("[user]\n\tname = Agent\n\temail = agent@example.com\n"), 0o644))
	t.Cleanup(func() { os.Remove(gitconfig) })
	ws := t.TempDir()
	catRootGit(t, ws, "init", "-q")
	must(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\nworld\n"), 0o644))
	for name, content := range files {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644))
	}
	catRootGit(t, ws, "add", "-A")
	catRootGit(t, ws, "commit", "-q", "-m", "first")
	catRootGit(t, ws, "tag", "-a", "-m", "release one", "v1.0.0")
	must(t, os.WriteFile(filepath.Join(ws, "b.txt"), []byte("second file\n"), 0o644))
	catRootGit(t, ws, "add", "b.txt")
	catRootGit(t, ws, "commit", "-q", "-m", "second")
	catRootGit(t, ws, "tag", "v1.1.0")
	fixture.Reachable(t, filepath.Dir(ws))
	chownTree(t, ws, u.UID, u.GID)
	chownTree(t, u.Home, u.UID, u.GID)
	return catGitRepo{ws: ws, policy: allowPolicy(t, "git")}
}

// call runs one tool of the catalog's git bundle in the repository through clihostctl.
func (r catGitRepo) call(t *testing.T, tool, input string) envelope {
	t.Helper()
	res := runBin(t, bin.ctl, "", "call", "git", tool, "--workspace", r.ws, "--audit", os.DevNull, "--approvals", r.policy, "--input", input)
	return decodeEnvelope(t, res)
}

// ok runs a tool that must succeed and returns its text value.
func (r catGitRepo) ok(t *testing.T, tool, input string) string {
	t.Helper()
	e := r.call(t, tool, input)
	if !e.OK {
		t.Fatalf("git %s %s failed: %+v", tool, input, e.Error)
	}
	s, isText := e.Value.(string)
	if e.Value != nil && !isText {
		t.Fatalf("git %s %s: value %T, the outputs schema says string", tool, input, e.Value)
	}
	return strings.TrimRight(s, "\n")
}

// write writes a workspace file as the repository's owner would.
func (r catGitRepo) write(t *testing.T, name, content string) {
	t.Helper()
	p := filepath.Join(r.ws, name)
	must(t, os.WriteFile(p, []byte(content), 0o644))
	st, err := os.Stat(r.ws)
	must(t, err)
	uid, gid := ownerOf(st)
	must(t, os.Lchown(p, uid, gid))
}

func (r catGitRepo) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.ws, name))
	must(t, err)
	return string(b)
}

func catMatch(t *testing.T, what, got, re string) {
	t.Helper()
	if !regexp.MustCompile(re).MatchString(got) {
		t.Fatalf("%s: %q does not match %s", what, got, re)
	}
}

// TestCatalogGitBundleSize: issue 16 asks for at least 15 git tools and names the ones agents use.
func TestCatalogGitBundleSize(t *testing.T) {
	b := catalogBundle(t, "git")
	ids := toolIDs(b)
	if len(ids) < 15 {
		t.Fatalf("git has %d tools, want at least 15: %v", len(ids), ids)
	}
	for _, want := range []string{"git.status", "git.diff", "git.log", "git.show", "git.blame", "git.branch", "git.add", "git.commit",
		"git.switch", "git.restore", "git.stash.list", "git.stash.push", "git.stash.pop", "git.tag", "git.rev-parse", "git.ls-files", "git.grep"} {
		if !slices.Contains(ids, want) {
			t.Errorf("git has no %s", want)
		}
	}
}

// TestCatalogGitToolsRoundTrip calls every tool of the git bundle with the real Debian git in the
// real sandbox, in a fixture repository, and checks what each returns.
func TestCatalogGitToolsRoundTrip(t *testing.T) {
	r := newCatGitRepo(t, "clihost-t-catgit", nil)
	called := map[string]bool{}
	ok := func(tool, input string) string {
		t.Helper()
		called["git."+tool] = true
		return r.ok(t, tool, input)
	}

	catMatch(t, "status", ok("status", `{}`), `^## main$`)
	log := ok("log", `{"max_count": 5}`)
	catMatch(t, "log", log, `^[0-9a-f]{40}\tFixture <fixture@example.com>\t2024-01-02T03:04:05\+00:00\tsecond\n[0-9a-f]{40}\tFixture <fixture@example.com>\t2024-01-02T03:04:05\+00:00\tfirst$`)
	catMatch(t, "show", ok("show", `{"revision": "HEAD", "stat": true}`), `(?s)second.*b.txt \| 1 \+`)
	catMatch(t, "show REV:path", ok("show", `{"revision": "HEAD~1:a.txt"}`), `^hello\nworld$`)
	catMatch(t, "blame", ok("blame", `{"file": "a.txt", "lines": "2,2"}`), `^\^?[0-9a-f]+ \(Fixture\s+2024-01-02\s+2\) world$`)
	catMatch(t, "blame porcelain", ok("blame", `{"file": "a.txt", "porcelain": true}`), `(?m)^author Fixture$`)
	catMatch(t, "branch", ok("branch", `{}`), `^\*\tmain\t[0-9a-f]+\t\t$`)
	tags := ok("tag", `{}`)
	catMatch(t, "tag", tags, `(?m)^v1\.1\.0\t[0-9a-f]{7,}\t2024-01-02T03:04:05\+00:00\tsecond$`)
	catMatch(t, "annotated tag", tags, `(?m)^v1\.0\.0\t[0-9a-f]{7,}\t2024-01-02T03:04:05\+00:00\trelease one$`)
	catMatch(t, "tag contains", ok("tag", `{"contains": "HEAD", "pattern": "v1.*"}`), `^v1\.1\.0\t`)
	head := ok("rev-parse", `{}`)
	catMatch(t, "rev-parse", head, `^[0-9a-f]{40}$`)
	catMatch(t, "rev-parse abbrev_ref", ok("rev-parse", `{"abbrev_ref": true}`), `^main$`)
	catMatch(t, "ls-files", ok("ls-files", `{}`), `^a\.txt\nb\.txt$`)
	catMatch(t, "grep", ok("grep", `{"pattern": "wor.d"}`), `^a\.txt:2:world$`)
	catMatch(t, "grep at a revision", ok("grep", `{"pattern": "second", "fixed_strings": true, "revision": "v1.1.0"}`), `^v1\.1\.0:b\.txt:1:second file$`)
	if got := ok("grep", `{"pattern": "no such text anywhere"}`); got != "" {
		t.Fatalf("grep without a match: %q, want an empty success", got)
	}

	// Unstaged, staged and range diffs; add and commit.
	r.write(t, "a.txt", "hello\nworld\nagain\n")
	r.write(t, "new.txt", "untracked\n")
	catMatch(t, "status dirty", ok("status", `{}`), `(?m)^ M a\.txt$`)
	catMatch(t, "ls-files others", ok("ls-files", `{"others": true}`), `^new\.txt$`)
	catMatch(t, "ls-files modified", ok("ls-files", `{"modified": true}`), `^a\.txt$`)
	catMatch(t, "diff", ok("diff", `{}`), `(?m)^\+again$`)
	ok("add", `{"paths": ["a.txt"]}`)
	if got := ok("diff", `{}`); got != "" {
		t.Fatalf("unstaged diff after add: %q", got)
	}
	catMatch(t, "diff staged", ok("diff", `{"staged": true, "stat": true}`), `a\.txt \| 1 \+`)
	catMatch(t, "commit", ok("commit", `{"message": "third: --not an option\n\nbody $(touch pwned)"}`), `\[main [0-9a-f]+\] third: --not an option`)
	catMatch(t, "log message", ok("show", `{"revision": "HEAD", "stat": true}`), `\$\(touch pwned\)`)
	catMatch(t, "diff range", ok("diff", `{"revision": "v1.0.0..HEAD", "name_only": true}`), `^a\.txt\nb\.txt$`)

	// restore: unstage, then discard.
	r.write(t, "a.txt", "changed\n")
	ok("add", `{"paths": ["a.txt"]}`)
	ok("restore", `{"paths": ["a.txt"], "staged": true}`)
	catMatch(t, "status after unstage", ok("status", `{}`), `(?m)^ M a\.txt$`)
	ok("restore", `{"paths": ["a.txt"]}`)
	if got := r.read(t, "a.txt"); got != "hello\nworld\nagain\n" {
		t.Fatalf("a.txt after restore: %q", got)
	}

	// stash push / list / apply / pop.
	r.write(t, "a.txt", "stashed\n")
	catMatch(t, "stash push", ok("stash.push", `{"message": "wip pager"}`), `Saved working directory and index state On main: wip pager`)
	if got := r.read(t, "a.txt"); got != "hello\nworld\nagain\n" {
		t.Fatalf("a.txt after stash push: %q", got)
	}
	catMatch(t, "stash list", ok("stash.list", `{}`), `^stash@\{0\}\t[0-9a-f]+\t\d{4}-\d\d-\d\dT[^\t]+\tOn main: wip pager$`)
	ok("stash.apply", `{}`)
	if got := r.read(t, "a.txt"); got != "stashed\n" {
		t.Fatalf("a.txt after stash apply: %q", got)
	}
	ok("restore", `{"paths": ["a.txt"]}`)
	ok("stash.pop", `{"index": 0}`)
	if got := r.read(t, "a.txt"); got != "stashed\n" {
		t.Fatalf("a.txt after stash pop: %q", got)
	}
	if got := ok("stash.list", `{}`); got != "" {
		t.Fatalf("stash list after pop: %q", got)
	}
	ok("restore", `{"paths": ["a.txt"]}`)

	// switch: create a branch, commit on it, go back.
	ok("switch", `{"branch": "feature/x", "create": true, "start_point": "v1.0.0"}`)
	catMatch(t, "rev-parse on the new branch", ok("rev-parse", `{"abbrev_ref": true}`), `^feature/x$`)
	catMatch(t, "branch list", ok("branch", `{"pattern": "feature/*"}`), `^\*\tfeature/x\t`)
	ok("switch", `{"branch": "main"}`)
	catMatch(t, "back on main", ok("rev-parse", `{"abbrev_ref": true}`), `^main$`)

	for _, id := range toolIDs(catalogBundle(t, "git")) {
		if !called[id] {
			t.Errorf("%s was not called", id)
		}
	}
}

// TestCatalogGitToolsRefuseHostileInput: inputs that git would read as options or as paths out of
// the workspace are refused before git runs.
func TestCatalogGitToolsRefuseHostileInput(t *testing.T) {
	r := newCatGitRepo(t, "clihost-t-catgit", nil)
	for _, c := range []struct{ tool, input, code string }{
		{"blame", `{"file": "../../etc/passwd"}`, "path_traversal_blocked"},
		{"blame", `{"file": "--output=x"}`, "input_invalid"},
		{"grep", `{"pattern": "x", "paths": ["/etc"]}`, "path_traversal_blocked"},
		{"grep", `{"pattern": "x", "revision": "--open-files-in-pager=sh"}`, "input_invalid"},
		{"switch", `{"branch": "-f"}`, "input_invalid"},
		{"restore", `{"paths": [":(top)x"]}`, "path_traversal_blocked"},
		{"stash.push", `{"paths": ["../x"]}`, "path_traversal_blocked"},
		{"rev-parse", `{"revision": "--git-dir"}`, "input_invalid"},
		{"tag", `{"pattern": "--points-at=HEAD"}`, "input_invalid"},
	} {
		e := r.call(t, c.tool, c.input)
		if e.OK || e.Error == nil || e.Error.Code != c.code {
			t.Errorf("%s %s: %+v, want %s", c.tool, c.input, e, c.code)
		}
	}
}

// hostileGitConfig names a program for every place a repository's configuration can make git run
// one: the fsmonitor hook, pager, external diff, textconv and diff/merge drivers, clean/smudge and
// process filters, the ssh command, askpass, credential helper, gpg programs (with log signatures
// shown and commits signed), editors and hooks. PROG is an executable script outside the workspace
// (git execs it directly); SH is a shell command (git runs it with sh -c).
const hostileGitConfig = `[core]
	repositoryformatversion = 0
	bare = false
	fsmonitor = PROG
	pager = SH
	sshCommand = SH
	askPass = PROG
	editor = SH
	hooksPath = HOOKS
[pager]
	status = SH
	diff = SH
	log = SH
[diff]
	external = PROG
[diff "evil"]
	textconv = PROG
	command = SH
[filter "evil"]
	clean = SH
	smudge = PROG
[filter "evilproc"]
	process = PROG
[merge "evil"]
	driver = SH
[credential]
	helper = !SH
[gpg]
	program = PROG
[gpg "ssh"]
	program = PROG
[log]
	showSignature = true
[commit]
	gpgSign = true
[sequence]
	editor = SH
[alias]
	status = !SH
`

// TestCatalogGitHostileRepository runs every tool of the git bundle in a repository whose own
// .git/config, .gitattributes and hooks name programs everywhere git looks for one. Nothing runs:
// the marker the programs would write never appears and their output never reaches a result. The
// control runs the same git subcommands outside clihost and sees the programs run.
func TestCatalogGitHostileRepository(t *testing.T) {
	r := newCatGitRepo(t, "clihost-t-catgit", map[string]string{
		".gitattributes": "*.txt diff=evil filter=evil merge=evil\n*.dat filter=evilproc\n",
		"c.dat":          "data\n",
	})
	evil := t.TempDir()
	fixture.Reachable(t, evil)
	must(t, os.Chmod(evil, 0o777))
	marker := filepath.Join(evil, "ran")
	prog := filepath.Join(evil, "prog")
	must(t, os.WriteFile(prog, []byte("#!/bin/sh\necho \"$0 $*\" >> "+marker+"\necho PWNED\ncat\n"), 0o755))
	hooks := filepath.Join(evil, "hooks")
	must(t, os.Mkdir(hooks, 0o755))
	for _, h := range []string{"pre-commit", "commit-msg", "post-checkout", "post-commit", "reference-transaction", "prepare-commit-msg"} {
		must(t, os.Symlink(prog, filepath.Join(hooks, h)))
		must(t, os.Symlink(prog, filepath.Join(r.ws, ".git", "hooks", h)))
	}
	sh := "echo sh >> " + marker + "; echo PWNED"
	cfg := strings.NewReplacer("PROG", prog, "SH", `"`+sh+`"`, "HOOKS", hooks).Replace(hostileGitConfig)
	cfgPath := filepath.Join(r.ws, ".git", "config")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	st, err := os.Stat(r.ws)
	must(t, err)
	uid, gid := ownerOf(st)
	chownTree(t, r.ws, uid, gid)

	// The control: git itself, outside the sandbox, runs them (the fsmonitor hook on status, the
	// textconv on diff, the clean filter on add).
	control := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null"}, args...)...)
		cmd.Dir = r.ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null", "GIT_PAGER=cat", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*")
		_, _ = cmd.CombinedOutput()
	}
	r.write(t, "a.txt", "hello\nchanged\n")
	control("status")
	control("diff")
	ran, _ := os.ReadFile(marker)
	if !strings.Contains(string(ran), prog) {
		t.Fatalf("control: git outside clihost did not run the repository's programs (%q): the test proves nothing", ran)
	}
	must(t, os.Remove(marker))
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o644)) // git may have rewritten nothing, but be sure
	chownTree(t, r.ws, uid, gid)

	results := []string{}
	run := func(tool, input string) {
		t.Helper()
		if tool == "write" {
			r.write(t, "a.txt", "to stash\n")
			return
		}
		e := r.call(t, tool, input)
		b, _ := json.Marshal(e)
		results = append(results, tool+" "+input+" → "+string(b))
	}
	for _, c := range [][2]string{
		{"status", `{}`}, {"diff", `{}`}, {"diff", `{"revision": "v1.0.0..HEAD"}`}, {"log", `{"max_count": 3}`},
		{"show", `{"revision": "HEAD"}`}, {"blame", `{"file": "a.txt"}`}, {"branch", `{}`}, {"tag", `{}`},
		{"rev-parse", `{}`}, {"ls-files", `{}`}, {"grep", `{"pattern": "hello"}`}, {"grep", `{"pattern": "hello", "revision": "HEAD"}`},
		{"stash.list", `{}`}, {"add", `{"paths": ["a.txt", "c.dat"]}`}, {"diff", `{"staged": true}`},
		{"commit", `{"message": "hostile"}`}, {"commit", `{"message": "hostile", "no_gpg_sign": true}`},
		{"write", ""}, {"stash.push", `{"message": "s"}`}, {"stash.list", `{}`}, {"stash.apply", `{}`}, {"restore", `{"paths": ["a.txt"]}`},
		{"stash.pop", `{}`}, {"switch", `{"branch": "other", "create": true}`}, {"switch", `{"branch": "main"}`},
		{"restore", `{"paths": ["a.txt"], "source": "v1.0.0"}`},
	} {
		run(c[0], c[1])
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("a program named by the repository ran inside the sandbox: %s\ncalls:\n%s", b, strings.Join(results, "\n"))
	}
	for _, line := range results {
		if strings.Contains(line, "PWNED") {
			t.Fatalf("a program's output reached a result: %s", line)
		}
	}
	called := map[string]bool{}
	for _, line := range results {
		called["git."+strings.Fields(line)[0]] = true
	}
	for _, id := range toolIDs(catalogBundle(t, "git")) {
		if !called[id] {
			t.Errorf("%s was not called in the hostile repository", id)
		}
	}
	t.Logf("calls:\n%s", strings.Join(results, "\n"))
}

// ownerOf returns the uid and gid that own a file.
func ownerOf(st os.FileInfo) (int, int) {
	s := st.Sys().(*syscall.Stat_t)
	return int(s.Uid), int(s.Gid)
}
