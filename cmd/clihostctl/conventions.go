package main

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"
)

// applyConventions gives root's finished tree what gh, kubectl and systemctl users expect of
// every command: the man command, --color, shell completion of bundles, tools and flag values,
// and argument mistakes reported as usage errors (exit 2, pointing at the command's --help).
func applyConventions(root *cobra.Command, g *globalOptions) {
	root.AddCommand(newManCmd(g))
	addColorFlag(root, g.io)
	addCompletions(root, g)
	walk(root, func(cmd *cobra.Command) {
		if cmd.Args != nil {
			cmd.Args = asUsageError(cmd.Args)
		}
	})
}

// asUsageError is args, its error a usageError.
func asUsageError(args cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		err := args(cmd, a)
		if err != nil && !errors.As(err, new(usageError)) {
			return usageError{err}
		}
		return err
	}
}

// isUnknownCommand reports whether err is cobra's "unknown command" for a mistyped subcommand.
func isUnknownCommand(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ")
}
