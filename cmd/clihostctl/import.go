package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/registry"
)

// newImportCmd is `clihostctl import`: turning other tool descriptions into bundles. Each source
// format is one subcommand.
func newImportCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Turn other tool descriptions into clihost bundles",
		Long: `Import writes a bundle folder (CLI.md plus one TOOL.md per tool) from another description of
command-line tools. Lint the result with clihostctl lint DIR.`,
		Args: exactArgs(0),
	}
	cmd.AddCommand(newImportCobraCmd(g), newImportUTCPCmd(g))
	return cmd
}

// lintImported lints the bundle an import wrote into dir, printing its findings to w; it fails
// when any of them is an error.
func lintImported(w io.Writer, dir string) error {
	src, err := registry.DirSource(dir)
	if err != nil {
		return err
	}
	reg, err := registry.Load(src)
	if err != nil {
		return err
	}
	findings := reg.AllFindings()
	if err := writeLintText(w, lintReport{Findings: findings}); err != nil {
		return err
	}
	if findings.HasErrors() {
		return fmt.Errorf("the imported bundle in %s has lint errors (clihostctl lint %s)", dir, dir)
	}
	return nil
}
