package main

import (
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// complete runs `clihostctl __complete args…` (what the shell scripts run) and returns the
// candidates (without descriptions) and the directive line.
func complete(t *testing.T, args ...string) (cands []string, directive string) {
	t.Helper()
	ios, out, errOut := testStreams("")
	if code := run(append([]string{"__complete"}, args...), newGlobalOptions(ios)); code != 0 {
		t.Fatalf("__complete %q: exit %d stderr %s", args, code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(line, ":") {
			directive = line
			continue
		}
		name, _, _ := strings.Cut(line, "\t")
		cands = append(cands, name)
	}
	return cands, directive
}

func has(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, l := range list {
			found = found || l == w
		}
		if !found {
			return false
		}
	}
	return true
}

// TestCompleteBundlesAndTools: BUNDLE arguments complete to the catalog's and the local folders'
// bundles, and call's TOOL to the chosen bundle's tools in their dotted form; no file names.
func TestCompleteBundlesAndTools(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock") // no daemon: the local bundles only
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--socket", sock, "call", "j"}, []string{"jq"}},
		{[]string{"--socket", sock, "inspect", "g"}, []string{"gh", "git"}},
		{[]string{"--socket", sock, "status", ""}, []string{"gh", "jq", "git"}},
		{[]string{"--socket", sock, "--bundles", "testdata/tree", "tools", "m"}, []string{"mini"}},
		{[]string{"--socket", sock, "call", "gh", "pr."}, []string{"pr.list", "pr.view"}},
		{[]string{"--socket", sock, "--bundles", "testdata/tree", "call", "mini", ""}, []string{"run"}},
	} {
		cands, dir := complete(t, tc.args...)
		if !has(cands, tc.want...) || dir != ":4" {
			t.Errorf("%q: %q %s, want %q and no files (:4)", tc.args, cands, dir, tc.want)
		}
		prefix := tc.args[len(tc.args)-1]
		for _, c := range cands {
			if !strings.HasPrefix(c, prefix) {
				t.Errorf("%q: candidate %q does not start with %q", tc.args, c, prefix)
			}
		}
	}
	if cands, _ := complete(t, "--socket", sock, "call", "gh", "pr.list", ""); len(cands) != 0 {
		t.Errorf("a third argument completes to %q, want nothing", cands)
	}
}

// TestCompleteDaemonBundles: a bundle only the running daemon serves is offered too.
func TestCompleteDaemonBundles(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `[{"key":"onlyindaemon@2","install":"ok","setup":"none","auth":"none","ready":true}]`)
	})
	sock := fakeDaemon(t, mux)
	if cands, _ := complete(t, "--socket", sock, "install", "only"); !has(cands, "onlyindaemon") {
		t.Errorf("candidates %q lack the daemon's bundle", cands)
	}
}

// TestCompleteFlagValues: --format completes to its words, --workspace and --bundles to folders.
func TestCompleteFlagValues(t *testing.T) {
	if cands, dir := complete(t, "lint", "--format", ""); !has(cands, "text", "json", "sarif", "github") || dir != ":4" {
		t.Errorf("lint --format: %q %s", cands, dir)
	}
	if cands, _ := complete(t, "lint", "--format", "s"); len(cands) != 1 || cands[0] != "sarif" {
		t.Errorf("lint --format s: %q, want sarif", cands)
	}
	if cands, _ := complete(t, "output", "parse", "--format", ""); !has(cands, "text", "json", "stream-json") {
		t.Errorf("output parse --format: %q", cands)
	}
	for _, args := range [][]string{{"call", "--workspace", ""}, {"--bundles", ""}, {"status", "--bundles", ""}, {"new", "x", "--dir", ""}, {"schema", "--out", ""}} {
		if _, dir := complete(t, args...); dir != ":16" {
			t.Errorf("%q: directive %s, want folders (:16)", args, dir)
		}
	}
}

