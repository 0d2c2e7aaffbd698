// Command demo is a Cobra program served over MCP by the cobramcp bridge (MCP_MODE=true), built
// by cobramcp's tests and the end-to-end tests: its commands write to os.Stdout and os.Stderr
// directly, start processes, panic, read stdin, and print JSON, YAML and tables.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/cobramcp"
)

func main() {
	root := newRoot()
	var err error
	if os.Getenv("MCP_MODE") == "true" {
		err = cobramcp.ServeMCP(root, &cobramcp.Options{ServerInfo: cobramcp.ServerInfo{Name: "demo", Version: "1.0.0"}})
	} else {
		err = root.Execute()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "demo", Short: "cobramcp's demo program", SilenceUsage: true}
	root.AddCommand(printlnCmd(), bigCmd(), spawnCmd(), backgroundCmd(), panicCmd(), slowCmd(), stdinCmd(),
		listCmd(), yamlCmd(), getCmd(), removeCmd(), pickCmd())
	return root
}

func printlnCmd() *cobra.Command {
	return &cobra.Command{Use: "println [words...]", Short: "fmt.Println the words, and a warning on os.Stderr",
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Println(strings.Join(args, " "))
			fmt.Fprintln(os.Stderr, "warning: printed directly")
			return nil
		}}
}

func bigCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "big", Short: "write --bytes bytes to os.Stdout (lines of x)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, _ := cmd.Flags().GetInt("bytes")
			line := strings.Repeat("x", 1023) + "\n"
			for ; n >= len(line); n -= len(line) {
				if _, err := os.Stdout.WriteString(line); err != nil {
					return err
				}
			}
			_, err := os.Stdout.WriteString(strings.Repeat("y", n))
			return err
		}}
	cmd.Flags().Int("bytes", 1<<20, "how many bytes")
	return cmd
}

func spawnCmd() *cobra.Command {
	return &cobra.Command{Use: "spawn <text>", Short: "run echo TEXT, its stdout this process's", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := exec.Command("echo", args[0])
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			return c.Run()
		}}
}

func backgroundCmd() *cobra.Command {
	return &cobra.Command{Use: "background", Short: "leave a process running that holds stdout open", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := exec.Command("sh", "-c", "echo from background; exec sleep 120")
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			if err := c.Start(); err != nil {
				return err
			}
			go func() { _ = c.Wait() }()
			fmt.Println("started", c.Process.Pid)
			time.Sleep(100 * time.Millisecond)
			return nil
		}}
}

func panicCmd() *cobra.Command {
	return &cobra.Command{Use: "panic", Short: "print, then panic", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Println("about to panic")
			panic("boom")
		}}
}

func slowCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "slow <tag>", Short: "print TAG, sleep --ms, print TAG again", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, _ := cmd.Flags().GetInt("ms")
			fmt.Println("start", args[0])
			time.Sleep(time.Duration(ms) * time.Millisecond)
			fmt.Fprintln(os.Stderr, "stderr", args[0])
			fmt.Println("end", args[0])
			return nil
		}}
	cmd.Flags().Int("ms", 50, "sleep")
	return cmd
}

func stdinCmd() *cobra.Command {
	return &cobra.Command{Use: "stdin", Short: "read os.Stdin to its end and print how many bytes", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := io.ReadAll(os.Stdin)
			fmt.Printf("read %d bytes\n", len(b))
			return err
		}}
}

func listCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "list items as a table", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tSTATUS\tCREATED")
			fmt.Fprintln(w, "1\tweb\tUp 2 hours\t2 hours ago")
			fmt.Fprintln(w, "22\tdb\t\t3 days ago")
			return w.Flush()
		}}
	cobramcp.SetOutputFormat(cmd, cobramcp.FormatTable)
	cobramcp.SetAnnotations(cmd, cobramcp.ToolAnnotations{Title: "List items", ReadOnlyHint: cobramcp.Bool(true), OpenWorldHint: cobramcp.Bool(false)})
	str := cobramcp.Property{Type: "string"}
	cobramcp.SetOutputSchema(cmd, &cobramcp.JSONSchema{Type: "array", Items: &cobramcp.Property{Type: "object",
		Properties: map[string]cobramcp.Property{"id": str, "name": str, "status": str, "created": str}, Required: []string{"id", "name"}}})
	return cmd
}

func yamlCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "print the configuration as YAML", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bad, _ := cmd.Flags().GetBool("bad")
			if bad {
				fmt.Println("name: [unclosed")
				return nil
			}
			fmt.Println("name: demo\nreplicas: 3\nports:\n  - 80\n  - 443")
			return nil
		}}
	cmd.Flags().Bool("bad", false, "print YAML that does not parse")
	cobramcp.SetOutputFormat(cmd, cobramcp.FormatYAML)
	cobramcp.SetAnnotations(cmd, cobramcp.ToolAnnotations{ReadOnlyHint: cobramcp.Bool(true), IdempotentHint: cobramcp.Bool(true)})
	return cmd
}

func getCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "get <name>", Short: "show an item in --output's format", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch out, _ := cmd.Flags().GetString("output"); out {
			case "json":
				fmt.Printf("{\"name\": %q, \"size\": 2}\n", args[0])
			case "yaml":
				fmt.Printf("name: %s\nsize: 2\n", args[0])
			default:
				fmt.Printf("NAME   SIZE\n%s   2\n", args[0])
			}
			return nil
		}}
	cmd.Flags().StringP("output", "o", "table", "output format: json, yaml or table")
	return cmd
}

func removeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "remove <name>", Short: "remove an item", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Println("removed", args[0])
			return nil
		}}
	cobramcp.SetAnnotations(cmd, cobramcp.ToolAnnotations{DestructiveHint: cobramcp.Bool(true), IdempotentHint: cobramcp.Bool(true)})
	return cmd
}

func pickCmd() *cobra.Command {
	return &cobra.Command{Use: "pick", Short: "print its 1 to 3 arguments (declared only by Args)", Args: cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Println(strings.Join(args, ","))
			return nil
		}}
}
