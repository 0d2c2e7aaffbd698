package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/clihost/clihost/errcode"
	"github.com/spf13/cobra"
)

// healthReport is what `health --json` prints.
type healthReport struct {
	Bundle    string       `json:"bundle"`
	Bin       string       `json:"bin"`
	Healthy   bool         `json:"healthy"`
	Binary    bool         `json:"binary"`     // the binary was found
	VersionOK bool         `json:"version_ok"` // its version check passed
	Path      string       `json:"path,omitempty"`
	Version   string       `json:"version,omitempty"`
	Range     string       `json:"range,omitempty"`
	Error     *healthError `json:"error,omitempty"`
	Probe     *attempt     `json:"probe,omitempty"`
	Answer    string       `json:"answer,omitempty"`
}

type healthError struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
	Hint    string       `json:"hint,omitempty"`
}

// defaultProbePrompt is the test request of `health --probe`.
const defaultProbePrompt = "Reply with the single word: ok"

// healthOptions are health's flags and argument.
type healthOptions struct {
	*globalOptions
	hostOptions
	bundle        string
	probe, asJSON bool
	prompt        string
}

// newHealthCmd is clihostctl health; runF, when set, runs instead of runHealth (tests).
func newHealthCmd(g *globalOptions, runF func(*healthOptions) error) *cobra.Command {
	o := &healthOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "health BUNDLE",
		Short: "Check a provider bundle: binary present, version in range, optionally a test request",
		Long: `Health checks what the CLI provider adapter protocol checks, through the host as a call would:
the bundle's binary is found (vendored, installed or on PATH), its version_check passes (run in the
bundle's sandbox), and with --probe a test request through the bundle's provider tool (see
clihostctl ask) returns an answer. Any bundle can be checked without --probe.
Exit status: 0 healthy, 1 not, 2 on bad usage.`,
		Example: `  clihostctl health claude
  clihostctl health gemini --probe --json`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.bundle = args[0]
			if runF != nil {
				return runF(o)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runHealth(ctx, o)
		},
	}
	cmd.Flags().BoolVar(&o.probe, "probe", false, "also send a test request through the bundle's provider tool")
	cmd.Flags().StringVar(&o.prompt, "prompt", defaultProbePrompt, "the test request's prompt")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	o.addFlags(cmd.Flags())
	return cmd
}

// runHealth checks o.bundle through the host and prints the report; an unhealthy bundle exits 1.
func runHealth(ctx context.Context, o *healthOptions) error {
	h, b, caller, closeFn, err := o.openBundle(o.globalOptions, o.bundle)
	if err != nil {
		return err
	}
	defer closeFn()
	rep := healthReport{Bundle: b.Key(), Bin: b.CLI.Bin, Range: b.CLI.VersionCheck.Range}
	path, version, verr := h.Verify(ctx, b, caller.Workspace)
	rep.Path, rep.Version = path, version
	rep.Binary = verr == nil || verr.Code != errcode.NotInstalled
	rep.VersionOK = verr == nil
	if verr != nil {
		rep.Error = &healthError{Code: verr.Code, Message: verr.Message, Hint: verr.Hint}
	}
	rep.Healthy = verr == nil
	if o.probe && rep.Healthy {
		r, a, _ := callProvider(ctx, h, caller, o.bundle, o.prompt)
		a.Attempt = 1
		rep.Probe, rep.Answer = &a, r.Content
		rep.Healthy = a.OK
	}
	if o.asJSON {
		if err := writeProviderJSON(o.io.Out, rep); err != nil {
			return err
		}
	} else {
		printHealth(o.globalOptions, rep)
	}
	if !rep.Healthy {
		return exitError{1}
	}
	return nil
}

func printHealth(g *globalOptions, rep healthReport) {
	state := "healthy"
	if !rep.Healthy {
		state = "unhealthy"
	}
	w := g.io.Out
	fmt.Fprintf(w, "%s: %s\n", rep.Bundle, state)
	switch {
	case rep.Path != "":
		fmt.Fprintf(w, "  binary   %s\n", rep.Path)
	case rep.Binary:
		fmt.Fprintf(w, "  binary   %s\n", rep.Bin)
	default:
		fmt.Fprintf(w, "  binary   %s not found\n", rep.Bin)
	}
	if rep.VersionOK {
		fmt.Fprintf(w, "  version  %s (needs %s)\n", rep.Version, rep.Range)
	}
	if rep.Error != nil {
		fmt.Fprintf(w, "  error    %s: %s\n", rep.Error.Code, rep.Error.Message)
		if rep.Error.Hint != "" {
			fmt.Fprintf(w, "  hint     %s\n", rep.Error.Hint)
		}
	}
	if p := rep.Probe; p != nil {
		if p.OK {
			fmt.Fprintf(w, "  probe    ok in %dms: %q\n", p.MS, rep.Answer)
		} else {
			fmt.Fprintf(w, "  probe    %s (%s): %s\n", p.Category, p.Code, p.Message)
		}
	}
}
