package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/clihost/clihost/cobramcp"
)

// selfTools are the clihostctl commands mcp-self serves: those that only read. Commands that
// prompt (login, setup), install software, write files (import), spend money (ask, health's test
// request), read stdin (output), reveal secrets (token, audit), run tools (call) or serve MCP
// themselves are left out; a new command is left out until it is listed here.
var selfTools = map[string]bool{"lint": true, "inspect": true, "tools": true, "status": true, "version": true}

func newMCPSelfCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp-self",
		Short: "Serve clihostctl's own read-only commands as MCP tools on stdin/stdout",
		Long: `Mcp-self runs an MCP server whose tools are clihostctl's own read-only commands (lint, inspect,
tools, status, version), through the cobramcp bridge: each tool's input holds the command's flags
and arguments (clihostctl_lint takes paths, format, strict, bundles, socket). Every call runs on a
fresh command tree in this process; --bundles given to mcp-self is each call's default.`,
		Example: `  {"mcpServers": {"clihostctl": {"command": "clihostctl", "args": ["mcp-self", "--bundles", "/srv/bundles"]}}}`,
		Args:    exactArgs(0),
		RunE:    func(cmd *cobra.Command, _ []string) error { return runMCPSelf(g, cmd.Root()) },
	}
}

// runMCPSelf serves root's read-only commands over MCP on stdin and stdout. On the process's own
// stdin and stdout, the bridge keeps the MCP stream apart from descriptors 0, 1 and 2 and
// captures what a command writes there directly (cobramcp.ServeStdio); on other streams (tests
// in-process) it serves them as they are.
func runMCPSelf(g *globalOptions, root *cobra.Command) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := selfMCPOptions(g)
	var err error
	if g.io.In == os.Stdin && g.io.Out == os.Stdout {
		opts.CaptureProcessOutput = true
		err = cobramcp.ServeStdio(ctx, newSelfServer(root, opts))
	} else {
		err = newSelfServer(root, opts).Run(ctx, stdioTransport(g.io))
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	return nil
}

// newSelfServer is the bridge's server of root's read-only commands, each marked so for the
// client: read-only, idempotent, and a closed world (they read bundles and the local daemon).
func newSelfServer(root *cobra.Command, opts *cobramcp.Options) *sdk.Server {
	for _, c := range cobramcp.Commands(root, opts.CommandFilter) {
		cobramcp.SetAnnotations(c, cobramcp.ToolAnnotations{ReadOnlyHint: cobramcp.Bool(true),
			IdempotentHint: cobramcp.Bool(true), OpenWorldHint: cobramcp.Bool(false)})
	}
	return cobramcp.NewServer(root, opts)
}

// selfMCPOptions are the bridge options of mcp-self: the read-only commands, each call on a new
// tree writing to the call's buffers, with mcp-self's --bundles and --socket as defaults.
func selfMCPOptions(g *globalOptions) *cobramcp.Options {
	return &cobramcp.Options{
		ServerInfo: cobramcp.ServerInfo{Name: "clihostctl", Version: version},
		CommandFilter: func(c *cobra.Command) bool {
			return cobramcp.DefaultFilter(c) && c.HasParent() && !c.Parent().HasParent() && selfTools[c.Name()]
		},
		Factory: func(stdout, stderr io.Writer) *cobra.Command {
			// No stdin (the bridge's own is the MCP session) and no terminal.
			root := newRootCmd(newGlobalOptions(&IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr}))
			for _, d := range g.bundleDirs {
				_ = root.PersistentFlags().Set("bundles", d)
			}
			if g.socket != "" {
				_ = root.PersistentFlags().Set("socket", g.socket)
			}
			return root
		},
	}
}
