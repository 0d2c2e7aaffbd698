package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
)

type callOptions struct {
	*globalOptions
	hostOptions
	bundle, tool string
	input        string
	inputFile    string
}

func newCallCmd(g *globalOptions) *cobra.Command {
	o := &callOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "call BUNDLE TOOL",
		Short: "Call one tool (through the daemon when one runs) and print the result envelope",
		Long: `Call validates the input against the tool's schema, builds the argv from its template, runs the
CLI (never through a shell) in the workspace, and prints the result as JSON:
{"ok":true,"value":…,"exit_code":0,"ms":12} or {"ok":false,"error":{"code":…,"message":…,"hint":…},"ms":3}.
TOOL is the TOOL.md id, the command path ("pr list") or its dotted form (pr.list). When clihostd
runs (see --socket) the call goes through it (its installed binaries, setup, login and audit log);
otherwise, or with --bundles or --audit, it runs in this process.
Exit status: 0 when the call succeeded, 1 when it failed, 2 on bad usage.`,
		Example: `  clihostctl call jq filter --input '{"filter": ".name", "files": ["package.json"]}'
  clihostctl call gh "pr list" --input '{"state": "open"}' --workspace ~/src/app`,
		Args: exactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			o.bundle, o.tool = args[0], args[1]
			return runCall(o)
		},
	}
	cmd.Flags().StringVar(&o.input, "input", "", "the tool's input as a JSON object")
	cmd.Flags().StringVar(&o.inputFile, "input-file", "", "read the input JSON from this file (- for stdin)")
	o.addFlags(cmd.Flags())
	return cmd
}

func runCall(o *callOptions) error {
	raw := []byte(o.input)
	switch {
	case o.input != "" && o.inputFile != "":
		return usageError{fmt.Errorf("give --input or --input-file, not both")}
	case o.inputFile == "-":
		data, err := io.ReadAll(os.Stdin)
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
	input, err := argv.DecodeInput(raw)
	if err != nil {
		return usageError{fmt.Errorf("--input: %v", err)}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Through the daemon when one runs (and no bundle directory was named for this call): it keeps
	// installed binaries, state and the audit log.
	if len(o.bundleDirs) == 0 && o.audit == "" {
		ws, err := o.workspaceDir()
		if err != nil {
			return err
		}
		env, err := o.client().Call(ctx, control.CallRequest{Bundle: o.bundle, Tool: o.tool, Input: json.RawMessage(raw), Workspace: ws})
		if err == nil {
			return printEnvelope(o.stdout, env)
		}
		if !errors.Is(err, control.ErrNoDaemon) {
			return err
		}
	}
	h, b, caller, closeFn, err := o.openBundle(o.globalOptions, o.bundle)
	if err != nil {
		return err
	}
	defer closeFn()
	return printEnvelope(o.stdout, h.Call(ctx, b, o.tool, input, caller, host.CallOptions{}))
}

// printEnvelope prints a call's result; a failed call exits 1.
func printEnvelope(w io.Writer, env host.Envelope) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(env); err != nil {
		return err
	}
	if !env.OK {
		return exitError{1}
	}
	return nil
}
