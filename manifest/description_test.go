package manifest

import (
	"strings"
	"testing"

	"github.com/clihost/clihost/bundles"
)

// TestMCPDescriptionNamesTheCommandRun: the description's "Runs `…`" names the command a tool's
// argv runs. A CLI with subcommands shows them (gh pr list); one without (jq, rg, curl) shows the
// binary alone, never its tool names as if they were subcommands ("jq eval").
func TestMCPDescriptionNamesTheCommandRun(t *testing.T) {
	fsys := bundles.FS()
	for _, c := range []struct{ cli, tool, want string }{
		{"gh/CLI.md", "pr list", "Runs `gh pr list` (GitHub CLI)."},
		{"git/CLI.md", "status", "Runs `git status`"},
		{"jq/CLI.md", "eval", "Runs `jq` (jq)."},
		{"jq/CLI.md", "filter", "Runs `jq` (jq)."},
		{"rg/CLI.md", "search", "Runs `rg`"},
	} {
		b := LoadBundle(fsys, c.cli, LoadOptions{})
		if b.CLI == nil {
			t.Fatalf("%s did not load: %v", c.cli, b.Findings)
		}
		e := b.Tool(c.tool)
		if e == nil {
			t.Fatalf("%s: no tool %q", c.cli, c.tool)
		}
		got := MCPDescription(b.CLI, e)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s %s: description ends %q, want it to contain %q", c.cli, c.tool, got[max(0, len(got)-60):], c.want)
		}
	}
}

// TestMCPDescriptionSteps: a multi-step tool names each step's command, and a literal argument
// that is an option or a template is never shown as a subcommand.
func TestMCPDescriptionSteps(t *testing.T) {
	cli := &CLI{Name: "Demo", Bin: "demo"}
	for _, c := range []struct {
		name string
		path []string
		r    *ToolRunner
		want string
	}{
		{"options first", []string{"eval"}, &ToolRunner{Argv: []string{"--null-input", "${input.x}"}}, "Runs `demo` (Demo)."},
		{"template first", []string{"eval"}, &ToolRunner{Argv: []string{"${input.x}", "list"}}, "Runs `demo` (Demo)."},
		{"subcommand", []string{"item", "list"}, &ToolRunner{Argv: []string{"item", "list", "--json"}}, "Runs `demo item list` (Demo)."},
		{"renamed", []string{"item", "all"}, &ToolRunner{Argv: []string{"item", "list", "--all"}}, "Runs `demo item list` (Demo)."},
		{"steps", []string{"sync"}, &ToolRunner{Steps: []ToolStep{{Argv: []string{"fetch", "--prune"}}, {Bin: "git", Argv: []string{"status", "${input.x}"}}}}, "Runs `demo fetch`, then `git status` (Demo)."},
	} {
		e := &ToolEntry{Path: c.path, Tool: &Tool{Description: "Does it.", Runner: c.r}}
		if got := MCPDescription(cli, e); got != "Does it.\n\n"+c.want {
			t.Errorf("%s: %q, want %q", c.name, got, "Does it.\n\n"+c.want)
		}
	}
}
