package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
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
	for _, e := range b.Tools { // every shipped git tool works on the local repository only
		if sb := manifest.EffectiveSandbox(b.CLI.Sandbox, e.Tool.Sandbox); sb.Network == nil || len(sb.Network.Egress) != 0 {
			t.Errorf("%s may reach the network: %+v", e.Tool.ID, sb.Network)
		}
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
// shown and commits signed), editors and hooks. PROG_name is an executable script outside the
// workspace (git execs it directly), SH_name a shell command (git runs it with sh -c); each writes
// its name to the marker file and PWNED to its output.
const hostileGitConfig = `[core]
	repositoryformatversion = 0
	bare = false
	fsmonitor = PROG_core-fsmonitor
	pager = SH_core-pager
	sshCommand = SH_core-sshcommand
	askPass = PROG_core-askpass
	editor = SH_core-editor
	hooksPath = HOOKS
[pager]
	status = SH_pager-status
	diff = SH_pager-diff
	log = SH_pager-log
[diff]
	external = PROG_diff-external
[diff "evil"]
	textconv = PROG_diffevil-textconv
	command = SH_diffevil-command
[filter "evil"]
	clean = SH_filterevil-clean
	smudge = PROG_filterevil-smudge
[filter "evilproc"]
	process = PROG_filterevilproc-process
[merge "evil"]
	driver = SH_mergeevil-driver
[credential]
	helper = !SH_credential-helper
[gpg]
	program = PROG_gpg-program
[gpg "ssh"]
	program = PROG_gpgssh-program
[log]
	showSignature = true
[commit]
	gpgSign = true
[sequence]
	editor = SH_sequence-editor
[alias]
	status = !SH_alias-status
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
	script := func(name string) string {
		p := filepath.Join(evil, name)
		must(t, os.WriteFile(p, []byte("#!/bin/sh\necho "+name+" >> "+marker+"\necho PWNED\ncat\n"), 0o755))
		return p
	}
	prog := script("hook")
	hooks := filepath.Join(evil, "hooks")
	must(t, os.Mkdir(hooks, 0o755))
	for _, h := range []string{"pre-commit", "commit-msg", "post-checkout", "post-commit", "reference-transaction", "prepare-commit-msg"} {
		must(t, os.Symlink(prog, filepath.Join(hooks, h)))
		must(t, os.Symlink(prog, filepath.Join(r.ws, ".git", "hooks", h)))
	}
	cfg := regexp.MustCompile(`(PROG|SH)_([a-z-]+)`).ReplaceAllStringFunc(hostileGitConfig, func(m string) string {
		kind, name, _ := strings.Cut(m, "_")
		if kind == "PROG" {
			return script(name)
		}
		return `"echo ` + name + ` >> ` + marker + `; echo PWNED"`
	})
	cfg = strings.ReplaceAll(cfg, "HOOKS", hooks)
	cfgPath := filepath.Join(r.ws, ".git", "config")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	st, err := os.Stat(r.ws)
	must(t, err)
	uid, gid := ownerOf(st)
	chownTree(t, r.ws, uid, gid)

	// The control: git itself, outside the sandbox, runs them: the fsmonitor hook on status, the
	// external diff and the diff driver's command, the textconv, the clean filter (a shell command)
	// and the smudge filter.
	control := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null"}, args...)...)
		cmd.Dir = r.ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null", "GIT_PAGER=cat", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*")
		_, _ = cmd.CombinedOutput()
	}
	// The process filter, which answers no protocol, makes git stop at once: the control goes
	// without it so that the rest are seen to run.
	must(t, os.WriteFile(cfgPath, []byte(regexp.MustCompile(`\tprocess = .*\n`).ReplaceAllString(cfg, "")), 0o644))
	r.write(t, "a.txt", "hello\nchanged\n")
	r.write(t, "c.dat", "changed data\n") // no diff driver: diff.external applies
	control("status")
	control("diff")
	control("diff", "--no-ext-diff")
	control("hash-object", "a.txt")
	ran, _ := os.ReadFile(marker)
	for _, want := range []string{"core-fsmonitor", "diff-external", "diffevil-command", "diffevil-textconv", "filterevil-clean", "filterevil-smudge"} {
		if !strings.Contains(string(ran), want) {
			t.Fatalf("control: git outside clihost did not run %s (ran: %q): the test would prove nothing", want, ran)
		}
	}
	must(t, os.Remove(marker))
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o644)) // the process filter back
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

// TestCatalogKubectlBundleSize: issue 16 asks for at least 20 kubectl tools and names the ones
// agents use; mutations ask for approval, deletion is destructive.
func TestCatalogKubectlBundleSize(t *testing.T) {
	b := catalogBundle(t, "kubectl")
	ids := toolIDs(b)
	if len(ids) < 20 {
		t.Fatalf("kubectl has %d tools, want at least 20: %v", len(ids), ids)
	}
	for _, e := range b.Tools {
		tool := e.Tool
		mutating := strings.Contains(" kubectl.apply kubectl.rollout.restart kubectl.rollout.undo kubectl.scale kubectl.delete ", " "+tool.ID+" ")
		switch {
		case mutating && (len(tool.Mutates) == 0 || tool.Approval == "auto"):
			t.Errorf("%s changes the cluster but asks no approval (mutates %v, approval %s)", tool.ID, tool.Mutates, tool.Approval)
		case !mutating && (len(tool.Mutates) != 0 || tool.RiskLevel != 0):
			t.Errorf("%s reads only but is classed mutates %v, risk %d", tool.ID, tool.Mutates, tool.RiskLevel)
		}
	}
	for _, e := range b.Tools {
		if e.Tool.ID == "kubectl.delete" && !e.Tool.Annotations().Destructive {
			t.Error("kubectl.delete is not destructive")
		}
	}
}

// fakeKube is a loopback Kubernetes API server serving recorded discovery and a few objects in
// namespace web, enough for the real kubectl's read paths, dry runs and access reviews.
type fakeKube struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // "METHOD path?query"
}

const kubeToken = "s3cr3t-kube-token"

func newFakeKube(t *testing.T) *fakeKube {
	t.Helper()
	f := &fakeKube{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeKube) requests() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.seen, "\n")
}

var kubeObjects = map[string]string{
	"/version": `{"major":"1","minor":"32","gitVersion":"v1.32.4","gitCommit":"x","gitTreeState":"clean","buildDate":"2025-01-01T00:00:00Z","goVersion":"go1.23","compiler":"gc","platform":"linux/amd64"}`,
	"/api":     `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1:443"}]}`,
	"/apis": `{"kind":"APIGroupList","apiVersion":"v1","groups":[
		{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}},
		{"name":"authorization.k8s.io","versions":[{"groupVersion":"authorization.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"authorization.k8s.io/v1","version":"v1"}},
		{"name":"metrics.k8s.io","versions":[{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}],"preferredVersion":{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}}]}`,
	"/api/v1": `{"kind":"APIResourceList","groupVersion":"v1","resources":[
		{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["po"],"categories":["all"]},
		{"name":"pods/log","singularName":"","namespaced":true,"kind":"Pod","verbs":["get"]},
		{"name":"events","singularName":"event","namespaced":true,"kind":"Event","verbs":["create","delete","get","list","watch"],"shortNames":["ev"]},
		{"name":"nodes","singularName":"node","namespaced":false,"kind":"Node","verbs":["get","list","watch"],"shortNames":["no"]},
		{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["get","list"],"shortNames":["ns"]}]}`,
	"/apis/apps/v1": `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apps/v1","resources":[
		{"name":"deployments","singularName":"deployment","namespaced":true,"kind":"Deployment","verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["deploy"],"categories":["all"]},
		{"name":"deployments/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale","verbs":["get","patch","update"]},
		{"name":"replicasets","singularName":"replicaset","namespaced":true,"kind":"ReplicaSet","verbs":["get","list","watch"],"shortNames":["rs"]}]}`,
	"/apis/authorization.k8s.io/v1": `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"authorization.k8s.io/v1","resources":[
		{"name":"selfsubjectaccessreviews","singularName":"selfsubjectaccessreview","namespaced":false,"kind":"SelfSubjectAccessReview","verbs":["create"]}]}`,
	"/apis/metrics.k8s.io/v1beta1": `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"metrics.k8s.io/v1beta1","resources":[
		{"name":"pods","singularName":"","namespaced":true,"kind":"PodMetrics","verbs":["get","list"]},
		{"name":"nodes","singularName":"","namespaced":false,"kind":"NodeMetrics","verbs":["get","list"]}]}`,
	// OpenAPI v3 says that a Deployment's PATCH takes fieldValidation, so that kubectl validates
	// manifests on the server instead of downloading the (protobuf) v2 schema.
	"/openapi/v3": `{"paths":{"apis/apps/v1":{"serverRelativeURL":"/openapi/v3/apis/apps/v1?hash=1"}}}`,
	"/openapi/v3/apis/apps/v1": `{"openapi":"3.0.0","info":{"title":"Kubernetes","version":"v1.32.4"},"paths":{
		"/apis/apps/v1/namespaces/{namespace}/deployments/{name}":{"patch":{"x-kubernetes-group-version-kind":{"group":"apps","version":"v1","kind":"Deployment"},
		"parameters":[{"name":"dryRun","in":"query","schema":{"type":"string"}},{"name":"fieldValidation","in":"query","schema":{"type":"string"}}],
		"responses":{"200":{"description":"OK"}}}}}}`,
	"/api/v1/namespaces/web/pods/web-0": kubePod,
	"/api/v1/namespaces/web/pods":       `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[` + kubePod + `]}`,
	"/api/v1/namespaces/web/events": `{"kind":"EventList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"web-0.1","namespace":"web"},
		"involvedObject":{"kind":"Pod","namespace":"web","name":"web-0","apiVersion":"v1"},"reason":"BackOff","message":"Back-off restarting failed container app","type":"Warning","count":3,
		"firstTimestamp":"2025-01-01T00:00:00Z","lastTimestamp":"2025-01-01T00:05:00Z","source":{"component":"kubelet"}}]}`,
	"/apis/apps/v1/namespaces/web/deployments/web": kubeDeployment,
	"/apis/apps/v1/namespaces/web/deployments":     `{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"7"},"items":[` + kubeDeployment + `]}`,
	"/apis/metrics.k8s.io/v1beta1/namespaces/web/pods": `{"kind":"PodMetricsList","apiVersion":"metrics.k8s.io/v1beta1","metadata":{},"items":[{"metadata":{"name":"web-0","namespace":"web"},
		"timestamp":"2025-01-01T00:00:00Z","window":"30s","containers":[{"name":"app","usage":{"cpu":"250m","memory":"64Mi"}}]}]}`,
}

