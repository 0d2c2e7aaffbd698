package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
)

// maxSecretSize bounds a value read from standard input (the daemon takes requests up to 1 MiB).
const maxSecretSize = 512 << 10

// secretOptions are the flags and arguments of the secret commands.
type secretOptions struct {
	*globalOptions
	bundle, name string
	workspace    string
	fromStdin    bool
	unset        bool
	asJSON       bool
}

// newSecretCmd is clihostctl secret: the slots of a bundle's SECRETS.md inventory (auth.ref).
func newSecretCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Set and list the secrets a bundle's SECRETS.md declares (kept encrypted by clihostd)",
		Long: `A bundle's auth.ref names a SECRETS.md inventory (AIP-19): each secret there is bound to
environment variables of the CLI. clihostd keeps the values encrypted, per bundle, workspace and
user (yours), and passes them to that bundle's calls only. Values are read from a prompt that does
not echo, or from standard input; never from the command line, and never shown.`,
	}
	cmd.AddCommand(newSecretSetCmd(g), newSecretListCmd(g))
	return cmd
}

func newSecretSetCmd(g *globalOptions) *cobra.Command {
	o := &secretOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:     "set BUNDLE NAME",
		Short:   "Set (or --unset) a secret: NAME is one of its variables or its slug",
		Example: "  clihostctl secret set gh GH_TOKEN\n  printf %s \"$TOKEN\" | clihostctl secret set gh GH_TOKEN --stdin",
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.bundle, o.name = args[0], args[1]
			return runSecretSet(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.workspace, "workspace", "", "the workspace the secret is for (default: the current directory)")
	cmd.Flags().BoolVar(&o.fromStdin, "stdin", false, "read the value from standard input (all of it, less one final newline)")
	cmd.Flags().BoolVar(&o.unset, "unset", false, "empty the slot instead")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the bundle's secrets afterwards as JSON (names and set/unset only)")
	return cmd
}

func newSecretListCmd(g *globalOptions) *cobra.Command {
	o := &secretOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "list BUNDLE",
		Short: "List a bundle's secrets: their variables and whether each is set (never a value)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.bundle = args[0]
			return runSecretList(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.workspace, "workspace", "", "the workspace (default: the current directory)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print as JSON")
	return cmd
}

func runSecretSet(ctx context.Context, o *secretOptions) error {
	ws, err := (&hostOptions{workspace: o.workspace}).workspaceDir()
	if err != nil {
		return err
	}
	req := control.SecretRequest{ScopeRequest: control.ScopeRequest{Bundle: o.bundle, Workspace: ws}, Name: o.name, Unset: o.unset}
	if !o.unset {
		if req.Value, err = o.readValue(); err != nil {
			return err
		}
	}
	l, err := o.client().SetSecret(ctx, req)
	if err != nil {
		return err
	}
	return printSecrets(o, l)
}

// readValue reads the value from standard input (--stdin) or a prompt that does not echo.
func (o *secretOptions) readValue() (string, error) {
	if !o.fromStdin {
		v, err := o.prompter.Password(fmt.Sprintf("value of %s for %s", o.name, o.bundle))
		if err != nil {
			return "", err
		}
		return v, nil
	}
	b, err := io.ReadAll(io.LimitReader(o.io.In, maxSecretSize+1))
	if err != nil {
		return "", fmt.Errorf("read the value from standard input: %w", err)
	}
	if len(b) > maxSecretSize {
		return "", fmt.Errorf("the value on standard input is larger than %d bytes", maxSecretSize)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	return v, nil
}

func runSecretList(ctx context.Context, o *secretOptions) error {
	ws, err := (&hostOptions{workspace: o.workspace}).workspaceDir()
	if err != nil {
		return err
	}
	l, err := o.client().SecretList(ctx, o.bundle, ws)
	if err != nil {
		return err
	}
	return printSecrets(o, l)
}

// printSecrets shows l: a table (or JSON) of names and set/unset; it never has a value to show.
func printSecrets(o *secretOptions, l control.SecretList) error {
	if o.asJSON {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	if len(l.Secrets) == 0 {
		fmt.Fprintf(o.io.Out, "%s declares no secrets (no auth.ref)\n", l.Bundle)
		return nil
	}
	tw := tabwriter.NewWriter(o.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLUG\tENV\tREQUIRED\tSTATE")
	for _, s := range l.Secrets {
		state := "unset"
		if s.Set {
			state = "set"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", s.Slug, strings.Join(s.Env, ","), s.Required, state)
	}
	return tw.Flush()
}
