package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// applyConventions gives root's finished tree what gh, kubectl and systemctl users expect of
// every command: the man command, --color, shell completion of bundles, tools and flag values,
// and argument mistakes reported as usage errors (exit 2, pointing at the command's --help).
func applyConventions(root *cobra.Command, g *globalOptions) {
	root.AddCommand(newManCmd(g))
	root.InitDefaultCompletionCmd() // now, not at Execute, so that the walk below reaches it
	addColorFlag(root, g.io)
	addCompletions(root, g)
	walk(root, func(cmd *cobra.Command) {
		if cmd.Args != nil {
			cmd.Args = asUsageError(cmd.Args)
		}
		if cmd.HasParent() && !cmd.Runnable() && cmd.HasSubCommands() {
			cmd.Args, cmd.RunE = cobra.ArbitraryArgs, groupRun // groupRun checks them
			if cmd.Annotations == nil {
				cmd.Annotations = map[string]string{}
			}
			cmd.Annotations[groupAnnotation] = "true"
		}
	})
}

// groupAnnotation marks the commands that only group others (they print no data).
const groupAnnotation = "clihostctl-group"

// groupRun runs a command that only groups others (state, import, completion) when no
// subcommand was named: its help, or a usage error naming the mistyped subcommand (cobra checks
// that on the root only, and printed the group's help with exit status 0).
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default for the root's own
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError{errors.New(msg)}
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