const kubePod = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"web","uid":"u1","resourceVersion":"7","creationTimestamp":"2025-01-01T00:00:00Z","labels":{"app":"web"}},
	"spec":{"nodeName":"node-1","containers":[{"name":"app","image":"nginx:1.27"}]},
	"status":{"phase":"Running","podIP":"10.0.0.5","containerStatuses":[{"name":"app","ready":true,"restartCount":3,"image":"nginx:1.27","imageID":"","state":{"running":{"startedAt":"2025-01-01T00:06:00Z"}}}]}}`

const kubeDeployment = `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"web","uid":"u2","resourceVersion":"7","generation":2,"creationTimestamp":"2025-01-01T00:00:00Z","annotations":{"deployment.kubernetes.io/revision":"2"}},
	"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}},
	"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3,
	"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","lastTransitionTime":"2025-01-01T00:00:00Z"}]}}`

// kubeManifest is the workspace's manifest of the deployment, with 5 replicas where the cluster has 3.
const kubeManifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: web}\nspec:\n  replicas: 5\n" +
	"  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: app, image: \"nginx:1.27\"}]}\n"

func (f *fakeKube) serve(w http.ResponseWriter, r *http.Request) {
	line := r.Method + " " + r.URL.RequestURI()
	if r.Method == http.MethodDelete { // kubectl sends a deletion's dryRun in the body's DeleteOptions
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		line += " " + string(body)
	}
	f.mu.Lock()
	f.seen = append(f.seen, line)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/web/pods/web-0/log":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("listening on :8080\nGET / 200\n"))
		return
	case r.Method == http.MethodPost && p == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		allowed := !strings.Contains(string(body), "delete") // the body is JSON or protobuf
		_, _ = fmt.Fprintf(w, `{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":{},"status":{"allowed":%t}}`, allowed)
		return
	case r.Method == http.MethodPatch && p == "/apis/apps/v1/namespaces/web/deployments/web/scale":
		_, _ = w.Write([]byte(`{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web","namespace":"web"},"spec":{"replicas":1},"status":{"replicas":3}}`))
		return
	case r.Method == http.MethodPatch && p == "/apis/apps/v1/namespaces/web/deployments/web":
		_, _ = w.Write([]byte(strings.Replace(kubeDeployment, `"replicas":3,"selector"`, `"replicas":5,"selector"`, 1)))
		return
	case r.Method == http.MethodDelete && p == "/api/v1/namespaces/web/pods/web-0":
		_, _ = w.Write([]byte(kubePod))
		return
	case r.Method == http.MethodGet && p == "/api/v1/namespaces/web/events" && strings.Contains(r.URL.RawQuery, "watch"):
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if body, ok := kubeObjects[p]; ok && r.Method == http.MethodGet {
		_, _ = w.Write([]byte(body))
		return
	}
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}`))
}

// kubeconfig writes a kubeconfig for the fake server with a bearer token and a client key.
func (f *fakeKube) kubeconfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := `apiVersion: v1
kind: Config
current-context: fake
clusters:
- name: fake-cluster
  cluster:
    server: ` + f.srv.URL + `
