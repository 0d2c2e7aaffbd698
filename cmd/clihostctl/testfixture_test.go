package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestFixtureDotNames: a fixture's dot-NAME is copied as .NAME at any depth (go:embed leaves out
// names starting with "."), a bare "dot-" keeps its name, and dot-. (which would be "..") is
// refused before anything lands beside the workspace.
func TestFixtureDotNames(t *testing.T) {
	bundle := fixture.Write(t, map[string]string{
		"testdata/dot-git/HEAD":         "ref: refs/heads/main\n",
		"testdata/src/dot-config/a.txt": "a",
		"testdata/dot-":                 "bare",
		"testdata/dot-...":              "three dots",
	})
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := copyFixture(ws, os.DirFS(bundle), "testdata"); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{".git/HEAD": "ref: refs/heads/main\n", "src/.config/a.txt": "a", "dot-": "bare", "....": "three dots"} {
		if got, err := os.ReadFile(filepath.Join(ws, p)); err != nil || string(got) != want {
			t.Errorf("%s: %q %v, want %q", p, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "dot-git")); !os.IsNotExist(err) {
		t.Errorf("dot-git was copied under its own name too: %v", err)
	}

	hostile := fixture.Write(t, map[string]string{"testdata/dot-./escaped": "out"})
	ws = filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	err := copyFixture(ws, os.DirFS(hostile), "testdata")
	if err == nil || !strings.Contains(err.Error(), `".."`) {
		t.Fatalf("dot-. copied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escaped")); !os.IsNotExist(err) {
		t.Fatalf("a fixture file landed beside the workspace: %v", err)
	}
}

// TestTestSkipsNetworkTools: an example of a tool that needs the network (its sandbox allows
// egress, or its bundle's does and it ships no fixture) is skipped with the reason and never
// runs; a fixture makes a tool that narrowed egress away run; --network runs it anyway.
func TestTestSkipsNetworkTools(t *testing.T) {
	sandboxOrSkip(t)
	examples := `  - { name: hello, input: { word: hi }, output: [1, "hi", ""] }`
	dir, _ := authorBundle(t, "{ type: array }", examples)
	edit := func(file, old, repl string) {
		t.Helper()
		p := filepath.Join(dir, file)
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), old) {
			t.Fatalf("%s: %v, or no %q", file, err, old)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, repl, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	report := func(want string, args ...string) testReport {
		t.Helper()
		code, out, errOut := runCtl(t, append([]string{"test", dir, "--audit", "-", "--json"}, args...)...)
		var rep testReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || len(rep.Results) != 1 {
			t.Fatalf("exit %d %v\n%s%s", code, err, out, errOut)
		}
		if r := rep.Results[0]; r.Status != want {
			t.Fatalf("%s, want %s: %s", r.Status, want, r.Reason)
		}
		return rep
	}
	edit("CLI.md", "network: { egress: [] }", "network: { egress: [example.com] }")
	rep := report("skip")
	if r := rep.Results[0]; !strings.Contains(r.Reason, "the tool needs the network (egress: example.com)") || r.Got != nil {
		t.Fatalf("skip: %+v", r)
	}
	edit("tools/say/TOOL.md", "runner:", "sandbox: { network: { egress: [] } }\nrunner:")
	if r := report("skip").Results[0]; !strings.Contains(r.Reason, "the bundle needs the network (egress: example.com) and ships no fixture") {
		t.Fatalf("skip without a fixture: %+v", r)
	}
	report("pass", "--network")
	fixture.WriteIn(t, dir, map[string]string{"testdata/seed.txt": "x"})
	report("pass")
}
