package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/clihost/clihost"
	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
)

type callOptions struct {
	*globalOptions
	hostOptions
	authorOptions
	bundle, tool string
	input        string
	inputFile    string
	flags        *pflag.FlagSet // the command line's flags, to tell which were given
}

// newCallCmd is clihostctl call; runF, when set, runs instead of runCall (tests).
func newCallCmd(g *globalOptions, runF func(*callOptions) error) *cobra.Command {
	o := &callOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "call BUNDLE TOOL",
		Short: "Call one tool (through the daemon when one runs) and print the result envelope",
		Long: `Call validates the input against the tool's schema, builds the argv from its template, runs the
CLI (never through a shell) in the workspace, and prints the result as JSON:
{"ok":true,"value":…,"exit_code":0,"ms":12} or {"ok":false,"error":{"code":…,"message":…,"hint":…},"ms":3}.
TOOL is the TOOL.md id, the command path ("pr list") or its dotted form (pr.list). When clihostd
runs (see --socket) the call goes through it (its installed binaries, setup, login and audit log);
otherwise, or with --bundles, --audit, --debug, --approvals or a --limit-* flag (which hold only
calls run here), it runs in this process.

A tool whose approval class asks for one (approval: always, on-mutate with mutates, policy:REF,
or a rule of the approval policy) is asked for on the terminal: the exact bundle, tool and
arguments, approve with y. Without a terminal the call fails with approval_required and an id
that root or the daemon's user approves with clihostctl approve ID; then repeat the call.
Exit status: 0 when the call succeeded, 1 when it failed, 2 on bad usage.`,
		Example: `  clihostctl call jq filter --input '{"filter": ".name", "files": ["package.json"]}'
  clihostctl call gh "pr list" --input '{"state": "open"}' --workspace ~/src/app`,
		Args: toolArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.bundle, o.tool, o.flags = args[0], args[1], cmd.Flags()
			if runF != nil {
				return runF(o)
			}
			return runCall(o)
		},
	}
	cmd.Flags().StringVar(&o.input, "input", "", "the tool's input as a JSON object")
	cmd.Flags().StringVar(&o.inputFile, "input-file", "", "read the input JSON from this file (- for stdin)")
	o.addFlags(cmd.Flags())
	o.addAuthorFlags(cmd)
	return cmd
}

func runCall(o *callOptions) error {
	raw := []byte(o.input)
	switch {
	case o.input != "" && o.inputFile != "":
		return usageError{fmt.Errorf("give --input or --input-file, not both")}
	case o.inputFile == "-":
		data, err := io.ReadAll(o.io.In)
		if err != nil {
			return err
		}
		raw = data
	case o.inputFile != "":
		data, err := os.ReadFile(o.inputFile)
		if err != nil {
			return err
		}
		raw = data
	}
	// Checked here, so that bad input is a usage error before anything runs; the daemon decodes the
	// same bytes with the same decoder.
	if _, err := argv.DecodeInput(raw); err != nil {
		return usageError{fmt.Errorf("--input: %v", err)}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.dryRun {
		return runDryRun(ctx, o, raw)
	}
	// Through the daemon when one runs (and no bundle directory was named for this call, and no
	// --debug, --limit-* or --approvals, which hold calls run here only): it keeps installed
	// binaries, state and the audit log.
	if len(o.bundleDirs) == 0 && o.audit == "" && !o.debug && !o.inProcessFlags(o.flags) {
		ws, err := o.workspaceDir()
		if err != nil {
			return err
		}
		c := o.client()
		req := control.CallRequest{Bundle: o.bundle, Tool: o.tool, Input: json.RawMessage(raw), Workspace: ws}
		env, err := c.Call(ctx, req)
		if err == nil {
			if e := env.Error; e != nil && e.Code == errcode.ApprovalRequired && e.Approval != nil {
				if ok, answer := o.confirm(e.Message, e.Approval.Question); ok {
					if _, err := c.AnswerApproval(ctx, e.Approval.ID, answer); err != nil {
						return err
					}
					if env, err = c.Call(ctx, req); err != nil {
						return err
					}
				}
			}
			return printEnvelope(o.io.Out, env, env.OK)
		}
		if !errors.Is(err, control.ErrNoDaemon) {
			return err
		}
	}
	h, closeFn, err := o.openAPI(ctx, o.globalOptions)
	if err != nil {
		return err
	}
	defer closeFn()
	if _, err := h.Bundle(o.bundle); err != nil {
		return plainError(err)
	}
	call := func() clihost.Result {
		env, _ := h.Call(ctx, o.bundle, o.tool, json.RawMessage(raw), clihost.CallOptions{Via: approval.ViaCLI, Debug: o.debug})
		return env
	}
	env := call()
	if e := env.Error; e != nil && e.Code == errcode.ApprovalRequired && e.Approval != nil {
		if ok, answer := o.confirm(e.Message, e.Approval.Question); ok {
			if err := h.AnswerApproval(e.Approval.ID, answer, currentUser()+" at the terminal (clihostctl call)"); err != nil {
				return err
			}
			env = call()
		}
	}
	return printEnvelope(o.io.Out, env, env.OK)
}

// plainError is an error of the Go API (a *clihost.Error) as clihostctl printed it before: its
// message, without the code and hint.
func plainError(err error) error {
	var e *clihost.Error
	if errors.As(err, &e) {
		return errors.New(e.Message)
	}
	return err
}

// confirm asks the person at the terminal about a call that waits for an approval (its error's
// message and the approval's question): ok is false when nobody can be asked (stdin or stderr is
// not a terminal); then the envelope's hint says how an operator approves it.
func (o *callOptions) confirm(message, question string) (ok, approve bool) {
	if !o.io.CanPrompt() {
		return false, false
	}
	fmt.Fprintf(o.io.ErrOut, "%s\n%s\n", message, question)
	yes, _ := o.prompter.Confirm("Approve?") // no answer (end of input) is no
	return true, yes
}

// printEnvelope prints a call's result (the daemon's or the host's envelope); a failed call (not
// ok) exits 1.
func printEnvelope(w io.Writer, env any, ok bool) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(env); err != nil {
		return err
	}
	if !ok {
		return exitError{1}
	}
	return nil
}

// toolArgs is exactArgs(2), saying how to write a command path given as several words (call gh
// pr list): quoted, or dotted.
func toolArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 2 {
		path := strings.Join(args[1:], " ")
		return usageError{fmt.Errorf("%s takes 2 argument(s), got %d: give the tool as one argument, its command path quoted (clihostctl call %s %q) or dotted (%s)",
			cmd.CommandPath(), len(args), args[0], path, strings.Join(args[1:], "."))}
	}
	return exactArgs(2)(cmd, args)
}
