package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
)

// tokenOptions are the flags and argument of token and its subcommands.
type tokenOptions struct {
	*globalOptions
	name   string // the agent of create and revoke
	asJSON bool
}

// newTokenCmd is clihostctl token with create, list and revoke; runF, when set, runs instead of
// each one's runX (tests), with verb "", "create", "list" or "revoke".
func newTokenCmd(g *globalOptions, runF func(verb string, o *tokenOptions) error) *cobra.Command {
	o := &tokenOptions{globalOptions: g}
	runE := func(verb string, run func(context.Context, *tokenOptions) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.name = args[0]
			}
			if runF != nil {
				return runF(verb, o)
			}
			return run(cmd.Context(), o)
		}
	}
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
		RunE: runE("", runToken),
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Make a bearer token for agent NAME and print it",
		Args:  exactArgs(1),
		RunE:  runE("create", runTokenCreate),
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the agent tokens (names, files, when made; never the tokens)",
		Args:  exactArgs(0),
		RunE:  runE("list", runTokenList),
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Delete agent NAME's token: its requests are refused from now on",
		Args:  exactArgs(1),
		RunE:  runE("revoke", runTokenRevoke),
	}
	for _, c := range []*cobra.Command{create, list, revoke} {
		c.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// runToken prints the daemon's default token.
func runToken(ctx context.Context, o *tokenOptions) error {
	t, err := o.client().Token(ctx)
	if err != nil {
		return err
	}
	return printToken(o, t)
}

// runTokenCreate makes agent o.name's token and prints it.
func runTokenCreate(ctx context.Context, o *tokenOptions) error {
	t, err := o.client().ChangeToken(ctx, control.TokenChange{Name: o.name})
	if err != nil {
		return err
	}
	return printToken(o, t)
}

// runTokenList lists the agent tokens.
func runTokenList(ctx context.Context, o *tokenOptions) error {
	list, err := o.client().Tokens(ctx)
	if err != nil {
		return err
	}
	if o.asJSON {
		return json.NewEncoder(o.io.Out).Encode(list)
	}
	tw := tabwriter.NewWriter(o.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCREATED\tFILE")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Created.Local().Format(time.DateTime), t.File)
	}
	return tw.Flush()
}

// runTokenRevoke deletes agent o.name's token.
func runTokenRevoke(ctx context.Context, o *tokenOptions) error {
	if _, err := o.client().ChangeToken(ctx, control.TokenChange{Name: o.name, Revoke: true}); err != nil {
		return err
	}
	if o.asJSON {
		return json.NewEncoder(o.io.Out).Encode(map[string]string{"revoked": o.name})
	}
	fmt.Fprintf(o.io.ErrOut, "revoked %s\n", o.name)
	return nil
}

// printToken prints a token on stdout and how to use it on stderr.
func printToken(o *tokenOptions, t control.TokenInfo) error {
	if o.asJSON {
		return json.NewEncoder(o.io.Out).Encode(t)
	}
	fmt.Fprintf(o.io.Out, "%s\n", t.Token)
	fmt.Fprintf(o.io.ErrOut, "MCP endpoints: %s (and …/acli); send \"Authorization: Bearer <token>\"; agent %s; token file: %s\n", t.MCPURL, t.Name, t.TokenFile)
	return nil
}
