package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/manifest"
)

type toolsOptions struct {
	*globalOptions
	bundle string
	json   bool
}

func newToolsCmd(g *globalOptions) *cobra.Command {
	o := &toolsOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:     "tools BUNDLE",
		Short:   "List a bundle's tools as MCP serves them",
		Long:    "Tools lists each tool of a bundle with its MCP name, description and input schema.",
		Example: "  clihostctl tools gh\n  clihostctl tools gh --json | jq '.[].name'",
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.bundle = args[0]
			return runTools(o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the tools as JSON")
	return cmd
}

// listedTool is one tool as `clihostctl tools --json` prints it (the fields of an MCP tool).
type listedTool struct {
	Name        string               `json:"name"`
	Title       string               `json:"title"`
	Description string               `json:"description"`
	InputSchema map[string]any       `json:"inputSchema"`
	Annotations manifest.Annotations `json:"annotations"`
	Command     string               `json:"command"`
	ToolID      string               `json:"tool_id"`
}

func runTools(o *toolsOptions) error {
	b, err := resolveBundle(o.globalOptions, o.bundle)
	if err != nil {
		return err
	}
	if b.CLI == nil || b.Findings.HasErrors() {
		return fmt.Errorf("bundle %s has lint errors; run clihostctl lint %s", b.File, b.Dir)
	}
	list := []listedTool{}
	for _, t := range b.Tools {
		list = append(list, listedTool{
			Name: manifest.MCPName(t.Path), Title: t.Tool.Name, Description: manifest.MCPDescription(b.CLI, t),
			InputSchema: t.Tool.Inputs, Annotations: t.Tool.Annotations(), Command: b.CLI.Bin + " " + t.CommandPath(), ToolID: t.Tool.ID,
		})
	}
	if o.json {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	for _, t := range list {
		fmt.Fprintf(o.io.Out, "%s\n  %s\n", t.Name, firstLine(t.Description))
		props, _ := t.InputSchema["properties"].(map[string]any)
		var names []string
		for n := range props {
			names = append(names, n)
		}
		if len(names) > 0 {
			sort.Strings(names)
			fmt.Fprintf(o.io.Out, "  inputs: %s\n", strings.Join(names, ", "))
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
