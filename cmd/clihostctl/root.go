package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost"
	"github.com/clihost/clihost/registry"
)

// usageError is a mistake in how the command was called.
type usageError struct{ error }

// globalOptions are the flags every command shares and what every command is given (gh's
// cmdutil.Factory): its IOStreams and the Prompter that asks on them.
type globalOptions struct {
	bundleDirs []string
	socket     string
	io         *IOStreams
	prompter   Prompter
}

// newGlobalOptions returns the options of a clihostctl reading and writing ios.
func newGlobalOptions(ios *IOStreams) *globalOptions {
	return &globalOptions{io: ios, prompter: newPrompter(ios)}
}

// registry loads the bundles the flags, the environment or the defaults point at.
func (g *globalOptions) registry() (*registry.Registry, error) {
	sources, err := registry.DefaultSources(g.bundleDirs)
	if err != nil {
		return nil, err
	}
	return registry.Load(sources...)
}

// bundleOption names the same bundles as registry, for the Go API (package clihost).
func (g *globalOptions) bundleOption() clihost.Option {
	if len(g.bundleDirs) > 0 {
		return clihost.WithBundleDirs(g.bundleDirs...)
	}
	return clihost.WithDefaultBundles()
}

// newRootCmd is clihostctl's command tree over g.
func newRootCmd(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "clihostctl",
		Short: "Lint, inspect and operate clihost CLI bundles",
		Long: `clihostctl is clihost's operator and CI command.

Bundles come from --bundles DIR (repeatable), else $CLIHOST_BUNDLES (a PATH-style list),
else ./.cli plus the catalog built into clihost.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	setVersion(root)
	defer applyConventions(root, g) // once every command is added
	root.SetIn(g.io.In)
	root.SetOut(g.io.Out)
	root.SetErr(g.io.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringArrayVar(&g.bundleDirs, "bundles", nil, "a bundle directory: a bundle folder, a tree of bundles or a CLI.md (repeatable)")
	root.PersistentFlags().StringVar(&g.socket, "socket", "", "clihostd's control socket (default: $CLIHOST_SOCKET, else the daemon's default)")
	root.AddCommand(newOutputCmd(g), newAskCmd(g, nil), newHealthCmd(g, nil), newLintCmd(g), newInspectCmd(g), newToolsCmd(g), newCallCmd(g, nil), newMCPCmd(g), newServeMCPCmd(g),
		newStatusCmd(g, nil), newDoctorCmd(g, nil), newInstallCmd(g, nil), newSetupCmd(g, nil), newLoginCmd(g, nil), newLogoutCmd(g, nil), newTokenCmd(g, nil), newApproveCmd(g, nil), newAuditCmd(g), newVersionCmd(g), newImportCmd(g), newMCPSelfCmd(g), newStateCmd(g),
		newSecretCmd(g))
	root.AddCommand(newTestCmd(g), newNewCmd(g))
	root.AddCommand(newOpenCmd(g, nil))
	root.AddCommand(newSchemaCmd(g))
	withConfigFile(root)
	return root
}

// argNames are the arguments cmd's usage line names, as " (DIR)", or "" when it names none.
func argNames(cmd *cobra.Command) string {
	var names []string
	for _, f := range strings.Fields(cmd.Use)[1:] {
		if f != "[flags]" {
			names = append(names, f)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, " ") + ")"
}

// exactArgs is cobra.ExactArgs reporting a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s)%s, got %d", cmd.CommandPath(), n, argNames(cmd), len(args))}
		}
		return nil
	}
}
