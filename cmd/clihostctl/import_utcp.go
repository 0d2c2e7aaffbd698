package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	cobraimport "github.com/clihost/clihost/importer/cobra"
	"github.com/clihost/clihost/importer/utcp"
)

// importUTCPOptions are the inputs of `clihostctl import utcp`.
type importUTCPOptions struct {
	*globalOptions
	manual string
	out    string
	id     string
	name   string
	egress []string
	strict bool
	force  bool
	asJSON bool
}

func newImportUTCPCmd(g *globalOptions) *cobra.Command {
	o := &importUTCPOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "utcp MANUAL.json --out DIR",
		Short: "Import the CLI tools of a UTCP manual as a bundle that runs without a shell",
		Long: `Import utcp reads a UTCP manual and writes a bundle with one TOOL.md per tool whose
call_template_type is cli. Each command string is parsed as shell and becomes one step of the
tool's runner.steps, with its own argv: UTCP_ARG_x_UTCP_END becomes ${input.x} (a required
input), $CMD_N_OUTPUT becomes ${steps.M.output}, cd DIR sets the next steps' dir. A command that
needs a shell (pipes, redirections, &&, ||, ;, substitutions other than step outputs, globs) makes
its tool refused, with the construct and its column; the other tools are imported. --strict makes
any refusal fatal (nothing is written).

The bundle's bin is the program of the first imported tool's first step; the other programs are
listed in sandbox.exec.spawn. The written bundle is linted; lint errors fail the import.

Exit status: 0 imported, 1 refused (--strict), nothing importable or lint errors, 2 bad usage.`,
		Example: `  clihostctl import utcp manual.json --out .cli/mytools
  clihostctl import utcp manual.json --out .cli/git-tools --id git-tools --egress github.com --strict`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.manual = args[0]
			return runImportUTCP(o)
		},
	}
	cmd.Flags().StringVar(&o.out, "out", "", "the bundle folder to write (required)")
	cmd.Flags().StringVar(&o.id, "id", "", "the bundle id (default: the --out folder's name)")
	cmd.Flags().StringVar(&o.name, "name", "", "the bundle's display name (default: the id)")
	cmd.Flags().StringArrayVar(&o.egress, "egress", nil, "a host the tools may reach (repeatable; default: no network)")
	cmd.Flags().BoolVar(&o.strict, "strict", false, "fail when any CLI tool is refused")
	cmd.Flags().BoolVar(&o.force, "force", false, "write into a folder that is not empty")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON: {bundle, dir, tools}")
	return cmd
}

func runImportUTCP(o *importUTCPOptions) error {
	if o.out == "" {
		return usageError{fmt.Errorf("import utcp needs --out DIR")}
	}
	data, err := os.ReadFile(o.manual)
	if err != nil {
		return err
	}
	id := o.id
	if id == "" {
		abs, _ := filepath.Abs(o.out)
		id = cobraimport.BundleID(filepath.Base(abs))
	}
	b, err := utcp.Convert(data, utcp.Options{ID: id, Name: o.name, Egress: o.egress})
	if b != nil {
		for _, r := range b.Refused {
			fmt.Fprintf(o.io.ErrOut, "clihostctl: %v\n", r)
		}
		for _, s := range b.Skipped {
			fmt.Fprintf(o.io.ErrOut, "clihostctl: tool %s skipped: not a cli call template\n", s)
		}
	}
	if err != nil {
		return err
	}
	if o.strict && len(b.Refused) > 0 {
		return fmt.Errorf("%d tool(s) refused (--strict): nothing written", len(b.Refused))
	}
	if entries, err := os.ReadDir(o.out); err == nil && len(entries) > 0 && !o.force {
		return fmt.Errorf("%s is not empty; pass --force to write into it", o.out)
	}
	if err := b.Write(o.out); err != nil {
		return err
	}
	if !o.asJSON {
		fmt.Fprintf(o.io.Out, "imported %d tool(s) into %s (bundle %s): %s\n", len(b.Tools), o.out, b.ID, strings.Join(b.Tools, ", "))
	}
	if err := lintImported(o.io.ErrOut, o.out); err != nil || !o.asJSON {
		return err
	}
	return json.NewEncoder(o.io.Out).Encode(map[string]any{"bundle": b.ID, "dir": o.out, "tools": b.Tools})
}
