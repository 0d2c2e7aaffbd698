package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
)

func newInstallCmd(g *globalOptions) *cobra.Command {
	var req control.InstallRequest
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "install BUNDLE",
		Short: "Install a bundle's CLI through the daemon",
		Long: `Install asks clihostd to install the CLI: the bundle's install entries are tried in order
(downloads are verified against verify_sha256 before anything is placed), the version is checked,
and a mismatch reinstalls once. A CLI already installed in a matching version is left alone.`,
		Example: "  clihostctl install jq\n  clihostctl install gh --force",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Bundle = args[0]
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			bar := progressBar{w: g.stderr}
			last, err := g.client().Install(ctx, req, func(ev control.InstallEvent) {
				if asJSON {
					return
				}
				switch ev.Phase {
				case "progress":
					bar.update(ev.Done, ev.Total)
				case "checking", "installing":
					bar.done()
					fmt.Fprintln(g.stderr, ev.Message)
				}
			})
			bar.done()
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(last); err != nil {
					return err
				}
			} else if last.Phase == "done" {
				fmt.Fprintln(g.stdout, last.Message)
			}
			if last.Phase != "done" {
				if !asJSON {
					fmt.Fprintf(g.stderr, "clihostctl: install failed: %s\n", last.Message)
					if last.Error != nil && last.Error.Hint != "" {
						fmt.Fprintf(g.stderr, "hint: %s\n", last.Error.Hint)
					}
				}
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&req.AllowUnverified, "allow-unverified", false, "let curl installer scripts without a checksum run")
	cmd.Flags().BoolVar(&req.Force, "force", false, "reinstall even when a matching version is present")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the final result as JSON")
	return cmd
}

// progressBar draws a download's progress on one terminal line.
type progressBar struct {
	w      interface{ Write([]byte) (int, error) }
	active bool
	last   int
}

func (p *progressBar) update(done, total int64) {
	const width = 30
	if total > 0 {
		pct := int(done * 100 / total)
		if p.active && pct == p.last {
			return
		}
		p.last = pct
		filled := width * pct / 100
		fmt.Fprintf(p.w, "\r[%s%s] %3d%% %s / %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), pct, size(done), size(total))
	} else {
		fmt.Fprintf(p.w, "\r%s downloaded", size(done))
	}
	p.active = true
}

func (p *progressBar) done() {
	if p.active {
		fmt.Fprintln(p.w)
		p.active = false
	}
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
