package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print clihostctl's version",
		Args:  exactArgs(0),
		RunE:  func(*cobra.Command, []string) error { return runVersion(g) },
	}
}

// runVersion prints clihostctl's version.
func runVersion(g *globalOptions) error {
	_, err := fmt.Fprintf(g.io.Out, "clihostctl %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
