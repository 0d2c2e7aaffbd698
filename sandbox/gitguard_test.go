package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	fx "github.com/clihost/clihost/internal/fixture"
)

func TestFilterGitConfig(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		clean   bool
		dropped []string
		out     string // when not clean
	}{
		{name: "git init", clean: true,
			in: "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"},
		{name: "git clone", clean: true,
			in: "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n" +
				"[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n# a comment\n; another\n\n[user]\n\tname = \"A; B\"\n"},
		{name: "fsmonitor", in: "[core]\n\tbare = false\n\tfsmonitor = touch /x\n",
			dropped: []string{"core.fsmonitor"}, out: "[core]\n\tbare = false\n"},
		{name: "programs and includes", in: "[core]\n\thooksPath = h\n\tsshCommand = x\n\tpager = x\n\teditor = x\n[diff]\n\texternal = x\n" +
			"[include]\n\tpath = x\n[includeIf \"gitdir:/\"]\n\tpath = x\n[alias]\n\tst = !x\n[filter \"f\"]\n\tclean = x\n" +
			"[remote \"o\"]\n\turl = /r\n\tuploadpack = x\n\treceivepack = x\n[submodule \"s\"]\n\tupdate = !x\n\turl = ../s\n",
			dropped: []string{"core.hookspath", "core.sshcommand", "core.pager", "core.editor", "diff.external", "include.path",
				"includeif.*.path", "alias.st", "filter.*.clean", "remote.*.uploadpack", "remote.*.receivepack", "submodule.*.update"},
			out: "[remote \"o\"]\n\turl = /r\n[submodule \"s\"]\n\turl = ../s\n"},
		{name: "case does not hide a key", in: "[CORE]\n\tFsMonitor = x\n\tBare = true\n",
			dropped: []string{"core.fsmonitor"}, out: "[core]\n\tBare = true\n"},
		{name: "transport helpers and options in URLs", in: "[remote \"a\"]\n\turl = ext::sh -c x\n[remote \"b\"]\n\turl = -oProxyCommand=x\n" +
			"[remote \"c\"]\n\tpushurl = fd::3\n[branch \"m\"]\n\tremote = evil::x\n",
			dropped: []string{"remote.*.url", "remote.*.url", "remote.*.pushurl", "branch.*.remote"}, out: ""},
		{name: "a continuation line is not strict", in: "[remote \"o\"]\n\turl = /r\\\n\tfsmonitor = x\n[core]\n\tbare = true\n",
			dropped: []string{"remote.*.fsmonitor"}, out: "[core]\n\tbare = true\n"},
		{name: "a key on the header line", in: "[core] fsmonitor = x\n\tfilemode = true\n[core]\n\tbare = true\n",
			out: "[core]\n\tbare = true\n"},
		{name: "the deprecated dotted header", in: "[core.x]\n\tfsmonitor = y\n", out: ""},
		{name: "a quoted subsection with an escape", in: "[remote \"a\\\"b\"]\n\turl = /r\n", out: ""},
		{name: "CR", in: "[core]\r\n\tbare = true\r\n", out: "[core]\n\tbare = true\n"},
		{name: "BOM", in: "\xef\xbb\xbf[core]\n\tbare = true\n", out: ""},
		{name: "unknown escape", in: "[core]\n\tbare = \\q\n\tfilemode = true\n", out: "[core]\n\tfilemode = true\n"},
		{name: "worktree outside", in: "[core]\n\tworktree = /etc\n", dropped: []string{"core.worktree"}, out: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, dropped, clean := filterGitConfig([]byte(c.in), valueContext{resolveInside: func(string) bool { return false }})
			if clean != c.clean {
				t.Fatalf("clean = %v, want %v (dropped %q, out %q)", clean, c.clean, dropped, out)
			}
			if clean {
				return
			}
			if c.dropped != nil && !slices.Equal(dropped, c.dropped) {
				t.Errorf("dropped %q, want %q", dropped, c.dropped)
			}
			if string(out) != c.out {
				t.Errorf("rewritten as %q, want %q", out, c.out)
			}
			if _, _, clean := filterGitConfig(out, valueContext{}); !clean {
				t.Errorf("the rewritten file is not clean itself: %q", out)
			}
		})
	}
}

func TestRenderGitConfigRoundTrips(t *testing.T) {
	entries := []gitEntry{
		{section: "user", name: "name", spelled: "name", value: " lead; # \"quoted\" \\ tab\t", hasValue: true},
		{section: "core", name: "bare", spelled: "bare"},
	}
	got, strict := parseGitConfig(renderGitConfig(entries))
	if !strict || !slices.Equal(got, entries) {
		t.Fatalf("parsed back %+v (strict %v), want %+v", got, strict, entries)
	}
}

// guardFixture is a writable root with a policy whose git snapshot is taken by snap.
type guardFixture struct {
	t  *testing.T
	ws string
	p  *Policy
}

func newGuard(t *testing.T) *guardFixture {
	t.Helper()
	return &guardFixture{t: t, ws: realTemp(t), p: &Policy{}}
}

func (g *guardFixture) path(rel string) string { return filepath.Join(g.ws, rel) }

func (g *guardFixture) write(rel, content string, mode os.FileMode) {
	write(g.t, g.path(rel), content, mode)
}

// repo lays out a git directory at rel.
func (g *guardFixture) repo(rel, config string) {
	g.write(rel+"/HEAD", "ref: refs/heads/main\n", 0o644)
	g.write(rel+"/objects/info/.keep", "", 0o644)
	g.write(rel+"/refs/heads/.keep", "", 0o644)
	g.write(rel+"/config", config, 0o644)
}

func (g *guardFixture) snap() {
	g.t.Helper()
	g.p.Writable = []string{g.ws}
	if err := g.p.SnapshotGit(0); err != nil {
		g.t.Fatal(err)
	}
}

