package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/schemas"
)

type schemaOptions struct {
	io     *IOStreams
	outDir string
	asJSON bool
}

func newSchemaCmd(g *globalOptions) *cobra.Command {
	o := &schemaOptions{io: g.io}
	cmd := &cobra.Command{
		Use:   "schema [cli|tool|runner|intent|secrets]",
		Short: "Print the JSON Schema of a bundle file's frontmatter, for editors",
		Long: `Schema prints the JSON Schema (draft 2020-12) that lint checks a frontmatter against:
cli (CLI.md), tool (TOOL.md), runner (RUNNER.md), intent (INTENT.md) or secrets (SECRETS.md).
Each has a stable $id. Without an argument it lists them; --out DIR writes them all there as
CLI.schema.json, TOOL.schema.json, … for an editor's YAML language server (docs/editors.md).`,
		Example: `  clihostctl schema tool > TOOL.schema.json
  clihostctl schema --out .vscode/schemas`,
		ValidArgs: []string{"cli", "tool", "runner", "intent", "secrets"},
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("schema takes at most one name, got %d", len(args))}
			}
			return o.run(args)
		},
	}
	cmd.Flags().StringVar(&o.outDir, "out", "", "write every schema into this directory (created if missing)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "list the schemas as JSON")
	return cmd
}

func (o *schemaOptions) run(args []string) error {
	if o.outDir != "" {
		if len(args) > 0 {
			return usageError{fmt.Errorf("--out writes every schema; give no name with it")}
		}
		return o.writeAll()
	}
	if len(args) == 1 {
		p, err := schemas.Lookup(args[0])
		if err != nil {
			return usageError{err}
		}
		text, err := p.Standalone()
		if err != nil {
			return err
		}
		_, err = o.io.Out.Write(text)
		return err
	}
	return o.list()
}

// schemaFileName is the file a schema is written to by --out: CLI.schema.json and so on.
func schemaFileName(p schemas.Published) string {
	return strings.TrimSuffix(p.Document, ".md") + ".schema.json"
}

func (o *schemaOptions) writeAll() error {
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.outDir, err)
	}
	for _, p := range schemas.All() {
		text, err := p.Standalone()
		if err != nil {
			return err
		}
		path := filepath.Join(o.outDir, schemaFileName(p))
		if err := os.WriteFile(path, text, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		fmt.Fprintln(o.io.Out, path)
	}
	return nil
}

// schemaEntry is one line of schema --json.
type schemaEntry struct {
	Name     string `json:"name"`
	Document string `json:"document"`
	ID       string `json:"id"`
}

func (o *schemaOptions) list() error {
	var entries []schemaEntry
	for _, p := range schemas.All() {
		entries = append(entries, schemaEntry{p.Name, p.Document, p.URL})
	}
	if o.asJSON {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	for _, e := range entries {
		if _, err := fmt.Fprintf(o.io.Out, "%-8s %-11s %s\n", e.Name, e.Document, e.ID); err != nil {
			return err
		}
	}
	return nil
}
