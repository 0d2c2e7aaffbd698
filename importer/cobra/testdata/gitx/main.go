// Command gitx is a fixture Cobra CLI for the importer's and the bridge's tests: nested commands,
// every common pflag type, persistent and required flags, hidden and deprecated commands and flags.
// Every runnable command prints its own argv (os.Args[1:]) as a JSON array on stdout, so a test can
// check the exact arguments a tool call produced.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
)

func echo(cmd *cobra.Command, _ []string) error {
	b, err := json.Marshal(os.Args[1:])
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), string(b))
	return nil
}

func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "gitx", Short: "A fixture git-like CLI", Version: "1.4.2", SilenceUsage: true}
	root.PersistentFlags().StringP("repo", "R", "", "repository `OWNER/REPO`")
	root.PersistentFlags().CountP("verbose", "v", "verbosity")

	remote := &cobra.Command{Use: "remote", Short: "Manage remotes"}
	add := &cobra.Command{Use: "add <name> <url>", Short: "Add a remote", Args: cobra.ExactArgs(2), RunE: echo}
	f := add.Flags()
	f.String("branch", "main", "default branch")
	f.Int("depth", 0, "shallow depth")
	f.Int64("max-size", 0, "largest object in bytes")
	f.Uint("retries", 3, "retries")
	f.Float64("ratio", 0.5, "a ratio")
	f.StringArray("header", nil, "extra headers")
	f.StringToString("label", nil, "labels")
	f.Bool("mirror", false, "set up as mirror")
	f.Bool("fetch", true, "fetch after adding")
	f.StringP("name-only", "n", "", "name")
	f.Duration("timeout", 30*time.Second, "fetch timeout")
	f.StringSlice("track", nil, "branches to track")
	f.IntSlice("ports", nil, "ports")
	f.IP("bind", nil, "address to bind")
	f.String("old", "", "an old flag")
	_ = f.MarkDeprecated("old", "use --branch")
	f.String("internal", "", "a hidden flag")
	_ = f.MarkHidden("internal")
	_ = add.MarkFlagRequired("branch")
	remote.AddCommand(add)

	list := &cobra.Command{Use: "list [pattern]", Short: "List remotes", RunE: echo}
	list.Flags().Bool("json", false, "print JSON")
	remote.AddCommand(list)

	rm := &cobra.Command{Use: "remove <name>...", Aliases: []string{"rm"}, Short: "Remove remotes", RunE: echo}
	remote.AddCommand(rm)
	root.AddCommand(remote)

	logc := &cobra.Command{Use: "log [flags] [revision] [-- path...]", Short: "Show the log", RunE: echo}
	logc.Flags().StringP("output", "o", "text", "output format: text or json")
	root.AddCommand(logc)

	root.AddCommand(&cobra.Command{Use: "secret", Short: "A hidden command", Hidden: true, RunE: echo})
	root.AddCommand(&cobra.Command{Use: "legacy", Short: "A deprecated command", Deprecated: "use log", RunE: echo})
	return root
}

func main() {
	if err := newRoot().Execute(); err != nil {
		os.Exit(1)
	}
}
