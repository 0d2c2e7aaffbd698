package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

func newTokenCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Print the bearer token and URL of the daemon's MCP endpoints",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			t, err := g.client().Token(context.Background())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(g.stdout).Encode(t)
			}
			fmt.Fprintf(g.stdout, "%s\n", t.Token)
			fmt.Fprintf(g.stderr, "MCP endpoints: %s (and …/acli); send \"Authorization: Bearer <token>\"; token file: %s\n", t.MCPURL, t.TokenFile)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newAuditCmd(g *globalOptions) *cobra.Command {
	var follow, rotated bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Print the daemon's audit log (one JSON object a line)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.client().Audit(cmd.Context(), follow, rotated, g.stdout)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines (across rotations)")
	cmd.Flags().BoolVar(&rotated, "rotated", false, "print the rotated logs (audit.jsonl.N … .1) first, oldest first")
	return cmd
}
