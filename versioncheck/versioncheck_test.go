package versioncheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
)

func TestCheckRealBinary(t *testing.T) {
	fixture.Need(t, "jq")
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	ok, err := Check(ctx, manifest.VersionCheck{Cmd: "jq --version", Parse: `jq-(\d+\.\d+(?:\.\d+)?)`, Range: ">=1.5"}, "jq", runner.Command{Path: jq, Dir: dir})
	if err != nil || !ok.OK || ok.Version == "" || ok.Captured == "" {
		t.Fatalf("in range: %+v %v", ok, err)
	}
	res, err := Check(ctx, manifest.VersionCheck{Cmd: "jq --version", Parse: `jq-(\d+\.\d+(?:\.\d+)?)`, Range: ">=99"}, "jq", runner.Command{Path: jq, Dir: dir})
	if err != nil || res.OK || res.Failed || !strings.Contains(res.Reason, `outside the range ">=99"`) {
		t.Fatalf("out of range: %+v %v", res, err)
	}
	res, err = Check(ctx, manifest.VersionCheck{Cmd: "jq --version", Parse: `nothing like (\d+)`, Range: ""}, "jq", runner.Command{Path: jq, Dir: dir})
	if err != nil || res.OK || !strings.Contains(res.Reason, "does not match") {
		t.Fatalf("no match: %+v %v", res, err)
	}
	if _, err := Check(ctx, manifest.VersionCheck{Cmd: "other --version", Parse: `(\d+)`, Range: ""}, "jq", runner.Command{Path: jq, Dir: dir}); err == nil {
		t.Fatal("a command that does not run bin was accepted")
	}
	if _, err := Check(ctx, manifest.VersionCheck{Cmd: "jq --version | cat", Parse: `(\d+)`, Range: ""}, "jq", runner.Command{Path: jq, Dir: dir}); err == nil {
		t.Fatal("a shell pipeline was accepted")
	}
}

// script writes an executable shell script named name into a new directory and returns its path.
func script(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := fixture.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFailedCommandReportsExitAndStderr: a version command that fails says so with its exit code
// and the tail of its stderr, never "does not match"; "does not match" is kept for a command that
// succeeded and printed something else, quoting it.
func TestFailedCommandReportsExitAndStderr(t *testing.T) {
	ctx := context.Background()
	vc := manifest.VersionCheck{Cmd: "fakegh --version", Parse: `gh version (\d+\.\d+\.\d+)`, Range: ">=2"}
	check := func(body string) Result {
		t.Helper()
		bin := script(t, "fakegh", body)
		res, err := Check(ctx, vc, "fakegh", runner.Command{Path: bin, Dir: t.TempDir()})
		if err != nil || res.OK {
			t.Fatalf("%q: %+v %v", body, res, err)
		}
		return res
	}

	res := check("echo 'failed to read configuration:  open /root/.config/gh/config.yml: permission denied' >&2\nexit 1\n")
	want := `"fakegh --version" failed with exit code 1; its stderr ends: failed to read configuration:  open /root/.config/gh/config.yml: permission denied`
	if res.Reason != want || res.ExitCode != 1 || !res.Failed || !strings.Contains(res.Stderr, "config.yml: permission denied") {
		t.Fatalf("failing command: %+v\nwant reason %s", res, want)
	}

	res = check("i=0; while [ $i -lt 50 ]; do echo \"line $i\" >&2; i=$((i+1)); done; exit 3\n")
	if !strings.HasPrefix(res.Stderr, "…line 40\n") || !strings.HasSuffix(res.Stderr, "line 49") || strings.Contains(res.Stderr, "line 39") ||
		!strings.Contains(res.Reason, "exit code 3") {
		t.Fatalf("long stderr is not cut to its last %d lines: %+v", StderrTailLines, res)
	}
	res = check("head -c 5000 /dev/zero | tr '\\0' x >&2; exit 4\n")
	if len(res.Stderr) > StderrTailBytes+len("…") || !strings.HasPrefix(res.Stderr, "…x") {
		t.Fatalf("a long line is not cut to %d bytes: %d bytes", StderrTailBytes, len(res.Stderr))
	}

	res = check("exit 2\n")
	if res.Reason != `"fakegh --version" failed with exit code 2 (its stderr is empty)` {
		t.Fatalf("silent failure: %q", res.Reason)
	}
	res = check("echo 'hub version 1.2.3'\necho second\n")
	if res.Reason != `the output of "fakegh --version" does not match "gh version (\\d+\\.\\d+\\.\\d+)"; it begins "hub version 1.2.3"` || res.Failed {
		t.Fatalf("other output: %q", res.Reason)
	}
	res = check("exit 0\n")
	if res.Reason != `"fakegh --version" exited 0 and printed nothing` || res.Failed {
		t.Fatalf("no output: %q", res.Reason)
	}
}

// TestRealGhFailingToReadItsConfig runs the real gh, whose config directory is a file it cannot
// parse as one, so that it fails before printing its version: its exit code and stderr are reported.
func TestRealGhFailingToReadItsConfig(t *testing.T) {
	fixture.Need(t, "gh")
	gh, err := exec.LookPath("gh")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfg, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	vc := manifest.VersionCheck{Cmd: "gh --version", Parse: `gh version (\d+\.\d+\.\d+)`, Range: ">=2"}
	res, err := Check(context.Background(), vc, "gh", runner.Command{Path: gh, Dir: t.TempDir(), Env: []string{"GH_CONFIG_DIR=" + cfg, "HOME=" + t.TempDir()}})
	if err != nil || res.OK || res.ExitCode == 0 || strings.Contains(res.Reason, "does not match") ||
		!strings.Contains(res.Reason, `"gh --version" failed with exit code`) || !strings.Contains(res.Stderr, cfg) {
		t.Fatalf("%+v %v", res, err)
	}
}
