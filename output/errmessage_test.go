package output

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/manifest"
)

// TestErrorMessageRecorded: the message picked from what real CLIs printed on failure (recorded in
// testdata/stderr from Go, Python, Node.js and Rust programs and from git, jq, rg, sqlite3, curl).
// Before, the message was the last three lines: a Go panic's last stack frame, a Node.js version
// banner, clap's "For more information try --help".
func TestErrorMessageRecorded(t *testing.T) {
	cases := map[string]string{
		"go-panic.txt":         "panic: assignment to entry in nil map",
		"go-panic-error.txt":   "panic: open config.yaml: no such file or directory",
		"go-log-fatal.txt":     "Error: command error: stat /nope: no such file or directory",
		"python-traceback.txt": "FileNotFoundError: [Errno 2] No such file or directory: 'missing.json'",
		"python-chained.txt":   "ValueError: config is not JSON",
		"python-argparse.txt":  "tool: error: the following arguments are required: --n",
		"node-throw.txt":       `TypeError: Cannot read properties of undefined (reading "id")`,
		"node-module.txt":      "Error: Cannot find module '/nonexistent.js'",
		"rust-panic.txt":       "thread 'main' (3303) panicked at r.rs:1:56: no item at index 3",
		"rust-clap-rg.txt":     "error: Found argument '--nope' which wasn't expected, or isn't valid in this context",
		"rust-rg-missing.txt":  "/nonexistent: No such file or directory (os error 2)",
		"git-not-repo.txt":     "fatal: not a git repository (or any of the parent directories): .git",
		"jq-error.txt":         `jq: error (at <stdin>:1): Cannot index number with string "b"`,
		"sqlite3-error.txt":    "Error: in prepare, no such table: nope",
		"curl-refused.txt":     "curl: (7) Failed to connect to 127.0.0.1 port 1 after 45 ms: Couldn't connect to server",
	}
	for file, want := range cases {
		data, err := os.ReadFile(filepath.Join("testdata/stderr", file))
		if err != nil {
			t.Fatal(err)
		}
		if got := ErrorMessage(string(data)); got != want {
			t.Errorf("%s: message %q, want %q", file, got, want)
		}
		f := Parse(For(&manifest.CLI{}, nil), Process{ExitCode: 1, Stderr: data}).Failure
		if f == nil || f.Message != want || f.Stderr != strings.TrimSpace(string(data)) {
			t.Errorf("%s: failure %+v", file, f)
		}
	}
}

func TestErrorMessageGeneric(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"\n\n  something broke  \n", "something broke"},
		{"Usage: tool [flags] FILE\n  -v  verbose\n\nmissing FILE\n", "missing FILE"},
		{"usage: tool [-h]\n", "usage: tool [-h]"},
		{"loading\nwarning: deprecated\nfatal: bad object HEAD\n", "fatal: bad object HEAD"},
		{strings.Repeat("é", 600), strings.Repeat("é", MaxErrorMessage/2) + "…"},
	}
	for _, tc := range cases {
		if got := ErrorMessage(tc.in); got != tc.want {
			t.Errorf("ErrorMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestErrorMessageLive runs real failing programs: a Go binary that panics, and sqlite3, Python
// and Node.js where installed (CI installs them: .ci/run).
func TestErrorMessageLive(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	os.WriteFile(src, []byte("package main\n\nfunc main() {\n\tvar s []int\n\tprintln(\"starting\")\n\t_ = s[5]\n}\n"), 0o644)
	bin := filepath.Join(dir, "panics")
	build := exec.Command("go", "build", "-o", bin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	live := []struct {
		name string
		argv []string
		want string
	}{
		{"go", []string{bin}, "panic: runtime error: index out of range [5] with length 0"},
		{"sqlite3", []string{"sqlite3", ":memory:", "select * from nope"}, "no such table: nope"},
		{"python3", []string{"python3", "-c", "import sys\ndef f():\n    raise KeyError('id')\nf()"}, "KeyError: 'id'"},
		{"node", []string{"node", "-e", "null.x"}, "TypeError: Cannot read properties of null (reading 'x')"},
	}
	for _, l := range live {
		if _, err := exec.LookPath(l.argv[0]); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing (.ci/run installs it)", l.argv[0])
			}
			t.Logf("skip %s: not installed", l.name)
			continue
		}
		cmd := exec.Command(l.argv[0], l.argv[1:]...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if err == nil || code == 0 {
			t.Fatalf("%s did not fail", l.name)
		}
		f := Parse(For(&manifest.CLI{}, nil), Process{ExitCode: code, Stderr: []byte(stderr.String())}).Failure
		if f == nil || f.Code != errcode.UpstreamError || !strings.Contains(f.Message, l.want) || strings.Contains(f.Message, "\n") {
			t.Errorf("%s: message %q, want one line with %q; stderr:\n%s", l.name, f.Message, l.want, stderr.String())
		}
	}
}
