package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost"
	"github.com/clihost/clihost/manifest"
)

// lintOptions are the inputs of `clihostctl lint`.
type lintOptions struct {
	*globalOptions
	paths  []string
	format string
	asJSON bool // --json: --format json, as the other commands spell it
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
		RunE: func(cmd *cobra.Command, args []string) error {
			o.paths = args
			format, err := jsonFormat(cmd, o.asJSON, o.format, "json")
			if err != nil {
				return err
			}
			o.format = format
			return runLint(o)
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "text", "output format: text, json, sarif, github or gitlab (Code Quality)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON (the same as --format json)")
	cmd.Flags().BoolVar(&o.strict, "strict", false, "fail on warnings too")
	return cmd
}

// jsonFormat reconciles a command's --json and --format: --json means --format jsonWord, and
// --json with another --format is a usage error rather than one of them silently winning.
func jsonFormat(cmd *cobra.Command, asJSON bool, format, jsonWord string) (string, error) {
	if !asJSON {
		return format, nil
	}
	if cmd.Flags().Changed("format") && format != jsonWord {
		return "", usageError{fmt.Errorf("--json and --format %s: give one of them", format)}
	}
	return jsonWord, nil
}

func runLint(o *lintOptions) error {
	write, ok := lintWriters[o.format]
	if !ok {
		return usageError{fmt.Errorf("unknown --format %q: use text, json, sarif, github or gitlab", o.format)}
	}
	opt := o.bundleOption()
	if len(o.paths) > 0 {
		for _, p := range o.paths {
			if _, err := os.Stat(p); err != nil {
				return usageError{fmt.Errorf("lint: %w", err)}
			}
		}
		opt = clihost.WithBundleDirs(o.paths...)
	}
	lint, err := clihost.Lint(opt)
	if err != nil {
		return err
	}
	if len(lint.Bundles) == 0 {
		return fmt.Errorf("no CLI.md found in %v", o.paths)
	}
	findings := lint.Findings
	report := lintReport{Findings: findings}
	for _, b := range lint.Bundles {
		report.Bundles = append(report.Bundles, bundleSummary{Key: b.Key, File: b.File, Tools: len(b.Tools)})
	}
	report.Errors, report.Warnings = lint.Errors, lint.Warnings
	if err := write(o.io.Out, report); err != nil {
		return err
	}
	if o.format == "text" {
		fmt.Fprintf(o.io.ErrOut, "%d bundle(s), %d tool(s): %d error(s), %d warning(s)\n", len(lint.Bundles), report.toolCount(), report.Errors, report.Warnings)
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
