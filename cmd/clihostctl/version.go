package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/internal/buildinfo"
)

// versionOptions are version's flags.
type versionOptions struct {
	*globalOptions
	asJSON bool
}

func newVersionCmd(g *globalOptions) *cobra.Command {
	o := &versionOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print clihostctl's version",
		Long: `Version prints the module version clihostctl was installed as, or the VCS revision it was built
from (with ", modified" when the checkout had uncommitted changes) and that revision's time, then
the Go toolchain and platform. --json prints {"version", "revision", "modified", "time", "go",
"platform"}. clihostctl --version prints the same line.`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error { return runVersion(o) },
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

// setVersion gives root a --version flag printing what version prints.
func setVersion(root *cobra.Command) {
	root.Version = buildinfo.Read(version).String()
	root.SetVersionTemplate("clihostctl {{.Version}}\n")
}

// runVersion prints clihostctl's version.
func runVersion(o *versionOptions) error {
	info := buildinfo.Read(version)
	if o.asJSON {
		return json.NewEncoder(o.io.Out).Encode(info)
	}
	_, err := fmt.Fprintf(o.io.Out, "clihostctl %s\n", info)
	return err
}
