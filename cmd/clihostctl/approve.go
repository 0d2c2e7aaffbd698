package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// approveOptions are approve's flags and argument.
type approveOptions struct {
	*globalOptions
	id           string // the call to answer; "" lists the pending ones
	deny, asJSON bool
}

// newApproveCmd is clihostctl approve; runF, when set, runs instead of runApprove (tests).
func newApproveCmd(g *globalOptions, runF func(*approveOptions) error) *cobra.Command {
	o := &approveOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "approve [ID]",
		Short: "List the calls waiting for an approval, or approve (--deny: refuse) one",
		Long: `Approve answers a call that waits for an approval (approval_required): a tool whose approval
class asks for one (approval: always, on-mutate with mutates, policy:REF, or an "ask" rule of the
daemon's approval policy) and whose MCP client could not ask its user.

Without ID it lists the pending calls: id, bundle, tool, who called, until when the approval may
be given, the workspace the call runs in and the exact arguments. With ID it records the answer
(in the audit log, as a cli.approval line naming you); the caller then repeats exactly the same
call, which runs once (or, with --deny, fails with approval_denied). Root and the daemon's own
user answer every call; another user only the calls it made itself with clihostctl call.`,
		Example: `  clihostctl approve
  sudo clihostctl approve ap-3f9c2a71b0d4
  clihostctl approve --deny ap-3f9c2a71b0d4`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.id = args[0]
			}
			if runF != nil {
				return runF(o)
			}
			return runApprove(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.deny, "deny", false, "refuse the call instead")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

// runApprove lists the calls waiting for an approval, or answers o.id.
func runApprove(ctx context.Context, o *approveOptions) error {
	c := o.client()
	if o.id == "" {
		if o.deny {
			return usageError{fmt.Errorf("--deny needs the ID of the call to refuse")}
		}
		list, err := c.Approvals(ctx)
		if err != nil {
			return err
		}
		if o.asJSON {
			return json.NewEncoder(o.io.Out).Encode(list)
		}
		if len(list) == 0 {
			fmt.Fprintln(o.io.ErrOut, "no call waits for an approval")
			return nil
		}
		tw := tabwriter.NewWriter(o.io.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tBUNDLE\tTOOL\tVIA\tUSER\tAGENT\tEXPIRES\tWORKSPACE\tARGUMENTS")
		for _, p := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Bundle, p.ToolPath, p.Via, p.User, p.Agent,
				time.Until(p.Deadline).Round(time.Second), p.Workspace, p.Input)
		}
		return tw.Flush()
	}
	p, err := c.AnswerApproval(ctx, o.id, !o.deny)
	if err != nil {
		return err
	}
	if o.asJSON {
		return json.NewEncoder(o.io.Out).Encode(p)
	}
	next := "the caller repeats the same call before " + p.Deadline.Local().Format("15:04:05 MST") + ", and it runs once"
	if p.Answer == "denied" {
		next = "the caller's next try of the same call fails with approval_denied"
	}
	fmt.Fprintf(o.io.Out, "%s %s %s with %s in %s; %s\n", p.Answer, p.Bundle, p.ToolPath, p.Input, p.Workspace, next)
	return nil
}
