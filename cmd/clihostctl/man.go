package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/clihost/clihost/internal/buildinfo"
)

// newManCmd is clihostctl man: the manual pages of the command tree, generated from it (the same
// text as --help), so they cannot drift from the commands.
func newManCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "Write clihostctl's manual pages (section 1) into DIR",
		Long: `Man writes one manual page per command (clihostctl.1, clihostctl-call.1, …), generated from
the command tree, into DIR (created when missing). Packagers install them under
/usr/share/man/man1; read one with man -l DIR/clihostctl-audit.1.`,
		Example: "  clihostctl man /usr/local/share/man/man1 && mandb -q",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeMan(cmd.Root(), args[0], g)
		},
	}
}

// writeMan writes the pages of root's tree into dir.
func writeMan(root *cobra.Command, dir string, g *globalOptions) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("man: %w", err)
	}
	info := buildinfo.Read(version)
	date := info.Time // reproducible: the revision's time, not today's
	if date.IsZero() {
		date = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	root.DisableAutoGenTag = true
	hdr := &doc.GenManHeader{Title: "CLIHOSTCTL", Section: "1", Source: "clihost " + info.Version, Manual: "clihost manual", Date: &date}
	if err := doc.GenManTree(root, hdr, dir); err != nil {
		return fmt.Errorf("man: %w", err)
	}
	fmt.Fprintf(g.io.ErrOut, "wrote the manual pages into %s\n", dir)
	return nil
}
