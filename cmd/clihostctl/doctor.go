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

// doctorOptions are doctor's flags.
type doctorOptions struct {
	*globalOptions
	asJSON, strict bool
	units          []string
}

// newDoctorCmd is clihostctl doctor; runF, when set, runs instead of runDoctor (tests).
func newDoctorCmd(g *globalOptions, runF func(*doctorOptions) error) *cobra.Command {
	o := &doctorOptions{globalOptions: g}
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
			if runF != nil {
				return runF(o)
			}
			ctx, cancel := context.WithTimeout(context.Background(), doctorTimeout)
			defer cancel()
			return runDoctor(ctx, o)
		},
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON: {checks: [{name, status, message, fix}]}")
	cmd.Flags().BoolVar(&o.strict, "strict", false, "exit 1 on warnings too")
	cmd.Flags().StringArrayVar(&o.units, "unit", nil, "check this clihostd.service file instead of the installed one (repeatable: the first that exists)")
	return cmd
}

// runDoctor runs the checks and prints them; a failed one (a warning too, with --strict) exits 1.
func runDoctor(ctx context.Context, o *doctorOptions) error {
	binDir := ""
	if self, err := os.Executable(); err == nil {
		binDir = filepath.Dir(self)
	}
	r := doctor.Run(ctx, doctor.Options{Client: o.client(), BinDir: binDir, UnitPaths: o.units})
	if o.asJSON {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printDoctor(o.globalOptions, r)
	}
	if !r.Healthy(o.strict) {
		return exitError{1}
	}
	return nil
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
