package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
)

func newTokenCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Print the bearer token and URL of the daemon's MCP endpoints; make, list and revoke agent tokens",
		Long: `Token prints the daemon's default bearer token (its MCP endpoints need "Authorization: Bearer
<token>"). Give each agent its own token with "token create NAME": the audit log then names the
agent of each MCP call (agent), and the approval policy's rules can name it (token: NAME).
Root and the daemon's own user only.`,
		Example: `  sudo clihostctl token
  sudo clihostctl token create ci-bot
  sudo clihostctl token list
  sudo clihostctl token revoke ci-bot`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := g.client().Token(cmd.Context())
			if err != nil {
				return err
			}
			return printToken(g, t, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Make a bearer token for agent NAME and print it",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := g.client().ChangeToken(cmd.Context(), control.TokenChange{Name: args[0]})
			if err != nil {
				return err
			}
			return printToken(g, t, asJSON)
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the agent tokens (names, files, when made; never the tokens)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := g.client().Tokens(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(g.io.Out).Encode(list)
			}
			tw := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCREATED\tFILE")
			for _, t := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Created.Local().Format(time.DateTime), t.File)
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Delete agent NAME's token: its requests are refused from now on",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := g.client().ChangeToken(cmd.Context(), control.TokenChange{Name: args[0], Revoke: true}); err != nil {
				return err
			}
			fmt.Fprintf(g.io.ErrOut, "revoked %s\n", args[0])
			return nil
		},
	}
	for _, c := range []*cobra.Command{create, list} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// printToken prints a token on stdout and how to use it on stderr.
func printToken(g *globalOptions, t control.TokenInfo, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(g.io.Out).Encode(t)
	}
	fmt.Fprintf(g.io.Out, "%s\n", t.Token)
	fmt.Fprintf(g.io.ErrOut, "MCP endpoints: %s (and …/acli); send \"Authorization: Bearer <token>\"; agent %s; token file: %s\n", t.MCPURL, t.Name, t.TokenFile)
	return nil
}

func newAuditCmd(g *globalOptions) *cobra.Command {
	var follow, rotated bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Print the daemon's audit log (one JSON object a line)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.client().Audit(cmd.Context(), follow, rotated, g.io.Out)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines (across rotations)")
	cmd.Flags().BoolVar(&rotated, "rotated", false, "print the rotated logs (audit.jsonl.N … .1) first, oldest first")
	return cmd
}