// check runs the sweep and returns the findings by path relative to the root.
func (g *guardFixture) check() map[string]GitFinding {
	g.t.Helper()
	_, found, err := Sweep(g.p)
	if err != nil {
		g.t.Fatal(err)
	}
	out := map[string]GitFinding{}
	for _, f := range found {
		rel, _ := filepath.Rel(g.ws, f.Path)
		out[rel] = f
	}
	return out
}

func (g *guardFixture) exists(rel string, want bool) {
	g.t.Helper()
	_, err := os.Lstat(g.path(rel))
	if got := err == nil; got != want {
		g.t.Errorf("%s exists = %v, want %v", rel, got, want)
	}
}

func keys(m map[string]GitFinding) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

const initConfig = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"

func TestGitGuardLeavesWhatExistedAndWhatGitWrites(t *testing.T) {
	g := newGuard(t)
	// The user's own repository, with its own hook and fsmonitor: not the call's doing.
	g.repo(".git", initConfig+"\tfsmonitor = my-watcher\n")
	g.write(".git/hooks/pre-commit", "#!/bin/sh\n", 0o755)
	g.write(".git/commondir", "/somewhere/else\n", 0o644)
	g.snap()
	// What legitimate git does during the call: objects, refs, index, a linked worktree, a
	// submodule, a clone with its remote, a new repository with its sample hooks.
	g.write(".git/objects/ab/cdef", "blob", 0o444)
	g.write(".git/refs/heads/main", "0123\n", 0o644)
	g.write(".git/index", "DIRC", 0o644)
	g.write(".git/worktrees/wt/HEAD", "ref: refs/heads/wt\n", 0o644)
	g.write(".git/worktrees/wt/commondir", "../..\n", 0o644)
	g.write(".git/worktrees/wt/gitdir", g.path("wt/.git")+"\n", 0o644)
	g.write("wt/.git", "gitdir: "+g.path(".git/worktrees/wt")+"\n", 0o644)
	g.repo(".git/modules/sub", initConfig+"\tworktree = ../../../sub\n")
	g.write("sub/.git", "gitdir: ../.git/modules/sub\n", 0o644)
	g.repo("clone/.git", initConfig+"[remote \"origin\"]\n\turl = /src\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n")
	g.write("clone/.git/hooks/pre-commit.sample", "#!/bin/sh\n", 0o755)
	g.write(".git/rebase-merge/git-rebase-todo", "pick 0123 x\n", 0o644)
	if found := g.check(); len(found) > 0 {
		t.Fatalf("neutralised %v", found)
	}
	g.exists(".git/hooks/pre-commit", true)
	g.exists(".git/commondir", true)
}

func TestGitGuardNeutralisesWhatTheCallWrote(t *testing.T) {
	g := newGuard(t)
	g.repo(".git", initConfig)
	outside := realTemp(t)
	write(t, filepath.Join(outside, "repo/HEAD"), "ref: refs/heads/main\n", 0o644)
	write(t, filepath.Join(outside, "repo/hooks/pre-commit"), "#!/bin/sh\n", 0o755)
	g.snap()

	g.write(".git/commondir", outside+"/repo\n", 0o644)          // a git dir outside the root
	g.write(".git/info/attributes", "* filter=x\n", 0o644)       // drivers
	g.repo("a/.evil", initConfig+"\tfsmonitor = x\n")            // a bare skeleton …
	g.write("a/.git", "gitdir: .evil\n", 0o644)                  // … a gitfile to it (kept) …
	g.write("a/.evil/hooks/post-checkout", "#!/bin/sh\n", 0o755) // … its hook
	g.write("a/.evil/hooks/ok.sample", "#!/bin/sh\n", 0o755)     // (a sample is never run)
	g.write("b/.git", "gitdir: ../nowhere\n", 0o644)             // a gitfile to nothing
	g.write("c/.git", "gitdir: ../a/.evil\nextra\n", 0o644)      // not a plain gitfile
	must(t, os.Mkdir(g.path("d"), 0o755))
	must(t, os.Symlink(filepath.Join(outside, "repo"), g.path("d/.git")))                           // a symlinked .git
	must(t, os.Symlink("a", g.path("link")))                                                        // a link on the way …
	g.write("e/.git", "gitdir: ../link/.evil\n", 0o644)                                             // … is refused
	g.repo("f/.git", initConfig)                                                                    // a new repository …
	g.write("f/.git/config.worktree", "[core]\n\tfsmonitor = x\n", 0o644)                           // … its config.worktree
	must(t, os.Symlink(filepath.Join(outside, "repo/hooks"), g.path("f/.git/hooks")))               // … a hooks link
	g.write(".git/rebase-merge/git-rebase-todo", "pick 0123 x\nexec touch /x\n", 0o644)             // an exec line
	g.write(".git/commondir.clihost-quarantined", "taken", 0o644)                                   // (a name in use)
	g.write(".git/worktrees/w/HEAD", "ref: refs/heads/w\n", 0o644)                                  // a worktree whose
	g.write(".git/worktrees/w/config.worktree", "[core]\n\tpager = x\n[user]\n\tname = n\n", 0o644) // config.worktree
	g.write(".git/worktrees/w/commondir", "../..\n", 0o644)

	found := g.check()
	want := []string{".git/commondir", ".git/info/attributes", ".git/rebase-merge/git-rebase-todo", ".git/worktrees/w/config.worktree",
		"a/.evil/config", "a/.evil/hooks/post-checkout", "b/.git", "c/.git", "d/.git", "e/.git", "f/.git/config.worktree", "f/.git/hooks"}
	if got := keys(found); !slices.Equal(got, want) {
		t.Fatalf("neutralised %q, want %q", got, want)
	}
	for _, rel := range []string{"a/.git", "a/.evil/hooks/ok.sample", "f/.git/config", "link"} {
		g.exists(rel, true)
	}
	for rel, f := range found {
		wantAction := "quarantined"
		if strings.HasSuffix(rel, "config") || strings.HasSuffix(rel, "config.worktree") {
			wantAction = "rewritten"
		}
		if f.Action != wantAction || !strings.HasPrefix(f.Moved, f.Path+quarantineSuffix) {
			t.Errorf("%s: %+v", rel, f)
		}
	}
	// The config keeps what git writes; the original is kept, owner-only.
	cfg, _ := os.ReadFile(g.path("a/.evil/config"))
	if string(cfg) != "[core]\n\trepositoryformatversion = 0\n\tbare = false\n" {
		t.Errorf("a/.evil/config rewritten as %q", cfg)
	}
	if st, err := os.Stat(g.path("a/.evil/config" + quarantineSuffix)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the quarantined config: %v %v", st, err)
	}
	if got := found[".git/commondir"].Moved; got != g.path(".git/commondir.clihost-quarantined.1") {
		t.Errorf("commondir moved to %s", got)
	}
	if got := found[".git/worktrees/w/config.worktree"].Dropped; !slices.Equal(got, []string{"core.pager"}) {
		t.Errorf("dropped %q", got)
	}
	// Nothing outside the root was touched through the links.
	if _, err := os.Stat(filepath.Join(outside, "repo/hooks/pre-commit")); err != nil {
		t.Errorf("the outside hook: %v", err)
	}
	// A second check finds nothing new: what was neutralised stays so, and nothing else moves.
	g.snap()
	if again := g.check(); len(again) > 0 {
		t.Errorf("second check neutralised %v", keys(again))
	}
}