contexts:
- name: fake
  context: { cluster: fake-cluster, user: fake-user, namespace: web }
- name: other
  context: { cluster: fake-cluster, user: basic-user }
users:
- name: fake-user
  user:
    token: ` + kubeToken + `
    client-key-data: ` + "UFJJVkFURS1LRVktREFUQQ==" + `
- name: basic-user
  user:
    username: admin
    password: hunter2-password
`
	p := filepath.Join(dir, "kubeconfig")
	must(t, os.WriteFile(p, []byte(cfg), 0o644))
	return p
}

// kubeArgv renders a catalog kubectl tool's argv for input as clihost does: bin_args, the tool's
// template, the JSON flag.
func kubeArgv(t *testing.T, b *manifest.Bundle, id string, input map[string]any) (*manifest.ToolEntry, []string) {
	t.Helper()
	for _, e := range b.Tools {
		if e.Tool.ID != id {
			continue
		}
		if err := e.InputSchema().Validate(input); err != nil {
			t.Fatalf("%s: input %v: %v", id, input, err)
		}
		args, err := argv.Expand(e.Tool.Runner.Parsed, input, nil)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return e, append(slices.Clone(b.CLI.BinArgs), output.For(b.CLI, e.Tool).Args(args)...)
	}
	t.Fatalf("no tool %s", id)
	return nil, nil
}

// TestCatalogKubectlToolsAgainstAPIServer renders each kubectl tool's argv from the catalog, runs
// the real kubectl with it against a loopback API server (the only kind this machine can run:
// Debian packages no kube-apiserver and envtest's binaries are downloaded from the network), then
// parses the output under the tool's convention and checks it against the outputs schema. Tools
// whose server side the fake does not serve (diff, apply, explain, rollout history/restart/undo,
// top node) are checked to the argv.
func TestCatalogKubectlToolsAgainstAPIServer(t *testing.T) {
	kubectl, err := lookSystem("kubectl")
	if err != nil {
		fixture.Missing(t, "kubectl is not installed (.ci/run installs Debian's kubernetes-client)")
	}
	b := catalogBundle(t, "kubectl")
	modern := kubectlModern(t, kubectl)
	f := newFakeKube(t)
	home := t.TempDir()
	kcfg := f.kubeconfig(t, home)
	in := func(s string) map[string]any {
		var m map[string]any
		must(t, json.Unmarshal([]byte(s), &m))
		return m
	}
	run := func(id, input, want string) any {
		t.Helper()
		e, args := kubeArgv(t, b, id, in(input))
		cmd := exec.Command(kubectl, args...)
		cmd.Dir = home
		cmd.Env = []string{"PATH=" + systemPath, "HOME=" + home, "KUBECONFIG=" + kcfg}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		out := output.Parse(output.For(b.CLI, e.Tool), output.Process{ExitCode: code, Stdout: []byte(stdout.String()), Stderr: []byte(stderr.String())})
		if !out.OK {
			t.Fatalf("%s %s: kubectl %v failed (exit %d): %+v\nstderr: %s\nrequests:\n%s", id, input, args, code, out.Failure, stderr.String(), f.requests())
		}
		if err := e.OutputSchema().Validate(out.Value); err != nil {
			t.Fatalf("%s: output %v does not match the outputs schema: %v", id, out.Value, err)
		}
		text, _ := json.Marshal(out.Value)
		if !regexp.MustCompile(want).Match(text) {
			t.Fatalf("%s %s: %s does not match %s", id, input, text, want)
		}
		return out.Value
	}
	run("kubectl.get", `{"resource": "pods", "namespace": "web"}`, `"name":"web-0".*"kind":"List"`)
	run("kubectl.get", `{"resource": "deployment", "name": "web", "namespace": "web"}`, `"kind":"Deployment"`)
	run("kubectl.describe", `{"resource": "pod", "name": "web-0", "namespace": "web"}`, `Restart Count:\s+3`)
	run("kubectl.logs", `{"pod": "web-0", "namespace": "web", "tail": 10}`, `listening on :8080`)
	run("kubectl.api-versions", `{}`, `apps/v1.*metrics.k8s.io/v1beta1`)
	run("kubectl.api-resources", `{"api_group": "apps"}`, `deployments.*deploy.*apps/v1.*true.*Deployment`)
	run("kubectl.auth.can-i", `{"verb": "get", "resource": "pods", "namespace": "web"}`, `^"yes(\\n)+"$`)
	run("kubectl.auth.can-i", `{"verb": "delete", "resource": "pods", "namespace": "web"}`, `^"no(\\n)+"$`)
	run("kubectl.auth.can-i", `{"verb": "get", "resource": "widgets", "namespace": "web"}`, `^"yes(\\n)+Warning: the server doesn.t have a resource type .widgets.(\\n)+"$`)
	run("kubectl.rollout.status", `{"resource": "deployment/web", "namespace": "web"}`, `successfully rolled out`)
	run("kubectl.wait", `{"resource": "deployment/web", "for": "condition=Available", "namespace": "web", "timeout_seconds": 20}`, `deployment.apps/web condition met`)
	run("kubectl.top.pod", `{"namespace": "web"}`, `web-0\s+250m\s+64Mi`)
	if modern {
		run("kubectl.events", `{"namespace": "web", "warnings_only": true}`, `"reason":"BackOff"`)
	}
	run("kubectl.scale", `{"resource": "deployment/web", "replicas": 1, "namespace": "web", "dry_run": "server"}`, `deployment.apps/web scaled \(server dry run\)`)
	run("kubectl.delete", `{"resource": "pod", "name": "web-0", "namespace": "web", "dry_run": "server"}`, `pod \\"web-0\\" deleted \(server dry run\)`)
	manifest := filepath.Join(home, "k8s", "web.yaml")
	must(t, os.MkdirAll(filepath.Dir(manifest), 0o755))
	must(t, os.WriteFile(manifest, []byte(kubeManifest), 0o644))
	if modern {
		run("kubectl.apply", `{"file": "k8s/web.yaml"}`, `deployment.apps/web configured \(server dry run\)`)
		run("kubectl.apply", `{"file": "k8s/web.yaml", "dry_run": "client"}`, `deployment.apps/web configured \(dry run\)`)
		run("kubectl.diff", `{"file": "k8s/web.yaml"}`, `-  replicas: 3.*\+  replicas: 5`)
	}
	reqs := f.requests()
	for _, want := range []string{"PATCH /apis/apps/v1/namespaces/web/deployments/web/scale?dryRun=All", `DELETE /api/v1/namespaces/web/pods/web-0 {"propagationPolicy":"Background","dryRun":["All"]}`} {
		if !strings.Contains(reqs, want) {
			t.Errorf("no %q among the requests:\n%s", want, reqs)
		}
	}
	patches := regexp.MustCompile(`(?m)^PATCH /apis/apps/v1/namespaces/web/deployments/web\?.*$`).FindAllString(reqs, -1)
	if modern && len(patches) != 2 { // apply's server dry run and diff's; the client dry run sends none
		t.Errorf("want two PATCHes of the deployment (apply's server dry run, diff), got %q", patches)
	}
	for _, p := range patches {
		if !strings.Contains(p, "dryRun=All") {
			t.Errorf("a PATCH without dryRun=All: %s", p)
		}
	}
	if strings.Contains(reqs, "PATCH /apis/apps/v1/namespaces/web/deployments/web/scale\n") || regexp.MustCompile(`(?m)^DELETE `).FindAllString(reqs, -1) != nil && !strings.Contains(reqs, `"dryRun":["All"]`) {
		t.Errorf("a dry run reached the server as a real change:\n%s", reqs)
	}

	// The rest to the argv: what kubectl would be asked to do.
	for _, c := range []struct {
		id, input string
		want      []string
	}{
		{"kubectl.events", `{"for": "pod/web-0", "warnings_only": true, "namespace": "web"}`, []string{"events", "--for=pod/web-0", "--types=Warning", "--namespace=web", "-o", "json"}},
		{"kubectl.diff", `{"file": "k8s/app.yaml", "namespace": "web"}`, []string{"diff", "--filename=k8s/app.yaml", "--namespace=web"}},
		{"kubectl.apply", `{"file": "k8s/", "dry_run": "server", "recursive": true}`, []string{"apply", "--filename", "k8s/", "--dry-run=server", "--recursive"}},
		{"kubectl.explain", `{"field": "deployment.spec.strategy", "recursive": true}`, []string{"explain", "deployment.spec.strategy", "--recursive"}},
		{"kubectl.rollout.history", `{"resource": "deployment/web", "revision": 2}`, []string{"rollout", "history", "deployment/web", "--revision=2"}},
		{"kubectl.rollout.restart", `{"resource": "statefulset/db", "namespace": "data"}`, []string{"rollout", "restart", "statefulset/db", "--namespace=data"}},
		{"kubectl.rollout.undo", `{"resource": "deployment/web", "to_revision": 3, "dry_run": "server"}`, []string{"rollout", "undo", "deployment/web", "--to-revision=3", "--dry-run=server"}},
		{"kubectl.rollout.status", `{"resource": "deployment/web", "wait": true, "timeout_seconds": 300}`, []string{"rollout", "status", "deployment/web", "--watch=true", "--timeout=300s"}},
		{"kubectl.top.node", `{"sort_by": "memory"}`, []string{"top", "node", "--sort-by=memory"}},
		{"kubectl.logs", `{"pod": "deployment/web"}`, []string{"logs", "deployment/web", "--tail=200"}},
		{"kubectl.scale", `{"resource": "deployment/web", "replicas": 0}`, []string{"scale", "deployment/web", "--replicas=0", "--dry-run=server"}},
		{"kubectl.apply", `{"file": "k8s/app.yaml"}`, []string{"apply", "--filename", "k8s/app.yaml", "--dry-run=server"}},
		{"kubectl.delete", `{"resource": "pod", "name": "web-0"}`, []string{"delete", "pod", "web-0", "--dry-run=server", "--wait=false"}},
		{"kubectl.rollout.undo", `{"resource": "deployment/web"}`, []string{"rollout", "undo", "deployment/web", "--dry-run=server"}},
		{"kubectl.delete", `{"resource": "job", "name": "migrate", "dry_run": "none"}`, []string{"delete", "job", "migrate", "--dry-run=none", "--wait=false"}},
		{"kubectl.config.view", `{"context": "other"}`, []string{"config", "view", "--minify", "--output=jsonpath={.current-context}{\"\\t\"}{.contexts[0].context.cluster}{\"\\t\"}{.clusters[0].cluster.server}{\"\\t\"}{.contexts[0].context.namespace}{\"\\t\"}{.contexts[0].context.user}", "--context=other"}},
	} {
		if _, got := kubeArgv(t, b, c.id, in(c.input)); !slices.Equal(got, c.want) {
			t.Errorf("%s %s: argv %q, want %q", c.id, c.input, got, c.want)
		}
	}
	// Bounded and safe by schema: no follow, no unbounded waits, no other dry-run mode.
	for _, c := range []struct{ id, input string }{
		{"kubectl.logs", `{"pod": "web-0", "tail": 1000000}`},
		{"kubectl.rollout.status", `{"resource": "deployment/web", "timeout_seconds": 3600}`},
		{"kubectl.apply", `{"file": "k8s/app.yaml", "dry_run": "yes"}`},
		{"kubectl.delete", `{"resource": "pod", "name": "web-0", "dry_run": ""}`},
		{"kubectl.rollout.status", `{"resource": "pod/web-0"}`},
		{"kubectl.delete", `{"resource": "pod", "name": "--all", "dry_run": "none"}`},
	} {
		for _, e := range b.Tools {
			if e.Tool.ID == c.id && e.InputSchema().Validate(in(c.input)) == nil {
				t.Errorf("%s accepts %s", c.id, c.input)
			}
		}
	}
}

// TestCatalogKubectlConfigToolsInSandbox runs the offline kubectl tools through clihostctl in the
// real sandbox (no egress): config.view names the cluster and its server without any credential.
func TestCatalogKubectlConfigToolsInSandbox(t *testing.T) {
	fixture.NeedRoot(t)
	if _, err := lookSystem("kubectl"); err != nil {
		fixture.Missing(t, "kubectl is not installed (.ci/run installs Debian's kubernetes-client)")
	}
	u := fixture.User(t, "clihost-t-catkube")
	kube := filepath.Join(u.Home, ".kube")
	must(t, os.MkdirAll(kube, 0o700))
	t.Cleanup(func() { os.RemoveAll(kube) })
	f := &fakeKube{srv: &httptest.Server{URL: "https://kube.example.test:6443"}}
	f.kubeconfig(t, kube)
	must(t, os.Rename(filepath.Join(kube, "kubeconfig"), filepath.Join(kube, "config")))
	chownTree(t, u.Home, u.UID, u.GID)
	ws := t.TempDir()
	fixture.Reachable(t, filepath.Dir(ws))
	chownTree(t, ws, u.UID, u.GID)
	call := func(tool, input string) string {
		t.Helper()
		r := runBin(t, bin.ctl, "", "call", "kubectl", tool, "--workspace", ws, "--audit", os.DevNull, "--input", input)
		e := decodeEnvelope(t, r)
		if !e.OK {
			t.Fatalf("kubectl %s: %+v\n%s", tool, e.Error, r.stderr)
		}
		s, _ := e.Value.(string)
		for _, secret := range []string{kubeToken, "hunter2", "UFJJVkFURS1LRVktREFUQQ", "REDACTED", "DATA+OMITTED"} {
			if strings.Contains(r.stdout+r.stderr, secret) {
				t.Fatalf("kubectl %s printed %q: %s", tool, secret, r.stdout)
			}
		}
		return strings.TrimSpace(s)
	}
	catMatch(t, "current-context", call("config.current-context", `{}`), `^fake$`)
	catMatch(t, "get-contexts", call("config.get-contexts", `{}`), `^fake\nother$`)
	catMatch(t, "config view", call("config.view", `{}`), `^fake\tfake-cluster\thttps://kube\.example\.test:6443\tweb\tfake-user$`)
	catMatch(t, "config view of another context", call("config.view", `{"context": "other"}`), `^other\tfake-cluster\thttps://kube\.example\.test:6443\t\tbasic-user$`)
}

