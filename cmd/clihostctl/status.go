package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/sandboxprobe"
	"github.com/spf13/cobra"
)

// statusOptions are status's flags and argument.
type statusOptions struct {
	*globalOptions
	bundle string // "" for every bundle
	asJSON bool
	ready  *bool // o.bundle's readiness, once runStatus learned it
}

// newStatusCmd is clihostctl status; runF, when set, runs instead of runStatus (tests).
func newStatusCmd(g *globalOptions, runF func(*statusOptions) error) *cobra.Command {
	o := &statusOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "status [BUNDLE]",
		Short: "Show each bundle's lifecycle state in the running daemon",
		Long: `Status asks clihostd for every bundle's state — installed binary and version, setup, auth —
whether it is ready, and what to do when it is not. First it says what a real sandboxed process
started by the daemon found (the probe runs again when its last result is older than 30s) and how
many bundles the daemon serves, from where. --json prints {"daemon": …, "bundles": […]}, each
bundle with "ready". With BUNDLE, the exit status is 3 when that bundle is not ready (as systemctl
status for an inactive unit), 4 when the daemon serves no such bundle (as systemctl status for an
unknown unit), 1 when the daemon could not be asked.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.bundle = args[0]
			}
			if runF != nil {
				return runF(o)
			}
			if err := runStatus(cmd.Context(), o); err != nil {
				return o.unknownBundle(err)
			}
			return o.notReady()
		},
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

// runStatus prints the daemon's state and each bundle's (o.bundle's only, when set).
func runStatus(ctx context.Context, o *statusOptions) error {
	d, err := o.client().Daemon(ctx, false)
	if err != nil {
		return err
	}
	st, err := o.client().Status(ctx, o.bundle)
	if err != nil {
		return err
	}
	o.learnReady(st)
	if o.asJSON {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(statusJSON{Daemon: d, Bundles: st})
	}
	// The same for every bundle: first, so that nobody misses it.
	fmt.Fprintln(o.io.Out, sandboxLine(d.Sandbox))
	fmt.Fprintln(o.io.Out, bundlesLine(d.Bundles))
	for _, w := range d.Bundles.Warnings {
		fmt.Fprintf(o.io.Out, "WARNING: %s\n", w)
	}
	if len(st) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(o.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUNDLE\tINSTALL\tVERSION\tSETUP\tAUTH\tREADY")
	for _, b := range st {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", b.Key, b.Install, or(b.Version, "-"), b.Setup, b.Auth, newPalette(o.io).ready(b.Ready))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range st {
		if !b.Ready && b.Reason != "" {
			fmt.Fprintf(o.io.Out, "%s: %s\n", b.Key, b.Reason)
		}
		if p := b.Provider; p != nil && p.Breaker.State != control.BreakerClosed {
			fmt.Fprintf(o.io.Out, "%s: provider circuit breaker %s after %d failed calls (last: %s); probe at %s\n",
				b.Key, p.Breaker.State, p.Breaker.Failures, p.Breaker.LastError, p.Breaker.RetryAt.Format(time.RFC3339))
		}
	}
	if len(st[0].Limits) > 0 {
		fmt.Fprintln(o.io.Out, limitsLine(st[0].Limits))
	}
	return nil
}

// statusJSON is what status --json prints.
type statusJSON struct {
	Daemon  control.DaemonStatus   `json:"daemon"`
	Bundles []control.BundleStatus `json:"bundles"`
}

// sandboxLine says what the daemon's sandbox probe found: "sandbox: works (…)", or a WARNING with
// the reason and the hint.
func sandboxLine(p sandboxprobe.Result) string {
	switch p.State {
	case sandboxprobe.Works:
		line := fmt.Sprintf("sandbox: works (a sandboxed process ran as uid %d%s, %s, %s ago)", p.UID, paren(p.User),
			userNSWords(p.UserNS), time.Since(p.Checked).Round(time.Second))
		if p.WorkspaceDenied != "" {
			line += fmt.Sprintf("\nWARNING: MCP clients' calls are refused: %s\n  %s", p.WorkspaceDenied, p.Hint)
		}
		return line
	case sandboxprobe.Off:
		return "WARNING: kernel sandbox off: the operator ran clihostd --sandbox=off; CLIs run with the daemon's full rights"
	}
	return fmt.Sprintf("WARNING: kernel sandbox unavailable: %s\n  every call is refused; %s", p.Error, p.Hint)
}

// userNSWords says how the sandbox gets its privileges.
func userNSWords(userNS bool) string {
	if userNS {
		return "in a user namespace"
	}
	return "from a root daemon"
}

// bundlesLine says how many bundles the daemon serves and from where.
func bundlesLine(b control.BundlesLoaded) string {
	line := fmt.Sprintf("bundles: %d loaded", b.Loaded)
	if b.Refused > 0 {
		line += fmt.Sprintf(", %d refused", b.Refused)
	}
	if len(b.Sources) == 0 {
		return line + " (no sources)"
	}
	return line + " (sources: " + strings.Join(b.Sources, ", ") + ")"
}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
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
func limitsLine(ls []sandboxprobe.LimitMechanism) string {
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		switch {
		case l.Value == "none":
			parts = append(parts, l.Limit+" none")
		case l.Mechanism == "none":
			parts = append(parts, fmt.Sprintf("%s %s (NOT enforced on this host)", l.Limit, l.Value))
		default:
			parts = append(parts, fmt.Sprintf("%s %s (%s)", l.Limit, l.Value, l.Mechanism))
		}
	}
	return "limits: " + strings.Join(parts, ", ")
}

// learnReady records whether o.bundle, when one was named, is ready in st.
func (o *statusOptions) learnReady(st []control.BundleStatus) {
	if o.bundle == "" {
		return
	}
	ready := len(st) > 0
	for _, b := range st {
		ready = ready && b.Ready
	}
	o.ready = &ready
}

// unknownBundle turns the daemon's "no such bundle" (404) for o.bundle into exit status 4, after
// printing its message (which names the loaded bundles); other errors are returned as they are.
func (o *statusOptions) unknownBundle(err error) error {
	var re *control.ResponseError
	if o.bundle == "" || !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
		return err
	}
	fmt.Fprintf(o.io.ErrOut, "clihostctl: %v\n", err)
	return exitError{4}
}

// notReady is exit status 3 when the named bundle is not ready.
func (o *statusOptions) notReady() error {
	if o.ready != nil && !*o.ready {
		return exitError{3}
	}
	return nil
}
