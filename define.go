package clihost

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"testing/fstest"

	"github.com/clihost/clihost/manifest"
)

// Definition is a bundle defined in Go code (AIP-29's defineCli): a CLI.md and its TOOL.md files,
// rendered from the values given and loaded by the same loader, with the same lint, as a bundle
// folder on disk. Serve it with WithDefinitions.
type Definition struct {
	cli   manifest.CLI
	files fstest.MapFS
	err   error
}

// ToolDefinition is one tool of a Definition: the command path it answers to ("filter",
// "pr list") and its TOOL.md contract and binding.
type ToolDefinition struct {
	command []string
	tool    manifest.Tool
	body    string
}

// DefineTool defines the tool invoked as command (its words, e.g. "pr list") with the TOOL.md
// fields of t. t.Runner binds it to the CLI (its Argv template or Steps); Runner.CLI may be left
// empty. body is the TOOL.md's Markdown body (guidance for agents; may be empty).
func DefineTool(command string, t manifest.Tool, body string) *ToolDefinition {
	return &ToolDefinition{command: strings.Fields(command), tool: t, body: body}
}

// DefineCli defines a bundle: the CLI.md fields of cli (its commands block is made from the
// tools' command paths, so cli.Commands must be empty), the CLI.md's Markdown body, and its tools.
// Problems of the definition itself (a tool without a command, two tools on one command) are
// returned by New; the bundle's lint findings are the loader's (Host.Lint), and a bundle with lint
// errors is not served.
func DefineCli(cli manifest.CLI, body string, tools ...*ToolDefinition) *Definition {
	d := &Definition{cli: cli, files: fstest.MapFS{}}
	d.err = d.render(body, tools)
	if d.err != nil {
		d.err = fmt.Errorf("clihost: DefineCli %q: %w", cli.ID, d.err)
	}
	return d
}

// render writes CLI.md and tools/<command>/TOOL.md into d.files.
func (d *Definition) render(body string, tools []*ToolDefinition) error {
	if len(d.cli.Commands) > 0 {
		return errors.New("the commands block is made from the tools: leave CLI.Commands empty")
	}
	cli := d.cli
	for i, t := range tools {
		if t == nil {
			return fmt.Errorf("tool %d is nil", i+1)
		}
		if len(t.command) == 0 {
			return fmt.Errorf("tool %q has no command", t.tool.ID)
		}
		for _, w := range t.command {
			if w == "." || w == ".." || strings.ContainsAny(w, `/\`) {
				return fmt.Errorf("tool %q: command word %q is not a name", t.tool.ID, w)
			}
		}
		dir := "tools/" + strings.Join(t.command, "-")
		if _, dup := d.files[dir+"/TOOL.md"]; dup {
			return fmt.Errorf("two tools on command %q", strings.Join(t.command, " "))
		}
		if !addCommand(&cli.Commands, t.command, "./"+dir+"/TOOL.md") {
			return fmt.Errorf("command %q is both a tool and a group of tools", strings.Join(t.command, " "))
		}
		tool := t.tool
		if tool.Runner != nil && tool.Runner.CLI == "" {
			r := *tool.Runner
			r.CLI = "../../CLI.md"
			tool.Runner = &r
		}
		data, err := manifest.RenderFile(&tool, t.body)
		if err != nil {
			return fmt.Errorf("tool %q: %w", t.tool.ID, err)
		}
		d.files[path.Join(dir, "TOOL.md")] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
	data, err := manifest.RenderFile(&cli, body)
	if err != nil {
		return err
	}
	d.files["CLI.md"] = &fstest.MapFile{Data: data, Mode: 0o444}
	return nil
}

// addCommand puts ref at words in the tree; false when a leaf and a group would share a name.
func addCommand(tree *manifest.CommandTree, words []string, ref string) bool {
	for _, c := range *tree {
		if c.Name != words[0] {
			continue
		}
		if len(words) == 1 || c.Ref != "" {
			return false
		}
		return addCommand((*manifest.CommandTree)(&c.Children), words[1:], ref)
	}
	c := &manifest.Command{Name: words[0]}
	*tree = append(*tree, c)
	if len(words) == 1 {
		c.Ref = ref
		return true
	}
	return addCommand((*manifest.CommandTree)(&c.Children), words[1:], ref)
}
