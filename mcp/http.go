package mcp

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/host"
)

// Handler serves every bundle of h over stateless streamable HTTP: tools mode at /mcp/{bundle}, ACLI
// mode at /mcp/{bundle}/acli. {bundle} is an id or id@major. One server per bundle and mode is built
// on first use and kept.
func Handler(h *host.Host, o Options) http.Handler {
	var mu sync.Mutex
	servers := map[string]*sdk.Server{}
	get := func(acliMode bool) func(*http.Request) *sdk.Server {
		return func(r *http.Request) *sdk.Server {
			b, err := h.Bundle(r.PathValue("bundle"))
			if err != nil {
				return nil // the SDK answers 400
			}
			key := fmt.Sprintf("%s/%v", b.Key(), acliMode)
			mu.Lock()
			defer mu.Unlock()
			if s, ok := servers[key]; ok {
				return s
			}
			oo := o
			oo.ACLI, oo.Stateless = acliMode, true
			s := NewServer(h, b, oo)
			servers[key] = s
			return s
		}
	}
	opts := &sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}
	mux := http.NewServeMux()
	mux.Handle("/mcp/{bundle}", knownBundle(h, tracked(o.Agent, sdk.NewStreamableHTTPHandler(get(false), opts))))
	mux.Handle("/mcp/{bundle}/acli", knownBundle(h, tracked(o.Agent, sdk.NewStreamableHTTPHandler(get(true), opts))))
	return mux
}

// knownBundle answers 404 with the loaded bundles for a path that names no servable bundle.
func knownBundle(h *host.Host, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := h.Bundle(r.PathValue("bundle")); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// callHeader carries, from the HTTP layer to a tool handler, the id under which the HTTP request's
// context is registered. The SDK ties a handler's context to the HTTP request only for 2026-07-28
// requests; for older ones a client that disconnects (or cancels) would leave the CLI running. The
// header is always overwritten here, so a client cannot name another request's id.
const callHeader = "X-Clihost-Call"

// agentHeader carries, from the HTTP layer to a tool handler, the name of the agent token the
// request carried (Options.Agent); it is always overwritten (or removed) here.
const agentHeader = "X-Clihost-Agent"

// callerOf is caller with the agent token a request over HTTP carried.
func callerOf(caller host.Caller, req *sdk.CallToolRequest) host.Caller {
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		caller.Agent = req.Extra.Header.Get(agentHeader)
	}
	return caller
}

var (
	httpCalls   sync.Map // id → context.Context of the HTTP request
	httpCallSeq atomic.Uint64
)

// tracked registers each request's context for withHTTPRequest, and names its agent (agent nil:
// none) in agentHeader.
func tracked(agent func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strconv.FormatUint(httpCallSeq.Add(1), 36) + "-" + rand.Text()
		r.Header.Set(callHeader, id)
		r.Header.Del(agentHeader)
		if agent != nil {
			if name := agent(r); name != "" {
				r.Header.Set(agentHeader, name)
			}
		}
		httpCalls.Store(id, r.Context())
		defer httpCalls.Delete(id)
		next.ServeHTTP(w, r)
	})
}

// withHTTPRequest returns ctx, additionally cancelled when the HTTP request that carried the call
// ends (the client went away). release must be called when the call is done.
func withHTTPRequest(ctx context.Context, req *sdk.CallToolRequest) (context.Context, func()) {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return ctx, func() {}
	}
	v, ok := httpCalls.Load(req.Extra.Header.Get(callHeader))
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(v.(context.Context), cancel)
	return ctx, func() { stop(); cancel() }
}

// Guard refuses (403) what a web page in a browser could send to a server on this machine: a
// request that arrived on a loopback address with a Host header naming something else (DNS
// rebinding: a page of evil.example whose name now resolves to 127.0.0.1), and a cross-origin
// request (its Origin or Sec-Fetch-Site header says another site sent it; http.CrossOriginProtection).
// Clients that are not browsers send neither, so they pass.
func Guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && IsLoopback(local.String()) && !IsLoopback(r.Host) {
			http.Error(w, fmt.Sprintf("forbidden: Host %q is not a loopback name; this server answers only requests for localhost (DNS rebinding)", r.Host), http.StatusForbidden)
			return
		}
		if err := cop.Check(r); err != nil {
			http.Error(w, "forbidden: a cross-origin request (a web page may not call this server)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// IsLoopback reports whether a host or host:port names this machine: localhost or a loopback
// address.
func IsLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
