package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/mcp"
)

type serveMCPOptions struct {
	*globalOptions
	hostOptions
	listen      string
	allowRemote bool
}

func newServeMCPCmd(g *globalOptions) *cobra.Command {
	o := &serveMCPOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "serve-mcp",
		Short: "Serve every bundle over MCP streamable HTTP",
		Long: `Serve-mcp serves the configured bundles over stateless streamable HTTP (MCP 2025-11-25 and
2026-07-28 clients alike): tools mode at /mcp/{bundle}, the ACLI "cli" tool at /mcp/{bundle}/acli.
It listens on loopback only unless --allow-remote is given. Its first line on stderr is
"listening on http://ADDR". The daemon will serve the same endpoints behind a bearer token.`,
		Example: "  clihostctl serve-mcp --listen 127.0.0.1:8931\n  # then point the client at http://127.0.0.1:8931/mcp/gh",
		Args:    exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return runServeMCP(o)
		},
	}
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:8931", "address to listen on (port 0 picks a free one)")
	cmd.Flags().BoolVar(&o.allowRemote, "allow-remote", false, "allow a non-loopback listen address (no authentication yet)")
	o.addFlags(cmd.Flags())
	return cmd
}

func runServeMCP(o *serveMCPOptions) error {
	host, port, err := net.SplitHostPort(o.listen)
	if err != nil {
		return usageError{fmt.Errorf("--listen %q: %v", o.listen, err)}
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && !o.allowRemote {
		return usageError{fmt.Errorf("--listen %s is not a loopback address; MCP over HTTP has no authentication yet, so pass --allow-remote to accept that risk", o.listen)}
	}
	h, caller, closeFn, err := o.openHost(o.globalOptions)
	if err != nil {
		return err
	}
	defer closeFn()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	fmt.Fprintf(o.io.ErrOut, "listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: mcp.Handler(h, mcp.Options{Caller: caller, Version: version}), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
	return nil
}
