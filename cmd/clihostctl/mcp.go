package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/clihost/clihost/mcp"
)

type mcpOptions struct {
	*globalOptions
	hostOptions
	bundle string
	acli   bool
}

func newMCPCmd(g *globalOptions) *cobra.Command {
	o := &mcpOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "mcp BUNDLE",
		Short: "Serve one bundle's tools over MCP on stdin/stdout",
		Long: `Mcp runs an MCP server for one bundle on stdin and stdout, for agents that launch their tools as
subprocesses (Claude Desktop, Claude Code, Cursor, …). Tools mode serves one tool per TOOL.md, named
by its command path (pr_list); --acli serves a single "cli" tool that takes a command string
("pr list --state open", "help", "schema pr list").`,
		Example: `  clihostctl mcp gh --workspace ~/src/app
  {"mcpServers": {"gh": {"command": "clihostctl", "args": ["mcp", "gh", "--workspace", "/home/me/src/app"]}}}`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.bundle = args[0]
			return runMCP(o)
		},
	}
	cmd.Flags().BoolVar(&o.acli, "acli", false, "serve the single ACLI \"cli\" tool")
	o.addFlags(cmd.Flags())
	return cmd
}

// stdioTransport is sdk.StdioTransport over ios instead of the process's stdin and stdout: the
// session ends when In does, and closing it closes In (when it can be closed), never Out.
func stdioTransport(ios *IOStreams) sdk.Transport {
	in, ok := ios.In.(io.ReadCloser)
	if !ok {
		in = io.NopCloser(ios.In)
	}
	return &sdk.IOTransport{Reader: in, Writer: nopWriteCloser{ios.Out}}
}

// nopWriteCloser is an io.WriteCloser whose Close does nothing.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// runMCP serves o.bundle's tools over MCP on stdin and stdout.
func runMCP(o *mcpOptions) error {
	h, b, caller, closeFn, err := o.openBundle(o.globalOptions, o.bundle)
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := mcp.NewServer(h, b, mcp.Options{Caller: caller, ACLI: o.acli, Version: version})
	if err := s.Run(ctx, mcp.FinishInFlight(stdioTransport(o.io))); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	return nil
}
