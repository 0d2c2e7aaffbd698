package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newApproveCmd(g *globalOptions) *cobra.Command {
	var deny, asJSON bool
	cmd := &cobra.Command{
		Use:   "approve [ID]",
		Short: "List the calls waiting for an approval, or approve (--deny: refuse) one",
		Long: `Approve answers a call that waits for an approval (approval_required): a tool whose approval
class asks for one (approval: always, on-mutate with mutates, policy:REF, or an "ask" rule of the
daemon's approval policy) and whose MCP client could not ask its user.

Without ID it lists the pending calls: id, bundle, tool, the exact arguments, who called and until
when the approval may be given. With ID it records the answer (in the audit log, as a cli.approval
line naming you); the caller then repeats exactly the same call, which runs once (or, with --deny,
fails with approval_denied). Root and the daemon's own user answer every call; another user only
the calls it made itself with clihostctl call.`,
		Example: `  clihostctl approve
  sudo clihostctl approve ap-3f9c2a71b0d4
  clihostctl approve --deny ap-3f9c2a71b0d4`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := g.client()
			if len(args) == 0 {
				if deny {
					return usageError{fmt.Errorf("--deny needs the ID of the call to refuse")}
				}
				list, err := c.Approvals(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(g.io.Out).Encode(list)
				}
				if len(list) == 0 {
					fmt.Fprintln(g.io.ErrOut, "no call waits for an approval")
					return nil
				}
				tw := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tBUNDLE\tTOOL\tVIA\tUSER\tEXPIRES\tARGUMENTS")
				for _, p := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Bundle, p.ToolPath, p.Via, p.User,
						time.Until(p.Deadline).Round(time.Second), p.Input)
				}
				return tw.Flush()
			}
			p, err := c.AnswerApproval(cmd.Context(), args[0], !deny)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(g.io.Out).Encode(p)
			}
			fmt.Fprintf(g.io.Out, "%s %s %s with %s; the caller repeats the same call before %s\n", p.Answer, p.Bundle, p.ToolPath, p.Input,
				p.Deadline.Local().Format(time.TimeOnly))
			return nil
		},
	}
	cmd.Flags().BoolVar(&deny, "deny", false, "refuse the call instead")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
