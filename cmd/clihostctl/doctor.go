package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/doctor"
)

// doctorTimeout bounds the whole check (the daemon's probe and bundle status included).
const doctorTimeout = 2 * time.Minute

func newDoctorCmd(g *globalOptions) *cobra.Command {
	var asJSON, strict bool
	var units []string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check whether this host can run clihost, and say what to fix",
		Long: `Doctor checks the kernel's sandbox features (Landlock, user namespaces, seccomp, cgroups,
memfd_noexec), the clihost-sandbox helper beside clihostctl, the daemon (reachable, who it runs as,
and a real sandboxed process it starts now), its state directory and token file, the bundles it
serves and each one's readiness, and the systemd unit when one is installed. Each check is ok,
warn or FAIL, with what to do. It exits 1 when a check fails (with --strict, also when one warns).`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), doctorTimeout)
			defer cancel()
			binDir := ""
			if self, err := os.Executable(); err == nil {
				binDir = filepath.Dir(self)
			}
			r := doctor.Run(ctx, doctor.Options{Client: g.client(), BinDir: binDir, UnitPaths: units})
			if asJSON {
				enc := json.NewEncoder(g.io.Out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				printDoctor(g, r)
			}
			if !r.Healthy(strict) {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {checks: [{name, status, message, fix}]}")
	cmd.Flags().BoolVar(&strict, "strict", false, "exit 1 on warnings too")
	cmd.Flags().StringArrayVar(&units, "unit", nil, "check this clihostd.service file instead of the installed one (repeatable: the first that exists)")
	return cmd
}

// doctorMarks are the text output's status columns.
var doctorMarks = map[doctor.Status]string{doctor.OK: "ok  ", doctor.Warn: "warn", doctor.Fail: "FAIL"}

// printDoctor prints one line per check, and the fix indented below it.
func printDoctor(g *globalOptions, r doctor.Report) {
	for _, c := range r.Checks {
		fmt.Fprintf(g.io.Out, "%s  %s: %s\n", doctorMarks[c.Status], c.Name, plain(c.Message))
		if c.Fix != "" && c.Status != doctor.OK {
			fmt.Fprintf(g.io.Out, "      fix: %s\n", plain(c.Fix))
		}
	}
	switch r.Worst() {
	case doctor.OK:
		fmt.Fprintln(g.io.Out, "healthy")
	case doctor.Warn:
		fmt.Fprintln(g.io.Out, "healthy, with warnings")
	default:
		fmt.Fprintln(g.io.Out, "NOT healthy: fix the FAIL lines")
	}
}
