package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
)

type setupOptions struct {
	*globalOptions
	bundle    string
	workspace string
	values    []string
	force     bool
	asJSON    bool
}

// newSetupCmd is clihostctl setup; runF, when set, runs instead of runSetup (tests).
func newSetupCmd(g *globalOptions, runF func(*setupOptions) error) *cobra.Command {
	o := &setupOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "setup BUNDLE",
		Short: "Run a bundle's setup steps through the daemon",
		Long: `Setup runs the bundle's one-time setup steps for you in a workspace (default: the current
directory; for the daemon's MCP agents, run it in the daemon's --workspace).
Prompts are asked here at the terminal (secrets without echo) or answered with --value STEP=VALUE;
steps that need a browser print a URL and the daemon waits for its callback (an OAuth
authorization), or print a URL and a code to enter there while the daemon polls (an OAuth device
flow). Completed steps are remembered and not asked again unless --force.`,
		Example: "  clihostctl setup openclaw\n  clihostctl setup openclaw --value gateway-url=wss://gw.example --value gateway-token=@token.txt",
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.bundle = args[0]
			if runF != nil {
				return runF(o)
			}
			return runSetup(o)
		},
	}
	cmd.Flags().StringArrayVar(&o.values, "value", nil, "answer a step non-interactively: STEP=VALUE (VALUE @FILE reads a file)")
	cmd.Flags().StringVar(&o.workspace, "workspace", "", "the workspace the setup is for (default: the current directory; MCP agents use the daemon's --workspace)")
	cmd.Flags().BoolVar(&o.force, "force", false, "run completed steps again")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	return cmd
}

func runSetup(o *setupOptions) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	values := map[string]string{}
	for _, v := range o.values {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return usageError{fmt.Errorf("--value %q: write STEP=VALUE", v)}
		}
		if file, isFile := strings.CutPrefix(val, "@"); isFile {
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			val = strings.TrimRight(string(data), "\r\n")
		}
		values[k] = val
	}
	ws, err := (&hostOptions{workspace: o.workspace}).workspaceDir()
	if err != nil {
		return err
	}
	c := o.client()
	scope := control.ScopeRequest{Bundle: o.bundle, Workspace: ws}
	info, err := c.SetupInfo(ctx, scope)
	if err != nil {
		return err
	}
	interactive := o.io.IsStdinTTY()
	for _, s := range info.Steps {
		if (s.Done && !o.force) || s.Kind != "prompt" {
			continue
		}
		if _, given := values[s.ID]; given {
			continue
		}
		if !interactive {
			return fmt.Errorf("step %s asks %q: pass --value %s=VALUE (stdin is not a terminal)", s.ID, s.Prompt, s.ID)
		}
		v, err := ask(o, s)
		if err != nil {
			return err
		}
		values[s.ID] = v
	}
	last, err := c.Setup(ctx, control.SetupRequest{ScopeRequest: scope, Values: values, Force: o.force}, func(ev control.SetupEvent) {
		if ev.UserCode != "" {
			fmt.Fprintf(o.io.ErrOut, "step %s: open this URL and enter the code %s (waiting for the authorization):\n  %s\n", plain(ev.Step), plain(ev.UserCode), plain(ev.URL))
		} else {
			fmt.Fprintf(o.io.ErrOut, "step %s: open this URL to continue (waiting for it to call back):\n  %s\n", plain(ev.Step), plain(ev.URL))
		}
		if webURL(ev.URL) {
			_ = exec.Command("xdg-open", ev.URL).Start() // best effort: a desktop opens it
		}
	})
	if err != nil {
		return err
	}
	if o.asJSON {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(last); err != nil {
			return err
		}
	} else {
		for _, s := range last.Steps {
			mark := "pending"
			if s.Done {
				mark = "done"
			}
			fmt.Fprintf(o.io.Out, "%-24s %s\n", s.ID, mark)
		}
	}
	if last.Phase != "done" {
		if !o.asJSON && last.Error != nil {
			fmt.Fprintf(o.io.ErrOut, "clihostctl: %s: %s\n", last.Error.Code, last.Error.Message)
			if last.Error.Hint != "" {
				fmt.Fprintf(o.io.ErrOut, "hint: %s\n", last.Error.Hint)
			}
		}
		return exitError{1}
	}
	return nil
}

// ask puts one prompt step to the person at the terminal.
func ask(o *setupOptions, s control.SetupStep) (string, error) {
	q := s.Prompt
	if s.Description != "" {
		fmt.Fprintln(o.io.ErrOut, s.Description)
	}
	if len(s.Options) > 0 {
		for i, opt := range s.Options {
			fmt.Fprintf(o.io.ErrOut, "  %d) %s\n", i+1, opt)
		}
	}
	if s.Type == "boolean" {
		q += " [y/n]"
	}
	if s.Default != "" && s.Type != "secret" {
		q += fmt.Sprintf(" (default %s)", s.Default)
	}
	read := o.prompter.Input
	if s.Type == "secret" {
		read = o.prompter.Password
	}
	v, err := read(q)
	if err != nil {
		return "", err
	}
	if n := len(s.Options); n > 0 {
		var i int
		if _, err := fmt.Sscanf(v, "%d", &i); err == nil && i >= 1 && i <= n {
			v = s.Options[i-1]
		}
	}
	if s.Type == "boolean" {
		switch strings.ToLower(v) {
		case "y", "yes", "true":
			v = "true"
		case "n", "no", "false":
			v = "false"
		}
	}
	return v, nil
}

// webURL reports whether u is an http or https URL with a host: the only kind a setup step's visit
// hands to xdg-open. The URL comes from the daemon (another user: the unit's clihost), and
// xdg-open runs a file:, a local path or a .desktop file with whatever opens it.
func webURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" && !strings.HasPrefix(u, "-")
}
