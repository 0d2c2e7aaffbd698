// Command sitegen is a fixture Cobra CLI shaped like hugo: its root command runs (it builds the
// site) and it has subcommands, among them a server, a deploy and a delete. Every runnable command
// prints its own argv (os.Args[1:]) and the value of SITEGEN_ENV as a JSON object on stdout.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func echo(cmd *cobra.Command, _ []string) error {
	b, err := json.Marshal(map[string]any{"argv": os.Args[1:], "env": os.Getenv("SITEGEN_ENV")})
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), string(b))
	return nil
}

func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "sitegen", Short: "sitegen builds your site", Long: "sitegen builds your site from content/ into public/.",
		Version: "0.9.1", SilenceUsage: true, RunE: echo}
	root.Flags().StringP("destination", "d", "public", "filesystem path to write files to")
	root.Flags().Bool("minify", false, "minify any supported output format")
	root.PersistentFlags().String("source", "", "filesystem path to read files relative from")

	server := &cobra.Command{Use: "server", Short: "Start the embedded web server", RunE: echo}
	server.Flags().Int("port", 1313, "port on which the server will listen")
	root.AddCommand(server)

	deploy := &cobra.Command{Use: "deploy", Short: "Deploy your site to a cloud provider", RunE: echo}
	deploy.Flags().String("target", "", "target deployment from deployments section in config file")
	root.AddCommand(deploy)

	root.AddCommand(&cobra.Command{Use: "delete <page>", Short: "Delete a page", Args: cobra.ExactArgs(1), RunE: echo})
	root.AddCommand(&cobra.Command{Use: "list", Short: "List pages", RunE: echo})
	return root
}

func main() {
	if err := newRoot().Execute(); err != nil {
		os.Exit(1)
	}
}
