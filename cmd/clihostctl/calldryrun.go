package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost"
)

// authorOptions are call's flags for bundle authors: --dry-run, --debug and --json.
type authorOptions struct {
	dryRun bool
	debug  bool
	json   bool
}

// dryRunNote says where a dry run was computed: clihostctl's own view, which clihostd's may differ
// from when it is the one that runs the call.
const dryRunNote = "computed by clihostctl in this process: when clihostd runs the call, its installed copy of the binary, " +
	"its --agent-user and its approval policy apply"

// addAuthorFlags adds --dry-run, --debug and --json to call (--json only when no other part of
// clihostctl defined it first).
func (o *authorOptions) addAuthorFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the exact argv, the environment's names, uid, cwd and the compiled sandbox policy without running anything (not even the version check)")
	fs.BoolVar(&o.debug, "debug", false, "run in this process and add everything the CLI printed (secrets redacted) to a failed call's error (error.debug)")
	if fs.Lookup("json") == nil {
		fs.BoolVar(&o.json, "json", false, "print --dry-run as JSON (the call's result is always JSON)")
	}
	cmd.MarkFlagsMutuallyExclusive("dry-run", "debug")
}

// runDryRun prints what the call of o would run, computed in this process (never through the
// daemon: it has no dry run, and nothing runs anyway).
func runDryRun(ctx context.Context, o *callOptions, raw []byte) error {
	h, closeFn, err := o.openAPI(ctx, o.globalOptions)
	if err != nil {
		return err
	}
	defer closeFn()
	d, err := h.DryRun(o.bundle, o.tool, json.RawMessage(raw))
	if err != nil {
		var e *clihost.Error
		if o.json && errors.As(err, &e) {
			_ = printEnvelope(o.io.Out, clihost.Result{Error: e.Detail}, true)
			return exitError{1}
		}
		return err
	}
	d.NotChecked = append(d.NotChecked, dryRunNote)
	if o.json {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	printDryRun(o.io.Out, d)
	return nil
}

// printDryRun writes d for a person: one field a line, the policy's lists indented.
func printDryRun(w io.Writer, d *clihost.DryRun) {
	fmt.Fprintf(w, "dry run of %s %s: nothing was run\n", d.Bundle, d.Tool)
	if len(d.Argv) > 0 {
		fmt.Fprintf(w, "argv:     %s\n", shellQuote(d.Argv))
	}
	for i, s := range d.Steps {
		fmt.Fprintf(w, "step %d:   %s\n", i+1, shellQuote(s))
	}
	if d.Stdin {
		fmt.Fprintln(w, "stdin:    runner.stdin (content not shown)")
	}
	fmt.Fprintf(w, "cwd:      %s\n", d.Cwd)
	fmt.Fprintf(w, "uid:      %d (gid %d", d.UID, d.GID)
	if len(d.Groups) > 0 {
		fmt.Fprintf(w, ", groups %v", d.Groups)
	}
	fmt.Fprintln(w, ")")
	if d.Home != "" {
		fmt.Fprintf(w, "home:     %s\n", d.Home)
	}
	fmt.Fprintf(w, "env:      %s (names only)\n", strings.Join(d.Env, " "))
	fmt.Fprintf(w, "timeout:  %dms\nengine:   %s\napproval: %s\n", d.TimeoutMS, d.Engine, d.Approval)
	if p := d.Policy; p != nil {
		fmt.Fprintln(w, "policy:")
		if len(p.Egress) == 0 {
			fmt.Fprintln(w, "  egress: none (no network)")
		} else {
			fmt.Fprintf(w, "  egress: %s\n", strings.Join(p.Egress, " "))
		}
		printList(w, "ingress", p.Ingress)
		printList(w, "read", p.Read)
		printList(w, "write", p.Write)
		printList(w, "exec", p.Exec)
		printList(w, "deny", p.Deny)
		printList(w, "protect", p.Protect)
		printList(w, "missing write roots (created when the call runs)", p.MissingWriteRoots)
	} else {
		fmt.Fprintln(w, "policy:   none: the sandbox is OFF")
	}
	fmt.Fprintln(w, "not checked:")
	for _, n := range d.NotChecked {
		fmt.Fprintf(w, "  - %s\n", n)
	}
}

// printList writes one of a policy's lists, a path a line; nothing when it is empty.
func printList(w io.Writer, name string, paths []string) {
	if len(paths) == 0 {
		return
	}
	fmt.Fprintf(w, "  %s:\n", name)
	for _, p := range paths {
		fmt.Fprintf(w, "    %s\n", p)
	}
}

// shellQuote joins args as a POSIX shell would read them back: a word of safe characters as it
// is, anything else in single quotes (the command is never run through a shell; this is for reading
// and copying).
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@+%") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
