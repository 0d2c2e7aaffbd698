package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/internal/fixture"
)

// TestImportCobra imports the importer's gitx fixture through the command and lints the result.
func TestImportCobra(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a fixture program")
	}
	bin := filepath.Join(t.TempDir(), "gitx")
	if out, err := exec.Command("go", "build", "-o", bin, "../../importer/cobra/testdata/gitx").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(t.TempDir(), "mygitx")
	code, stdout, stderr := runCtl(t, "import", "cobra", bin, "--out", out, "--egress", "example.com", "--write-workspace", "--env-set", "GITX_MODE=ci=1")
	if code != 0 || !strings.Contains(stdout, "imported gitx 1.4.2 as bundle mygitx: 4 tools") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	cli, err := os.ReadFile(filepath.Join(out, "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"id: mygitx", "- example.com", "write:\n      - ./**", "json_flag: --json", "GITX_MODE: ci=1"} {
		if !strings.Contains(string(cli), s) {
			t.Errorf("CLI.md lacks %q:\n%s", s, cli)
		}
	}
	if code, stdout, _ := runCtl(t, "lint", out); code != 0 {
		t.Fatalf("lint: %s", stdout)
	}
	// remote remove is flagged for review: --strict fails on that warning, and on nothing else
	if code, stdout, _ := runCtl(t, "lint", "--strict", out); code != 1 || strings.Count(stdout, "warning: tool-review:") != 1 || strings.Contains(stdout, "error:") {
		t.Fatalf("lint --strict: %d %s", code, stdout)
	}
	if code, _, stderr := runCtl(t, "import", "cobra", bin, "--out", t.TempDir(), "--env-set", "1BAD=x"); code != 2 || !strings.Contains(stderr, "--env-set") {
		t.Fatalf("bad --env-set: %d %s", code, stderr)
	}
	if code, _, stderr := runCtl(t, "import", "cobra", bin, "--out", out); code != 2 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("non-empty --out: %d %s", code, stderr)
	}
	if code, _, stderr := runCtl(t, "import", "cobra", "true", "--out", t.TempDir()); code != 1 || !strings.Contains(stderr, "not a Cobra program") {
		t.Fatalf("true: %d %s", code, stderr)
	}
}

// TestMCPSelf serves clihostctl's own read-only commands through the bridge.
func TestMCPSelf(t *testing.T) {
	g := &globalOptions{bundleDirs: []string{"testdata/tree"}}
	root := newRootCmd(newGlobalOptions(systemStreams()))
	ctx := context.Background()
	c := fixture.MCPClient(t, newSelfServer(root, selfMCPOptions(g)), nil)
	list, err := c.ListTools(ctx, &sdk.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if a := tl.Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s: annotations %+v, want read-only, idempotent, closed world", tl.Name, a)
		}
	}
	if got := strings.Join(names, " "); got != "clihostctl_inspect clihostctl_lint clihostctl_status clihostctl_tools clihostctl_version" {
		t.Fatalf("tools: %s", got)
	}
	res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "clihostctl_lint", Arguments: map[string]any{"format": "json"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if !strings.Contains(text, `"findings"`) {
		t.Fatalf("lint through MCP: %+v %s", res, text)
	}
}
