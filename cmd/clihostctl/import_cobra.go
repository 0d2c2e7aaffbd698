package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	cobraimport "github.com/clihost/clihost/importer/cobra"
)

// envName is a variable name --env-set accepts.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// importCobraOptions are the inputs of `clihostctl import cobra`.
type importCobraOptions struct {
	*globalOptions
	bin            string
	out            string
	id             string
	binName        string
	timeout        time.Duration
	parallel       int
	egress         []string
	spawn          []string
	envPass        []string
	envSet         []string
	install        []string
	read, write    []string
	writeWorkspace bool
	force          bool
	verbose        bool
}

func newImportCobraCmd(g *globalOptions) *cobra.Command {
	o := &importCobraOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "cobra BIN --out DIR",
		Short: "Import a Cobra program (gh, kubectl, helm, …) as a bundle, from outside",
		Long: `Import cobra probes a program built with Cobra and writes a bundle with one TOOL.md per
runnable command. It runs only the program itself, never a shell: BIN __complete - (is it Cobra?),
BIN __complete PATH "" (subcommands), BIN __complete PATH - (required flags, then all flags),
BIN PATH --help (types, defaults, usage line) and BIN --version or BIN version (the version check).
Each probe runs with TERM=dumb, NO_COLOR=1, PAGER=cat, an empty HOME and working directory, stdin at
end of file and --timeout. Hidden and deprecated commands and flags are left out; persistent flags
are inherited by every tool.

Inputs are named after the long flags and the usage line's arguments; pflag types become JSON
Schema (ints → integer, strings → array, duration → string with a pattern, …) and argv rebuilds the
command line (--flag for a true bool, --name=a,b for a slice, --name=k=v per map entry). A --json,
--output json or --format json flag becomes the bundle's output.json_flag.

The bundle's sandbox is strict unless flags say otherwise: the workspace read-only
(--write-workspace), nothing else of the filesystem but the runtime clihost always grants (--read
PATTERN, --write PATTERN: the CLI's own config, e.g. ~/.config/gh/**), no network (--egress HOST),
no other programs (--spawn NAME), no host environment variables (--env-pass NAME; clihost sets
HOME; --env-set NAME=VALUE writes a fixed value into sandbox.env.set).

A program whose root command runs (hugo builds the site) gets a tool named after the program
beside its subcommands. Commands that delete, deploy or serve are imported with the risk level,
approval and (for deploy-like ones) mutates they need, and flagged for review: the TOOL.md has a
metadata.clihost.review note, and lint warns (tool-review) until it is deleted. The written bundle is linted; lint errors fail the import.

Exit status: 0 imported, 1 not a Cobra program, probe failures or lint errors, 2 bad usage.`,
		Example: `  clihostctl import cobra gh --out .cli/gh-all --read '~/.config/gh/**' --egress api.github.com --spawn git
  clihostctl import cobra kubectl --out .cli/kubectl-all --read '~/.kube/**' --env-pass KUBECONFIG
  clihostctl import cobra ./bin/mytool --out .cli/mytool --bin mytool`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.bin = args[0]
			return runImportCobra(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", "the bundle folder to write (required)")
	f.StringVar(&o.id, "id", "", "the bundle id (default: the --out folder's name)")
	f.StringVar(&o.binName, "bin", "", "bin as written in CLI.md (default: BIN as given, or its absolute path when it holds a '/')")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "time limit of each probe")
	f.IntVar(&o.parallel, "parallel", 4, "probes run at once")
	f.StringArrayVar(&o.egress, "egress", nil, "a host the CLI may reach (repeatable; default: no network)")
	f.StringArrayVar(&o.spawn, "spawn", nil, "a program the CLI may start (repeatable; default: none)")
	f.StringArrayVar(&o.envPass, "env-pass", nil, "a host environment variable passed to the CLI (repeatable; clihost sets HOME itself)")
	f.StringArrayVar(&o.envSet, "env-set", nil, "NAME=VALUE set for the CLI in sandbox.env.set (repeatable; written into CLI.md: not for secrets)")
	f.StringArrayVar(&o.install, "install", nil, "an install entry METHOD:PACKAGE, e.g. apt:gh or go:example.com/x/cmd/x@latest (repeatable; default: guessed)")
	f.StringArrayVar(&o.read, "read", nil, "another sandbox fs.read pattern, e.g. the CLI's config: ~/.config/gh/** (repeatable)")
	f.StringArrayVar(&o.write, "write", nil, "another sandbox fs.write pattern (repeatable)")
	f.BoolVar(&o.writeWorkspace, "write-workspace", false, "let the CLI write the workspace (default: read-only)")
	f.BoolVar(&o.force, "force", false, "write into a folder that is not empty")
	f.BoolVar(&o.verbose, "verbose", false, "print each command as it is probed")
	return cmd
}

func runImportCobra(ctx context.Context, o *importCobraOptions) error {
	if o.out == "" {
		return usageError{fmt.Errorf("import cobra needs --out DIR")}
	}
	if entries, err := os.ReadDir(o.out); err == nil && len(entries) > 0 && !o.force {
		return usageError{fmt.Errorf("%s is not empty; pass --force to write into it", o.out)}
	}
	opts := cobraimport.Options{Bin: o.bin, ID: o.id, BinName: o.binName, Timeout: o.timeout, Parallel: o.parallel,
		Egress: o.egress, Spawn: o.spawn, EnvPass: o.envPass, WriteWorkspace: o.writeWorkspace, Read: o.read, Write: o.write}
	if opts.ID == "" {
		abs, err := filepath.Abs(o.out)
		if err != nil {
			return err
		}
		opts.ID = cobraimport.BundleID(filepath.Base(abs))
	}
	for _, kv := range o.envSet {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !envName.MatchString(name) {
			return usageError{fmt.Errorf("--env-set %q: write NAME=VALUE with NAME of A-Z, a-z, 0-9 and _", kv)}
		}
		if opts.EnvSet == nil {
			opts.EnvSet = map[string]string{}
		}
		opts.EnvSet[name] = value
	}
	for _, in := range o.install {
		method, pkg, ok := strings.Cut(in, ":")
		if !ok || method == "" || pkg == "" {
			return usageError{fmt.Errorf("--install %q: write METHOD:PACKAGE, e.g. apt:gh", in)}
		}
		opts.Install = append(opts.Install, cobraimport.Install{Method: method, Package: pkg})
	}
	if o.verbose {
		opts.Logf = func(format string, args ...any) { fmt.Fprintf(o.io.ErrOut, format+"\n", args...) }
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := cobraimport.Import(ctx, opts)
	if err != nil {
		return err
	}
	if len(b.Tools) == 0 {
		return fmt.Errorf("%s has no runnable command to import", o.bin)
	}
	if err := b.Write(o.out); err != nil {
		return err
	}
	for _, n := range b.Notes {
		fmt.Fprintf(o.io.ErrOut, "clihostctl: note: %s\n", n)
	}
	if err := lintImported(o.io.ErrOut, o.out); err != nil {
		return err
	}
	fmt.Fprintf(o.io.Out, "imported %s %s as bundle %s: %d tools in %s\n", b.Root, b.Version, b.ID, len(b.Tools), o.out)
	return nil
}