// TestCatalogKubectlInSandboxThroughEgress runs the read-only kubectl tools in the real sandbox
// against the loopback API server, through the egress proxy: the catalog bundle with only the
// server's host name added to its egress (what an operator does for a self-hosted cluster) and the
// host admitting loopback (clihostd --egress-admit). Without the name in egress the same call is
// refused by the proxy.
func TestCatalogKubectlInSandboxThroughEgress(t *testing.T) {
	fixture.NeedRoot(t)
	kubectl, err := lookSystem("kubectl")
	if err != nil {
		fixture.Missing(t, "kubectl is not installed (.ci/run installs Debian's kubernetes-client)")
	}
	f := newFakeKube(t)
	port, err := strconv.Atoi(f.srv.URL[strings.LastIndex(f.srv.URL, ":")+1:])
	must(t, err)
	u := fixture.User(t, "clihost-t-catkube")
	kube := filepath.Join(u.Home, ".kube")
	must(t, os.MkdirAll(kube, 0o700))
	t.Cleanup(func() { os.RemoveAll(kube) })
	// A name for the loopback server that is not "localhost": kubectl (Go's proxy rules) never
	// sends localhost through a proxy, and the sandbox has no other way out.
	name := loopbackName(t)
	f.srv.URL = strings.Replace(f.srv.URL, "127.0.0.1", name, 1)
	f.kubeconfig(t, kube)
	must(t, os.Rename(filepath.Join(kube, "kubeconfig"), filepath.Join(kube, "config")))
	chownTree(t, u.Home, u.UID, u.GID)
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "web.yaml"), []byte(kubeManifest), 0o644))
	fixture.Reachable(t, filepath.Dir(ws))
	chownTree(t, ws, u.UID, u.GID)

	call := func(egress []string, tool string, input map[string]any) (host.Envelope, string) {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "kubectl")
		must(t, os.CopyFS(dir, os.DirFS("../bundles/kubectl")))
		cliPath := filepath.Join(dir, "CLI.md")
		cli, err := os.ReadFile(cliPath)
		must(t, err)
		list := ""
		for _, h := range egress {
			list += "      - " + h + "\n"
		}
		must(t, os.WriteFile(cliPath, []byte(strings.Replace(string(cli), "    egress:\n", "    egress:\n"+list, 1)), 0o644))
		fixture.Reachable(t, filepath.Dir(dir))
		reg := fixture.Load(t, filepath.Dir(dir))
		h := host.New(reg, host.Options{
			Sandbox: host.SandboxOptions{AdmitNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, EgressPorts: []int{port}},
			LookupEnv: func(k string) (string, bool) {
				switch k {
				case "PATH":
					return systemPath, true
				case "HOME":
					return u.Home, true
				}
				return "", false
			},
		})
		b, err := h.Bundle("kubectl")
		must(t, err)
		env := h.Call(context.Background(), b, tool, input, host.Caller{Workspace: ws}, host.CallOptions{})
		raw, _ := json.Marshal(env)
		return env, string(raw)
	}
	cases := []kubeCase{
		{"api-versions", map[string]any{}, `apps/v1`},
		{"wait", map[string]any{"resource": "deployment/web", "for": "condition=Available", "namespace": "web", "timeout_seconds": 20}, `condition met`},
		{"get", map[string]any{"resource": "pods", "namespace": "web"}, `"name":"web-0"`},
		{"logs", map[string]any{"pod": "web-0", "namespace": "web"}, `listening on :8080`},
		{"auth.can-i", map[string]any{"verb": "get", "resource": "pods"}, `"value":"yes`},
		{"describe", map[string]any{"resource": "pod", "name": "web-0", "namespace": "web"}, `Restart Count:\s+3`},
		{"api-resources", map[string]any{"api_group": "apps"}, `deployments`},
		{"rollout.status", map[string]any{"resource": "deployment/web", "namespace": "web"}, `successfully rolled out`},
		{"top.pod", map[string]any{"namespace": "web"}, `web-0\s+250m`},
	}
	if kubectlModern(t, kubectl) {
		cases = append(cases, kubeCase{"events", map[string]any{"namespace": "web"}, `"reason":"BackOff"`},
			kubeCase{"diff", map[string]any{"file": "web.yaml"}, `-  replicas: 3.*\+  replicas: 5`}) // diff runs the diff program
	}
	for _, c := range cases {
		env, raw := call([]string{name}, c.tool, c.input)
		if !env.OK || !regexp.MustCompile(c.want).MatchString(raw) {
			t.Fatalf("%s %v in the sandbox: %s\nrequests:\n%s", c.tool, c.input, raw, f.requests())
		}
		if strings.Contains(raw, kubeToken) {
			t.Fatalf("%s: the token reached the result: %s", c.tool, raw)
		}
	}
	if env, raw := call(nil, "api-versions", map[string]any{}); env.OK || !strings.Contains(raw, "is not in the egress allowlist") {
		t.Fatalf("without the API server in egress: %s", raw)
	}
	// A change of the cluster asks first: without an approval nothing reaches the server.
	before := f.requests()
	for _, c := range []struct {
		tool  string
		input map[string]any
	}{
		{"scale", map[string]any{"resource": "deployment/web", "replicas": 0, "namespace": "web", "dry_run": "none"}},
		{"apply", map[string]any{"file": "app.yaml"}},
		{"delete", map[string]any{"resource": "pod", "name": "web-0", "namespace": "web", "dry_run": "none"}},
		{"rollout.restart", map[string]any{"resource": "deployment/web", "namespace": "web"}},
	} {
		if env, raw := call([]string{name}, c.tool, c.input); env.OK || env.Error == nil || env.Error.Code != "approval_required" {
			t.Fatalf("%s without an approval: %s", c.tool, raw)
		}
	}
	if reqs := f.requests(); reqs != before {
		t.Fatalf("a call that needs an approval reached the server without one:\n%s", strings.TrimPrefix(reqs, before))
	}
}

