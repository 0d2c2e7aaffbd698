package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
)

// lintOptions are the inputs of `clihostctl lint`.
type lintOptions struct {
	*globalOptions
	paths  []string
	format string
	strict bool
}

func newLintCmd(g *globalOptions) *cobra.Command {
	o := &lintOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "lint [PATH...]",
		Short: "Check bundles against the schema and clihost's rules",
		Long: `Lint checks CLI.md manifests and their TOOL.md files: the JSON Schema, then the semantic
rules (ids, install entries, version regex and range, setup, auth, output, sandbox, commands,
argv templates). Each PATH is a bundle folder, a tree holding bundles at any depth (such as
.cli), or a CLI.md. Without PATH it lints the configured bundles (see clihostctl --help).

One finding a line: path:line:col: severity: rule-id: message (hint).
Exit status: 0 clean (warnings allowed unless --strict), 1 findings that fail, 2 bad usage.`,
		Example: `  clihostctl lint .cli
  clihostctl lint --strict --format sarif .cli > lint.sarif
  clihostctl lint --format github bundles/gh`,
		RunE: func(_ *cobra.Command, args []string) error {
			o.paths = args
			return runLint(o)
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "text", "output format: text, json, sarif or github")
	cmd.Flags().BoolVar(&o.strict, "strict", false, "fail on warnings too")
	return cmd
}

func runLint(o *lintOptions) error {
	write, ok := lintWriters[o.format]
	if !ok {
		return usageError{fmt.Errorf("unknown --format %q: use text, json, sarif or github", o.format)}
	}
	var reg *registry.Registry
	var err error
	if len(o.paths) > 0 {
		sources := make([]registry.Source, 0, len(o.paths))
		for _, p := range o.paths {
			if _, err := os.Stat(p); err != nil {
				return usageError{fmt.Errorf("lint: %w", err)}
			}
			src, err := registry.DirSource(p)
			if err != nil {
				return err
			}
			sources = append(sources, src)
		}
		reg, err = registry.Load(sources...)
	} else {
		reg, err = o.registry()
	}
	if err != nil {
		return err
	}
	entries := reg.Entries()
	if len(entries) == 0 {
		return fmt.Errorf("no CLI.md found in %v", o.paths)
	}
	findings := reg.AllFindings()
	// What this host cannot honour of each bundle's runner (runner-host, runner-needs-missing).
	h := host.New(reg, host.Options{})
	for _, e := range entries {
		findings = append(findings, h.RunnerFindings(context.Background(), e.Bundle)...)
	}
	findings.Sort()
	report := lintReport{Findings: findings}
	for _, e := range entries {
		report.Bundles = append(report.Bundles, bundleSummary{Key: e.Bundle.Key(), File: e.Bundle.File, Tools: len(e.Bundle.Tools)})
	}
	report.Errors, report.Warnings = findings.Count()
	if err := write(o.io.Out, report); err != nil {
		return err
	}
	if o.format == "text" {
		fmt.Fprintf(o.io.ErrOut, "%d bundle(s), %d tool(s): %d error(s), %d warning(s)\n", len(entries), report.toolCount(), report.Errors, report.Warnings)
	}
	if report.Errors > 0 || (o.strict && report.Warnings > 0) {
		return exitError{1}
	}
	return nil
}

// lintReport is what every output format renders.
type lintReport struct {
	Bundles  []bundleSummary   `json:"bundles"`
	Findings manifest.Findings `json:"findings"`
	Errors   int               `json:"errors"`
	Warnings int               `json:"warnings"`
}

type bundleSummary struct {
	Key   string `json:"key"`
	File  string `json:"file"`
	Tools int    `json:"tools"`
}

func (r lintReport) toolCount() int {
	n := 0
	for _, b := range r.Bundles {
		n += b.Tools
	}
	return n
}