func TestGitGuardChangedControlFiles(t *testing.T) {
	g := newGuard(t)
	g.repo("r/.git", initConfig)
	g.write("r/.git/hooks/pre-push", "#!/bin/sh\n", 0o644)
	g.snap()
	// The same content made executable is a change; so is a config edited in place.
	must(t, os.Chmod(g.path("r/.git/hooks/pre-push"), 0o755))
	g.write("r/.git/config", initConfig+"\tsshCommand = x\n", 0o644)
	if got := keys(g.check()); !slices.Equal(got, []string{"r/.git/config", "r/.git/hooks/pre-push"}) {
		t.Fatalf("neutralised %q", got)
	}
}

func TestGitGuardBudget(t *testing.T) {
	g := newGuard(t)
	for i := range 20 {
		g.write(filepath.Join("d", string(rune('a'+i))), "", 0o644)
	}
	g.p.Writable = []string{g.ws}
	if err := g.p.SnapshotGit(10); !errors.Is(err, ErrGitGuardBudget) {
		t.Fatalf("SnapshotGit over the budget: %v", err)
	}
	if err := g.p.SnapshotGit(100); err != nil {
		t.Fatal(err)
	}
	// The check after the call has no budget: a call cannot hide a repository behind many files.
	for i := range 200 {
		g.write(filepath.Join("e", strings.Repeat("x", i+1)), "", 0o644)
	}
	g.repo("e/z/.git", initConfig+"\tfsmonitor = x\n")
	if got := keys(g.check()); !slices.Equal(got, []string{"e/z/.git/config"}) {
		t.Fatalf("neutralised %q", got)
	}
}

