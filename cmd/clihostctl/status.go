package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/clihost/clihost/host"
	"github.com/spf13/cobra"
)

func newStatusCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [BUNDLE]",
		Short: "Show each bundle's lifecycle state in the running daemon",
		Long: `Status asks clihostd for every bundle's state — installed binary and version, setup, auth —
whether it is ready, and what to do when it is not.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			st, err := g.client().Status(context.Background(), name)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			if len(st) > 0 && st[0].Sandbox != "on" {
				// The same for every bundle: one line, first, so that nobody misses it.
				fmt.Fprintf(g.stdout, "WARNING: kernel sandbox %s\n", st[0].Sandbox)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "BUNDLE\tINSTALL\tVERSION\tSETUP\tAUTH\tREADY")
			for _, b := range st {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\n", b.Key, b.Install, or(b.Version, "-"), b.Setup, b.Auth, b.Ready)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, b := range st {
				if !b.Ready && b.Reason != "" {
					fmt.Fprintf(g.stdout, "%s: %s\n", b.Key, b.Reason)
				}
			}
			if len(st) > 0 && len(st[0].Limits) > 0 {
				fmt.Fprintln(g.stdout, limitsLine(st[0].Limits))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// limitsLine says which mechanism holds each per-call limit, with the first bundle's values:
// "limits: memory 1 GiB (cgroup v1), pids 256 (cgroup v1), …". Bundles may narrow memory and CPU
// time (runner.limits); --json shows each bundle's.
func limitsLine(ls []host.LimitMechanism) string {
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", l.Limit, l.Value, l.Mechanism))
	}
	return "limits: " + strings.Join(parts, ", ")
}
