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

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/agenttoken"
	"github.com/clihost/clihost/mcp"
)

type serveMCPOptions struct {
	*globalOptions
	hostOptions
	listen      string
	allowRemote bool
	noAuth      bool
	state       string
}

func newServeMCPCmd(g *globalOptions) *cobra.Command {
	o := &serveMCPOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "serve-mcp",
		Short: "Serve every bundle over MCP streamable HTTP",
		Long: `Serve-mcp serves the configured bundles over stateless streamable HTTP (MCP 2025-11-25 and
2026-07-28 clients alike): tools mode at /mcp/{bundle}, the ACLI "cli" tool at /mcp/{bundle}/acli.

Every request needs "Authorization: Bearer <token>", as clihostd's endpoints do: the tokens are
clihostd's kind, in the state directory (--state): STATE/token, made at first start (mode 0600),
and STATE/tokens/NAME for named agents. Without a token, any local user or process could run the
bundles' tools as you, with your credentials. --no-auth serves without one, on loopback only.
It listens on loopback only unless --allow-remote is given (then the token crosses the network in
clear text: put TLS in front). Requests a web page could send are refused: a Host header that is
not a loopback name on a loopback listener (DNS rebinding) and cross-origin requests.
Its first line on stderr is "listening on http://ADDR", its second where the token is.`,
		Example: "  clihostctl serve-mcp --listen 127.0.0.1:8931\n  # then point the client at http://127.0.0.1:8931/mcp/gh with \"Authorization: Bearer $(cat ~/.local/state/clihost/token)\"",
		Args:    exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return runServeMCP(o)
		},
	}
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:8931", "address to listen on (port 0 picks a free one)")
	cmd.Flags().BoolVar(&o.allowRemote, "allow-remote", false, "allow a non-loopback listen address (the bearer token is still required)")
	cmd.Flags().BoolVar(&o.noAuth, "no-auth", false, "serve without a bearer token, on loopback only: any local user or process may then run the tools as you")
	cmd.Flags().StringVar(&o.state, "state", "", "the directory of the bearer tokens (token, tokens/NAME), as clihostd's (default: $XDG_STATE_HOME/clihost, else ~/.local/state/clihost)")
	o.addFlags(cmd.Flags())
	return cmd
}

// serveTokenHint is what a 401 of serve-mcp tells the client to do.
const serveTokenHint = "the token is in the token file serve-mcp printed at start (STATE/token, or STATE/tokens/NAME)"

func runServeMCP(o *serveMCPOptions) error {
	host, port, err := net.SplitHostPort(o.listen)
	if err != nil {
		return usageError{fmt.Errorf("--listen %q: %v", o.listen, err)}
	}
	loopback := host != "" && mcp.IsLoopback(host)
	switch {
	case !loopback && o.noAuth:
		return usageError{fmt.Errorf("--listen %s is not a loopback address; --no-auth serves loopback only", o.listen)}
	case !loopback && !o.allowRemote:
		return usageError{fmt.Errorf("--listen %s is not a loopback address; pass --allow-remote to serve other machines (the bearer token then crosses the network in clear text: put TLS in front)", o.listen)}
	}
	tokens, tokenFile, err := o.openTokens()
	if err != nil {
		return err
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
	if loopback && !mcp.IsLoopback(ln.Addr().String()) { // "localhost" that resolves elsewhere
		ln.Close()
		return fmt.Errorf("--listen %s bound %s, which is not a loopback address; name 127.0.0.1 or [::1]", o.listen, ln.Addr())
	}
	fmt.Fprintf(o.io.ErrOut, "listening on http://%s\n", ln.Addr())
	switch {
	case tokens == nil:
		fmt.Fprintln(o.io.ErrOut, "WARNING: serving without authentication (--no-auth): any local user or process can run these tools as you")
	default:
		fmt.Fprintf(o.io.ErrOut, "bearer token: %s (send \"Authorization: Bearer <token>\")\n", tokenFile)
	}
	if !loopback {
		fmt.Fprintf(o.io.ErrOut, "WARNING: serving %s beyond this machine over plain HTTP: the bearer token crosses the network in clear text\n", ln.Addr())
	}
	handler := mcp.Handler(h, mcp.Options{Caller: caller, Version: version, Agent: agentOf})
	srv := &http.Server{Handler: mcp.Guard(requireToken(tokens, handler)), ReadHeaderTimeout: 10 * time.Second}
	return serveUntilSignal(srv, ln)
}

// openTokens opens the bearer tokens of o.state (made at first use), or none with --no-auth.
// They are read again whenever their files change (clihostd on the same state directory making
// or revoking one).
func (o *serveMCPOptions) openTokens() (*agenttoken.Live, string, error) {
	if o.noAuth {
		return nil, "", nil
	}
	state := o.state
	if state == "" {
		var err error
		if state, err = control.DefaultStateDir(); err != nil {
			return nil, "", err
		}
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, "", fmt.Errorf("bearer tokens: %w", err)
	}
	tokens, err := agenttoken.OpenLive(state)
	if err != nil {
		return nil, "", err
	}
	return tokens, tokens.File(agenttoken.Default), nil
}

// agentKey marks a request's context with the name of the bearer token it carried.
type agentKey struct{}

// agentOf is the name of the token a request carried (requireToken).
func agentOf(r *http.Request) string {
	name, _ := r.Context().Value(agentKey{}).(string)
	return name
}

// requireToken answers 401 with its reason to a request without one of tokens' bearer tokens;
// tokens nil (--no-auth) lets every request through.
func requireToken(tokens *agenttoken.Live, next http.Handler) http.Handler {
	if tokens == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent, reason, err := tokens.Check(r.Header.Get("Authorization"))
		if err != nil {
			http.Error(w, "clihostctl serve-mcp: the bearer tokens cannot be read; no request is served until they can: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if reason.Kind != agenttoken.OK {
			agenttoken.Refuse(w, "clihostctl serve-mcp", reason, serveTokenHint)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), agentKey{}, agent)))
	})
}

// serveUntilSignal serves srv on ln until it fails or SIGINT/SIGTERM, then shuts it down.
func serveUntilSignal(srv *http.Server, ln net.Listener) error {
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
