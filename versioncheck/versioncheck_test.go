package versioncheck

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
)

func TestCheckRealBinary(t *testing.T) {
	jq, err := exec.LookPath("jq")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("jq missing")
		}
		t.Skip("jq is not installed")
	}
	dir := t.TempDir()
	ctx := context.Background()
	ok, err := Check(ctx, manifest.VersionCheck{Cmd: "jq --version", Parse: `jq-(\d+\.\d+(?:\.\d+)?)`, Range: ">=1.5"}, "jq", runner.Command{Path: jq, Dir: dir})
	if err != nil || !ok.OK || ok.Version == "" || ok.Captured == "" {
		t.Fatalf("in range: %+v %v", ok, err)
	}
	res, err := Check(ctx, manifest.VersionCheck{Cmd: "jq --version", Parse: `jq-(\d+\.\d+(?:\.\d+)?)`, Range: ">=99"}, "jq", runner.Command{Path: jq, Dir: dir})
	if err != nil || res.OK || !strings.Contains(res.Reason, `outside the range ">=99"`) {
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