// TestEveryFormatFlagCompletes: a --format or --color flag added later without its words fails here.
func TestEveryFormatFlagCompletes(t *testing.T) {
	root := newRootCmd(newGlobalOptions(systemStreams()))
	walk(root, func(cmd *cobra.Command) {
		for _, name := range []string{"format", "color"} {
			if cmd.LocalNonPersistentFlags().Lookup(name) == nil {
				continue
			}
			if _, ok := cmd.GetFlagCompletionFunc(name); !ok {
				t.Errorf("%s --%s has no completion: add its words to flagWords", cmd.CommandPath(), name)
			}
		}
	})
}

// TestLintFormatWordsAreTheWriters: lint --format completes to exactly the formats lint accepts
// (gitlab was added to lintWriters but not to the completion words).
func TestLintFormatWordsAreTheWriters(t *testing.T) {
	cands, _ := complete(t, "lint", "--format", "")
	want := slices.Sorted(maps.Keys(lintWriters))
	if !slices.Equal(slices.Sorted(slices.Values(cands)), want) {
		t.Errorf("lint --format completes to %q, lint accepts %q", cands, want)
	}
}

// TestCompletionScripts: each shell's script is printed and asks clihostctl __complete.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		ios, out, errOut := testStreams("")
		if code := run([]string{"completion", shell}, newGlobalOptions(ios)); code != 0 || !strings.Contains(out.String(), "__complete") {
			t.Errorf("completion %s: exit %d stderr %q, script without __complete", shell, code, errOut)
		}
	}
}

// TestCompleteHostileDaemon: a daemon that answers slowly delays completion by at most the
// timeout (the local bundles still come), and names that would inject candidates (a newline, a
// tab, escapes) are dropped.
func TestCompleteHostileDaemon(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `[{"key":"ok-bundle"},{"key":"evil\nrm -rf ~"},{"key":"tab\tdesc"},{"key":"esc\u001b[31m"},{"key":""}]`)
	})
	sock := fakeDaemon(t, mux)
	cands, _ := complete(t, "--socket", sock, "status", "")
	if !has(cands, "ok-bundle", "jq") {
		t.Errorf("candidates %q lack ok-bundle or the catalog", cands)
	}
	for _, c := range cands {
		if !isWord(c) {
			t.Errorf("candidate %q reached the shell", c)
		}
	}

	slow := http.NewServeMux()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	sock = fakeDaemon(t, slow)
	start := time.Now()
	cands, _ = complete(t, "--socket", sock, "install", "j")
	if d := time.Since(start); d > 10*time.Second || !has(cands, "jq") {
		t.Errorf("a daemon that never answers: %q after %v", cands, d)
	}
}

// TestCompleteHostileBundle: a bundle of a cloned repository's .cli whose description and tool
// name carry terminal escapes and line breaks cannot reach the shell with them.
func TestCompleteHostileBundle(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"evil/CLI.md": "---\nname: Evil\nid: evil\ndescription: \"Evil\\u001b]0;pwned\\u0007 bundle.\\ninjected\\tcandidate\"\nversion: 1.0.0\nbin: evil\n" +
			"sandbox:\n  network: { egress: [] }\n  fs: { read: [], write: [] }\n  exec: { allow: false }\n  env: { pass: [] }\ncommands:\n  run: ./tools/run/TOOL.md\n---\n",
		"evil/tools/run/TOOL.md": "---\nname: \"Run\\u001b[2J\\ninjected\"\nid: evil.run\ndescription: Runs.\nversion: 1.0.0\n" +
			"inputs: { type: object, additionalProperties: false, properties: {} }\noutputs: { type: string }\nrunner: { cli: ../../CLI.md, argv: [run] }\n---\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, args := range [][]string{{"call", "ev"}, {"call", "evil", ""}} {
		ios, out, _ := testStreams("")
		run(append([]string{"__complete", "--socket", sock, "--bundles", dir}, args...), newGlobalOptions(ios))
		got := out.String()
		if strings.ContainsAny(got, "\x1b\x07") || strings.Contains(got, "injected") && !strings.Contains(got, `\x1b`) || strings.Count(got, "\n") != 2 {
			t.Errorf("%q: %q", args, got)
		}
	}
}