func TestGitGuardDeepTrees(t *testing.T) {
	g := newGuard(t)
	g.snap()
	// A repository as deep as git can still work in is checked; beyond PATH_MAX, git cannot run.
	deep := ""
	for len(g.path(deep)) < 4000 {
		deep = filepath.Join(deep, "dddddddddddddddddddddddddddddddddddddddddddddddddd")
	}
	g.repo(filepath.Join(deep, ".git"), initConfig+"\tfsmonitor = x\n")
	if got := keys(g.check()); !slices.Equal(got, []string{filepath.Join(deep, ".git/config")}) {
		t.Fatalf("neutralised %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRunConfigsRisky(t *testing.T) {
	cases := []struct {
		parent, name, content string
		risky                 bool
	}{
		{"", ".npmrc", "registry=https://r/\n", false},
		{"", ".npmrc", "script-shell=/x\n", true},
		{"", ".npmrc", "  node_options = --require x\n", true},
		{"", ".yarnrc.yml", "nodeLinker: pnp\n", false},
		{"", ".yarnrc.yml", "yarnPath: .yarn/x.cjs\n", true},
		{"", ".yarnrc.yml", "plugins:\n  - path: x.cjs\n", true},
		{"", ".yarnrc", "yarn-path \"./x.js\"\n", true},
		{"", "rust-toolchain.toml", "[toolchain]\nchannel = \"1.80\"\n", false},
		{"", "rust-toolchain.toml", "[toolchain]\npath = \"/x\"\n", true},
		{".cargo", "config.toml", "[net]\nretry = 2\n", false},
		{".cargo", "config.toml", "[build]\nrustc-wrapper = \"x\"\n", true},
		{".cargo", "config.toml", "target.x86_64-unknown-linux-gnu.runner = \"x\"\n", true},
		{".cargo", "config.toml", "target = { x = { linker = \"x\" } }\n", true},
		{".cargo", "config", "[env]\nLD_PRELOAD = \"x\"\n", true},
		{"", "mise.toml", "[tools]\nnode = \"22\"\n", true},
		{"", ".pre-commit-config.yaml", "repos: []\n", true},
		{".hg", "hgrc", "[ui]\n", true},
	}
	for _, c := range cases {
		rc := runConfigFor(c.parent, c.name)
		if rc == nil {
			t.Fatalf("%s/%s is not a run config", c.parent, c.name)
		}
		if got := rc.risky([]byte(c.content)); got != c.risky {
			t.Errorf("%s/%s %q: risky = %v, want %v", c.parent, c.name, c.content, got, c.risky)
		}
	}
	for _, n := range [][2]string{{"", ".envrc"}, {"x", "config.toml"}, {"", "hgrc"}} {
		if runConfigFor(n[0], n[1]) != nil {
			t.Errorf("%s/%s is judged", n[0], n[1])
		}
	}
}

func TestGitGuardRunConfigs(t *testing.T) {
	g := newGuard(t)
	g.write(".npmrc", "script-shell=/mine\n", 0o644) // the owner's own: left alone
	g.snap()
	g.write("pkg/.npmrc", "script-shell=/x\n", 0o644)
	g.write(".cargo/config.toml", "[net]\nretry = 2\n", 0o644)
	g.write(".yarnrc.yml", "yarnPath: x\n", 0o644)
	found := g.check()
	if got := keys(found); !slices.Equal(got, []string{".yarnrc.yml", "pkg/.npmrc"}) {
		t.Fatalf("neutralised %q", got)
	}
	g.exists(".npmrc", true)
	g.exists(".cargo/config.toml", true)
}

func TestGitGuardGlobalConfigKeepsWhatItHeld(t *testing.T) {
	g := newGuard(t)
	g.p.gitGlobal = []string{g.path(".gitconfig"), g.path(".config/git/config"), g.path(".config/git/attributes")}
	mine := "[core]\n\teditor = vim\n[user]\n\tname = me\n"
	g.write(".gitconfig", mine, 0o644)
	g.snap()
	g.write(".gitconfig", mine+"[core]\n\tpager = evil\n", 0o644)
	g.write(".config/git/config", "[core]\n\tfsmonitor = evil\n", 0o644)
	found := g.check()
	if got := keys(found); !slices.Equal(got, []string{".config/git/config", ".gitconfig"}) {
		t.Fatalf("neutralised %q", got)
	}
	data, _ := os.ReadFile(g.path(".gitconfig"))
	if want := "[core]\n\teditor = vim\n[user]\n\tname = me\n"; string(data) != want {
		t.Errorf(".gitconfig rewritten as %q, want %q", data, want)
	}
	if got := found[".gitconfig"].Dropped; !slices.Equal(got, []string{"core.pager"}) {
		t.Errorf("dropped %q", got)
	}
}

func TestGitGuardWritableFileRoots(t *testing.T) {
	g := newGuard(t)
	gitconfig, npmrc := g.path(".gitconfig"), g.path("proj/.npmrc")
	g.p.gitGlobal = []string{gitconfig}
	g.write(".gitconfig", "[user]\n\tname = me\n", 0o644)
	g.write("proj/.npmrc", "registry=x\n", 0o644)
	g.p.Writable = []string{gitconfig, npmrc}
	if err := g.p.SnapshotGit(0); err != nil {
		t.Fatal(err)
	}
	g.write(".gitconfig", "[user]\n\tname = me\n[core]\n\tsshCommand = evil\n", 0o644)
	g.write("proj/.npmrc", "script-shell=evil\n", 0o644)
	if got := keys(g.check()); !slices.Equal(got, []string{".gitconfig", "proj/.npmrc"}) {
		t.Fatalf("neutralised %q", got)
	}
}

// BenchmarkGitGuard measures the snapshot and the check of a writable root of 50,000 files in 100
// directories next to a repository: the cost the git rule adds to every call on such a root.
// BenchmarkGitGuard is the git rule's cost on one writable root (the snapshot before a call and the
// check after it) for a small project and a large one, next to its floor measured in the same
// loop: two plain filepath.WalkDir walks of the same tree. It reports rule-ns/call, walk-ns/call
// and rule/walk.
func BenchmarkGitGuard(b *testing.B) {
	for _, size := range []struct {
		name        string
		dirs, files int
	}{{"1k", 10, 100}, {"50k", 100, 500}} {
		b.Run(size.name, func(b *testing.B) {
			ws := gitGuardBenchTree(b, size.dirs, size.files)
			p := &Policy{Writable: []string{ws}}
			var rule, walk time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				if err := p.SnapshotGit(0); err != nil {
					b.Fatal(err)
				}
				if _, _, err := Sweep(p); err != nil {
					b.Fatal(err)
				}
				rule += time.Since(start)
				start = time.Now()
				for range 2 {
					if err := filepath.WalkDir(ws, func(string, fs.DirEntry, error) error { return nil }); err != nil {
						b.Fatal(err)
					}
				}
				walk += time.Since(start)
				n++
			}
			b.ReportMetric(float64(rule.Nanoseconds())/float64(n), "rule-ns/call")
			b.ReportMetric(float64(walk.Nanoseconds())/float64(n), "walk-ns/call")
			b.ReportMetric(float64(rule)/float64(walk), "rule/walk")
		})
	}
}

// gitGuardBenchTree makes a repository with dirs×files empty work-tree files.
func gitGuardBenchTree(b *testing.B, dirs, files int) string {
	ws := b.TempDir()
	for d := range dirs {
		dir := filepath.Join(ws, "src", strconv.Itoa(d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range files {
			if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(f)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, p := range []string{".git/HEAD", ".git/config", ".git/objects/.keep", ".git/refs/.keep", ".git/hooks/pre-commit.sample"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

func TestGitPolicyJudgesTheHomesGitConfig(t *testing.T) {
	home := realTemp(t)
	write(t, filepath.Join(home, ".gitconfig"), "[user]\n\tname = me\n", 0o644)
	p := GitPolicy([]string{home}, home)
	if err := p.SnapshotGit(0); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(home, ".gitconfig"), "[user]\n\tname = me\n[core]\n\tpager = evil\n", 0o644)
	_, found, err := Sweep(p)
	if err != nil || len(found) != 1 || found[0].Path != filepath.Join(home, ".gitconfig") {
		t.Fatalf("found %+v, %v", found, err)
	}
}

func TestGitGuardPutsBackWhatTheCallChanged(t *testing.T) {
	g := newGuard(t)
	outside := realTemp(t)
	write(t, filepath.Join(outside, "repo/.git/worktrees/wt/HEAD"), "ref: refs/heads/wt\n", 0o644)
	g.repo(".git", initConfig)
	// The owner's own: a worktree of a repository elsewhere, attributes, a symlinked .git.
	gitfile := "gitdir: " + filepath.Join(outside, "repo/.git/worktrees/wt") + "\n"
	g.write("wt/.git", gitfile, 0o644)
	g.write(".git/info/attributes", "*.bin binary\n", 0o640)
	must(t, os.Mkdir(g.path("ln"), 0o755))
	must(t, os.Symlink(filepath.Join(outside, "repo/.git"), g.path("ln/.git")))
	g.snap()
	g.write("wt/.git", "gitdir: /etc\n", 0o644)
	g.write(".git/info/attributes", "* filter=x\n", 0o644)
	must(t, os.Remove(g.path("ln/.git")))
	must(t, os.Symlink("/etc", g.path("ln/.git")))
	found := g.check()
	if got := keys(found); !slices.Equal(got, []string{".git/info/attributes", "ln/.git", "wt/.git"}) {
		t.Fatalf("neutralised %q", got)
	}
	for rel, f := range found {
		if f.Action != "restored" {
			t.Errorf("%s: %+v", rel, f)
		}
	}
	if data, _ := os.ReadFile(g.path("wt/.git")); string(data) != gitfile {
		t.Errorf("wt/.git is %q", data)
	}
	if st, err := os.Stat(g.path(".git/info/attributes")); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("attributes: %v %v", st, err)
	}
	if target, _ := os.Readlink(g.path("ln/.git")); target != filepath.Join(outside, "repo/.git") {
		t.Errorf("ln/.git → %s", target)
	}
}

// TestGitGuardLeavesRealGitAlone runs the real git through what tools do in a writable root —
// init, commit, clones (bare, partial), a linked worktree, a submodule, sparse checkout, a stopped
// rebase, local config — and expects the check to find nothing to neutralise.
func TestGitGuardLeavesRealGitAlone(t *testing.T) {
	fx.Need(t, "git")
	g := newGuard(t)
	g.snap()
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=a", "-c", "user.email=a@example.com", "-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = g.path(dir)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + g.path("home"), "GIT_CONFIG_NOSYSTEM=1", "GIT_EDITOR=true"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	must(t, os.MkdirAll(g.path("home"), 0o755))
	must(t, os.MkdirAll(g.path("src"), 0o755))
	run("src", "init", "-q")
	g.write("src/a.txt", "one\n", 0o644)
	run("src", "add", "a.txt")
	run("src", "commit", "-q", "-m", "one")
	run(".", "clone", "-q", g.path("src"), "clone")
	run(".", "clone", "-q", "--bare", g.path("src"), "mirror.git")
	run(".", "-c", "uploadpack.allowFilter=true", "clone", "-q", "--filter=blob:none", "file://"+g.path("src"), "partial")
	run("partial", "config", "pull.rebase", "false")
	run("clone", "config", "user.name", "me")
	run("clone", "remote", "add", "up", "https://example.com/r.git")
	run("clone", "worktree", "add", "-q", g.path("wt"))
	run("clone", "submodule", "add", "-q", g.path("src"), "sub")
	run("clone", "commit", "-q", "-m", "sub")
	run("clone", "sparse-checkout", "set", "--no-cone", "a.txt")
	run("clone", "sparse-checkout", "disable")
	g.write("clone/b.txt", "x\n", 0o644)
	run("clone", "add", "b.txt")
	run("clone", "commit", "-q", "-m", "two")
	g.write("clone/b.txt", "y\n", 0o644)
	run("clone", "commit", "-q", "-am", "three")
	cmd := exec.Command("git", "-c", "user.name=a", "-c", "user.email=a@example.com", "rebase", "-q", "-i", "HEAD~2")
	cmd.Dir, cmd.Env = g.path("clone"), []string{"PATH=/usr/bin:/bin", "HOME=" + g.path("home"), "GIT_SEQUENCE_EDITOR=sed -i 1s/^pick/edit/"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git rebase: %v\n%s", err, out)
	}
	if found := g.check(); len(found) > 0 {
		for rel, f := range found {
			t.Errorf("%s: %+v", rel, f)
		}
	}
}

func TestGitGuardHooksOutsideTheGitDirectory(t *testing.T) {
	g := newGuard(t)
	g.p.gitGlobal = []string{g.path(".gitconfig")}
	// The owner's own settings: a repository whose hooks/ is a link into the work tree, one with
	// core.hooksPath (husky's layout), and a per-user hooksPath under ~.
	g.repo("a/.git", initConfig)
	g.write("a/githooks/pre-commit", "#!/bin/sh\n", 0o755)
	must(t, os.Symlink("../githooks", g.path("a/.git/hooks")))
	g.repo("b/.git", initConfig+"\thooksPath = .husky/_\n")
	g.write("b/.husky/_/pre-commit", "#!/bin/sh\n", 0o755)
	g.write(".gitconfig", "[core]\n\thooksPath = ~/.hooks\n", 0o644)
	must(t, os.MkdirAll(g.path(".hooks"), 0o755))
	g.snap()
	g.write("a/githooks/post-checkout", "#!/bin/sh\nevil\n", 0o755)
	g.write("b/.husky/_/pre-commit", "#!/bin/sh\nevil\n", 0o755)
	g.write(".hooks/pre-push", "#!/bin/sh\nevil\n", 0o755)
	g.write("b/.husky/_/pre-push.sample", "#!/bin/sh\n", 0o755)
	found := g.check()
	if got := keys(found); !slices.Equal(got, []string{".hooks/pre-push", "a/githooks/post-checkout", "b/.husky/_/pre-commit"}) {
		t.Fatalf("neutralised %q", got)
	}
	if f := found["b/.husky/_/pre-commit"]; f.Action != "restored" {
		t.Errorf("the changed husky hook: %+v", f)
	}
}

func TestGitGuardPerUserHooksPathWithoutARepository(t *testing.T) {
	g := newGuard(t)
	g.p.gitGlobal = []string{g.path(".gitconfig")}
	g.write(".gitconfig", "[core]\n\thooksPath = ~/.hooks\n", 0o644)
	must(t, os.MkdirAll(g.path(".hooks"), 0o755))
	g.snap()
	g.write(".hooks/pre-commit", "#!/bin/sh\nevil\n", 0o755)
	if got := keys(g.check()); !slices.Equal(got, []string{".hooks/pre-commit"}) {
		t.Fatalf("neutralised %q", got)
	}
}

// TestGitGuardLargeControlFile: a control file larger than the guard reads (1 MiB of comments,
// then core.fsmonitor) must not pass as the clean prefix it starts with: it is moved aside whole.
func TestGitGuardLargeControlFile(t *testing.T) {
	g := newGuard(t)
	g.snap()
	padding := strings.Repeat("# padding padding padding padding padding padding padding padding\n", (maxControlRead/64)+1)
	g.repo(".git", initConfig)
	g.write(".git/config", initConfig+padding+"[core]\n\tfsmonitor = /evil\n", 0o644)
	g.write(".npmrc", padding+"script-shell=/evil\n", 0o644)
	found := g.check()
	if got, want := keys(found), []string{".git/config", ".npmrc"}; !slices.Equal(got, want) {
		t.Fatalf("neutralised %q, want %q", got, want)
	}
	for _, rel := range []string{".git/config", ".npmrc"} {
		if f := found[rel]; !strings.Contains(f.Why, "larger than") {
			t.Errorf("%s: %+v", rel, f)
		}
	}
	g.exists(".git/config", false)
}

// TestGitGuardIncludedConfigs: a file a config includes (include.path, includeIf.*.path; relative
// to the including file, ~/ from the home, recursively) is judged as a config when a writable root
// holds it, although no walk finds it as a control file: it keeps what it held and loses what the
// call added; a link on the way to it, new, is moved aside; and a path the call adds an include
// for is not judged (the include itself is dropped).
func TestGitGuardIncludedConfigs(t *testing.T) {
	g := newGuard(t)
	g.p.gitGlobal = []string{g.path("home/.gitconfig")}
	g.repo("r/.git", initConfig+"[include]\n\tpath = ../shared.gitconfig\n[includeIf \"gitdir:/\"]\n\tpath = ../cond.gitconfig\n"+
		"[include]\n\tpath = ../viaLink/x.gitconfig\n[include]\n\tpath = ../ownersLink/y.gitconfig\n")
	must(t, os.Symlink("dots", g.path("r/ownersLink"))) // the owner's link to an include
	g.write("r/dots/y.gitconfig", "[user]\n\temail = me@example.com\n", 0o644)
	g.write("r/shared.gitconfig", "[user]\n\tname = me\n[include]\n\tpath = nested/deeper.gitconfig\n", 0o644)
	g.write("r/nested/deeper.gitconfig", "[alias]\n\tst = status\n", 0o644)
	g.write("home/.gitconfig", "[include]\n\tpath = ~/dotfiles/extra\n", 0o644)
	g.write("home/dotfiles/extra", "[core]\n\teditor = vim\n", 0o644)
	must(t, os.MkdirAll(g.path("elsewhere"), 0o755))
	g.write("README.md", "# project\n", 0o644)
	g.snap()
	g.write("r/shared.gitconfig", "[user]\n\tname = me\n[include]\n\tpath = nested/deeper.gitconfig\n[core]\n\tfsmonitor = evil\n", 0o644)
	g.write("r/nested/deeper.gitconfig", "[alias]\n\tst = status\n[core]\n\tsshCommand = evil\n", 0o644)
	g.write("r/cond.gitconfig", "[core]\n\tpager = evil\n", 0o644)
	g.write("home/dotfiles/extra", "[core]\n\teditor = vim\n\tfsmonitor = evil\n", 0o644)
	must(t, os.Symlink("elsewhere", g.path("r/viaLink")))
	g.write("elsewhere/x.gitconfig", "[core]\n\tfsmonitor = evil\n", 0o644)
	g.write("r/dots/y.gitconfig", "[user]\n\temail = me@example.com\n[core]\n\tfsmonitor = evil\n", 0o644)
	// A new include in the repository's config: dropped with it, and README.md is left alone.
	g.write("r/.git/config", initConfig+"[include]\n\tpath = ../shared.gitconfig\n[includeIf \"gitdir:/\"]\n\tpath = ../cond.gitconfig\n"+
		"[include]\n\tpath = ../viaLink/x.gitconfig\n[include]\n\tpath = ../ownersLink/y.gitconfig\n[include]\n\tpath = ../../README.md\n", 0o644)
	found := g.check()
	want := []string{"home/dotfiles/extra", "r/.git/config", "r/cond.gitconfig", "r/dots/y.gitconfig", "r/nested/deeper.gitconfig", "r/shared.gitconfig", "r/viaLink"}
	if got := keys(found); !slices.Equal(got, want) {
		t.Fatalf("neutralised %q, want %q", got, want)
	}
	for rel, content := range map[string]string{
		"r/shared.gitconfig":        "[user]\n\tname = me\n[include]\n\tpath = nested/deeper.gitconfig\n",
		"r/nested/deeper.gitconfig": "[alias]\n\tst = status\n",
		"r/cond.gitconfig":          "",
		"home/dotfiles/extra":       "[core]\n\teditor = vim\n",
		"r/dots/y.gitconfig":        "[user]\n\temail = me@example.com\n",
		"README.md":                 "# project\n",
	} {
		if data, err := os.ReadFile(g.path(rel)); err != nil || string(data) != content {
			t.Errorf("%s: %q %v, want %q", rel, data, err, content)
		}
	}
	if f := found["r/viaLink"]; f.Action != "quarantined" {
		t.Errorf("the link on the way to an include: %+v", f)
	}
	g.exists("r/viaLink", false)
}

// TestGitGuardIncludeDepth: includes are followed as deep as git follows them (10), no deeper, and
// a loop ends.
func TestGitGuardIncludeDepth(t *testing.T) {
	g := newGuard(t)
	g.repo(".git", initConfig+"[include]\n\tpath = ../i0\n")
	for i := range 12 {
		g.write("i"+strconv.Itoa(i), "[include]\n\tpath = i"+strconv.Itoa(i+1)+"\n[include]\n\tpath = i0\n", 0o644)
	}
	g.snap()
	for i := range 12 {
		g.write("i"+strconv.Itoa(i), "[include]\n\tpath = i"+strconv.Itoa(i+1)+"\n[include]\n\tpath = i0\n[core]\n\tpager = x\n", 0o644)
	}
	var want []string
	for i := range maxIncludeDepth {
		want = append(want, "i"+strconv.Itoa(i))
	}
	slices.Sort(want)
	if got := keys(g.check()); !slices.Equal(got, want) {
		t.Fatalf("neutralised %q, want %q", got, want)
	}
}

// TestGitGuardHooksPathThroughALink: a hooks directory reached through a symbolic link
// (core.hooksPath naming a path with a link on the way) is not followed after the call: a link the
// call created or changed on the way is neutralised itself, and nothing is read through it; the
// directory the owner's link led to before the call is judged at its own path.
func TestGitGuardHooksPathThroughALink(t *testing.T) {
	g := newGuard(t)
	g.repo("b/.git", initConfig+"\thooksPath = via/hooks\n")
	must(t, os.MkdirAll(g.path("b/real/hooks"), 0o755))
	must(t, os.MkdirAll(g.path("b/other/hooks"), 0o755))
	g.write("b/other/hooks/pre-commit", "#!/bin/sh\nmine\n", 0o755)
	must(t, os.Symlink("real", g.path("b/via")))
	g.snap()
	// The call writes a hook where the owner's link leads, and repoints the link at a directory
	// of hooks it chose.
	g.write("b/real/hooks/post-checkout", "#!/bin/sh\nevil\n", 0o755)
	must(t, os.Remove(g.path("b/via")))
	must(t, os.Symlink("other", g.path("b/via")))
	found := g.check()
	if got := keys(found); !slices.Equal(got, []string{"b/real/hooks/post-checkout", "b/via"}) {
		t.Fatalf("neutralised %q", got)
	}
	if f := found["b/via"]; f.Action != "restored" {
		t.Errorf("the repointed link: %+v", f)
	}
	if target, err := os.Readlink(g.path("b/via")); err != nil || target != "real" {
		t.Errorf("b/via → %q %v, want the owner's link back", target, err)
	}
	g.exists("b/other/hooks/pre-commit", true)
}

// agentChild is a copy of this test binary running one test as agentUID, driven step by step: the
// child prints a step's name and waits for a line on its standard input before going on.
type agentChild struct {
	t     *testing.T
	test  string
	proc  *fx.Proc
	stdin io.Writer
	lines *bufio.Scanner
	log   strings.Builder
}

// startAgentChild copies this test binary into base (which agentUID can reach) and starts the test
// named test in it as agentUID, with env (and PATH) as its environment.
func startAgentChild(t *testing.T, base, test string, env ...string) *agentChild {
	t.Helper()
	bin := filepath.Join(base, "sandbox.test")
	data, err := os.ReadFile(os.Args[0])
	must(t, err)
	must(t, os.WriteFile(bin, data, 0o755))
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(env, "PATH=/usr/bin:/bin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: agentUID, Gid: agentUID}}
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	return &agentChild{t: t, test: test, proc: fx.Start(t, cmd), stdin: stdin, lines: bufio.NewScanner(stdout)}
}

// await reads the child's output up to the line step, runs next, then lets the child go on.
func (c *agentChild) await(step string, next func()) {
	c.t.Helper()
	for c.lines.Scan() {
		c.log.WriteString(c.lines.Text() + "\n")
		if c.lines.Text() == step {
			next()
			_, err := c.stdin.Write([]byte("go\n"))
			must(c.t, err)
			return
		}
	}
	c.t.Fatalf("the unprivileged child ended before %q:\n%s", step, c.log.String())
}

// wait reads the rest of the child's output and fails the test unless the child's test ran and
// passed (a child that skipped, say without its environment, exits 0 too).
func (c *agentChild) wait() {
	c.t.Helper()
	for c.lines.Scan() {
		c.log.WriteString(c.lines.Text() + "\n")
	}
	err := c.proc.Wait()
	c.t.Logf("the unprivileged child:\n%s", c.log.String())
	if err != nil || !strings.Contains(c.log.String(), "--- PASS: "+c.test+" ") {
		c.t.Fatalf("the unprivileged child did not pass %s: %v", c.test, err)
	}
}

// unprivilegedChild names the environment variable that makes TestGitGuardUnprivilegedChild the
// child of TestGitGuardUnreadableDirectories: the workspace it checks.
const unprivilegedChild = "CLIHOST_GITGUARD_CHILD_WS"

// TestGitGuardUnreadableDirectories: clihost not running as root checks a workspace of its own
// user, and a call (the same uid: Landlock does not control chmod) writes a commondir to a
// skeleton, a gitfile, and a hook, then makes the directories holding them unreadable (0311:
// git, run by the owner, needs only search permission). The check makes them readable again
// and judges what is in them; a directory it can neither read nor make readable but that the
// same uid can enter is moved aside. The guard runs as the real unprivileged uid: a copy of this
// test binary re-executed as AgentUID (TestGitGuardUnprivilegedChild), which owns the workspace;
// then the owner's real git must not run the program the call chose.
func TestGitGuardUnreadableDirectories(t *testing.T) {
	fx.NeedRoot(t) // to run the guard as another, unprivileged uid
	fx.Need(t, "git")
	base := agentDir(t)
	ws := filepath.Join(base, "ws")
	marker := filepath.Join(base, "ran")
	g := &guardFixture{t: t, ws: ws}
	g.repo(".git", initConfig)
	g.repo("r/.git", initConfig)
	must(t, os.MkdirAll(g.path("p/q"), 0o755))
	g.write("root-owned/keep", "", 0o644) // root's: the agent may enter it at most
	must(t, os.MkdirAll(g.path("closed"), 0o700))
	g.write("closed/.git", "gitdir: x\n", 0o644) // root's, 0700: the agent cannot enter it at all
	giveTree(t, ws, "root-owned", "closed")
	must(t, os.Chmod(g.path("root-owned"), 0o711))
	child := startAgentChild(t, base, "TestGitGuardUnprivilegedChild", unprivilegedChild+"="+ws, "MARK=touch "+marker+"; :")
	// The snapshot refuses root-owned (it can be entered, not listed, not made listable); once it
	// is readable, the snapshot passes; during the call it becomes unlistable again.
	child.await("STEP refused", func() { must(t, os.Chmod(g.path("root-owned"), 0o755)) })
	child.await("STEP called", func() { must(t, os.Chmod(g.path("root-owned"), 0o711)) })
	child.wait()
	for _, dir := range [][]string{{"."}, {"p/q"}, {"r", "-c", "user.name=o", "-c", "user.email=o@example.com", "commit", "-q", "--allow-empty", "-m", "x"}} {
		args := dir[1:]
		if len(args) == 0 {
			args = []string{"status"}
		}
		c := exec.Command("git", args...)
		c.Dir, c.Env = g.path(dir[0]), []string{"PATH=/usr/bin:/bin", "HOME=" + base, "GIT_CONFIG_NOSYSTEM=1"}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: agentUID, Gid: agentUID}}
		gout, _ := c.CombinedOutput()
		t.Logf("owner: git %q in %s: %s", args, dir[0], gout)
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("the owner's git %q in %s ran the program the call chose", args, dir[0])
		}
	}
	for rel, want := range map[string]os.FileMode{".git": 0o711, "p": 0o711, "r/.git/hooks": 0o711} {
		if st, err := os.Lstat(g.path(rel)); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %o", rel, st, err, want)
		}
	}
	g.exists("root-owned", false)
	g.exists("root-owned"+quarantineSuffix, true)
	g.exists("closed/.git", true)
}

// TestGitGuardUnprivilegedChild is the unprivileged half of TestGitGuardUnreadableDirectories.
func TestGitGuardUnprivilegedChild(t *testing.T) {
	ws := os.Getenv(unprivilegedChild)
	if ws == "" {
		t.Skip("run by TestGitGuardUnreadableDirectories")
	}
	g := &guardFixture{t: t, ws: ws, p: GitPolicy([]string{ws}, "/nonexistent")}
	stdin := bufio.NewScanner(os.Stdin)
	step := func(name string) {
		fmt.Println("STEP " + name)
		if !stdin.Scan() {
			t.Fatal("no go-ahead")
		}
	}
	if err := g.p.SnapshotGit(0); !errors.Is(err, errDirUnreadable) || !strings.Contains(err.Error(), g.path("root-owned")) {
		t.Errorf("the snapshot with an unlistable directory the agent can enter: %v", err)
	}
	step("refused")
	if err := g.p.SnapshotGit(0); err != nil {
		t.Fatal(err)
	}
	fsmonitor := "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"" + os.Getenv("MARK") + "\"\n"
	// The call: a commondir to a skeleton inside .git, then .git made unreadable.
	g.repo(".git/evil", fsmonitor)
	g.write(".git/commondir", "evil\n", 0o644)
	must(t, os.Chmod(g.path(".git"), 0o311))
	// A gitfile to a skeleton, in a directory made unreadable.
	g.repo("p/q/.e", fsmonitor)
	g.write("p/q/.git", "gitdir: .e\n", 0o644)
	must(t, os.Chmod(g.path("p"), 0o311))
	// A hook, in a hooks directory made unreadable.
	g.write("r/.git/hooks/pre-commit", "#!/bin/sh\n"+os.Getenv("MARK")+"\n", 0o755)
	must(t, os.Chmod(g.path("r/.git/hooks"), 0o311))
	// root-owned becomes 0711 (the parent does it): the guard cannot list it nor make it
	// listable, and the same uid can enter it, so it is moved aside.
	step("called")
	found := g.check()
	for _, rel := range keys(found) {
		t.Logf("%s: %+v", rel, found[rel])
	}
	for _, rel := range []string{".git", ".git/evil/config", "p", "p/q/.e/config", "r/.git/hooks", "r/.git/hooks/pre-commit", "root-owned"} {
		if _, ok := found[rel]; !ok {
			t.Errorf("nothing reported for %s", rel)
		}
	}
	if f := found[".git"]; f.Action != "made readable" {
		t.Errorf(".git: %+v", f)
	}
	if f := found["root-owned"]; f.Action != "quarantined" {
		t.Errorf("root-owned: %+v", f)
	}
}

// agentUID is who TestGitGuardUnreadableDirectories runs the guard as (fixture.AgentID, which this
// package's tests cannot import).
const agentUID = 65534

// agentDir returns a directory outside /tmp's private test directories, which agentUID can reach.
func agentDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "clihost-gitguard-")
	must(t, err)
	t.Cleanup(func() {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
		os.RemoveAll(dir)
	})
	must(t, os.Chmod(dir, 0o777))
	return dir
}