// loopbackName returns a host name other than localhost that resolves to 127.0.0.1 only (the
// machine's own name in /etc/hosts, on Debian and on this project's machines).
func loopbackName(t *testing.T) string {
	t.Helper()
	name, err := os.Hostname()
	must(t, err)
	addrs, err := net.LookupHost(name)
	if err != nil || len(addrs) == 0 || name == "localhost" {
		t.Skipf("the host name %q does not resolve (%v): no loopback name for the egress proxy", name, err)
	}
	for _, a := range addrs {
		if a != "127.0.0.1" {
			t.Skipf("the host name %q resolves to %v, not to 127.0.0.1 only: no loopback name for the egress proxy", name, addrs)
		}
	}
	return name
}

// kubeCase is one call of a kubectl tool and what its envelope must match.
type kubeCase struct {
	tool  string
	input map[string]any
	want  string
}

// kubectlModern reports whether kubectl is 1.27 or later: it has `kubectl events` (1.26) and
// validates manifests through OpenAPI v3 (the fake serves no protobuf v2 schema). Debian 12's
// kubernetes-client is 1.20, which the older paths are then left to.
func kubectlModern(t *testing.T, kubectl string) bool {
	t.Helper()
	out, err := exec.Command(kubectl, "version", "--client", "-o", "json").Output()
	var v struct {
		ClientVersion struct{ Minor string } `json:"clientVersion"`
	}
	if err != nil || json.Unmarshal(out, &v) != nil {
		t.Fatalf("kubectl version --client: %v: %s", err, out)
	}
	minor, err := strconv.Atoi(strings.TrimRight(v.ClientVersion.Minor, "+"))
	if err != nil {
		t.Fatalf("kubectl client minor version %q: %v", v.ClientVersion.Minor, err)
	}
	if minor < 27 {
		t.Logf("kubectl 1.%d: events, apply and diff against the fake are not exercised (they need 1.27)", minor)
	}
	return minor >= 27
}
