package main

import (
	"context"
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
the Go toolchain and platform; then, when a clihostd answers on the control socket within half a
second, its version (as kubectl version prints the server's). --json prints {"version",
"revision", "modified", "time", "go", "platform", "daemon"}. clihostctl --version prints only
clihostctl's line.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return runVersion(cmd.Context(), o) },
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

// setVersion gives root a --version flag printing what version prints.
func setVersion(root *cobra.Command) {
	root.Version = buildinfo.Read(version).String()
	root.SetVersionTemplate("clihostctl {{.Version}}\n")
}

// versionJSON is version --json's output.
type versionJSON struct {
	buildinfo.Info
	Daemon string `json:"daemon,omitempty"` // the running clihostd's version
}

// runVersion prints clihostctl's version and the running daemon's.
func runVersion(ctx context.Context, o *versionOptions) error {
	v := versionJSON{Info: buildinfo.Read(version), Daemon: o.daemonVersion(ctx)}
	if o.asJSON {
		return json.NewEncoder(o.io.Out).Encode(v)
	}
	fmt.Fprintf(o.io.Out, "clihostctl %s\n", v.Info)
	if v.Daemon != "" {
		fmt.Fprintf(o.io.Out, "clihostd %s\n", plain(v.Daemon))
	}
	return nil
}

// daemonVersion is the running clihostd's version, or "" when none answers within half a second.
func (o *versionOptions) daemonVersion(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	d, err := o.client().Daemon(ctx, false)
	if err != nil {
		return ""
	}
	return d.Version
}