// giveTree hands ws to agentUID, but for the top-level entries of ws named in keep.
func giveTree(t *testing.T, ws string, keep ...string) {
	t.Helper()
	must(t, filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(ws, p); slices.Contains(keep, strings.SplitN(rel, "/", 2)[0]) {
			return nil
		}
		return os.Lchown(p, agentUID, agentUID)
	}))
}

// TestGitGuardHooksPathInAnIncludedFile: a core.hooksPath the owner set in an included file (a
// team's shared .gitconfig in the work tree, say) names a hook directory like the repository's own
// config would: a hook the call writes there is moved aside.
func TestGitGuardHooksPathInAnIncludedFile(t *testing.T) {
	g := newGuard(t)
	g.repo("r/.git", initConfig+"[include]\n\tpath = ../.gitconfig\n")
	g.write("r/.gitconfig", "[core]\n\thooksPath = .githooks\n", 0o644)
	g.write("r/.githooks/pre-commit", "#!/bin/sh\nmine\n", 0o755)
	g.snap()
	g.write("r/.githooks/post-checkout", "#!/bin/sh\nevil\n", 0o755)
	if got := keys(g.check()); !slices.Equal(got, []string{"r/.githooks/post-checkout"}) {
		t.Fatalf("neutralised %q", got)
	}
	g.exists("r/.githooks/pre-commit", true)
}
