package main

import "github.com/spf13/cobra"

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
