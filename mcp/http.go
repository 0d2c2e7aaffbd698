package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
)

// Handler serves every bundle of h over stateless streamable HTTP: tools mode at /mcp/{bundle}, ACLI
// mode at /mcp/{bundle}/acli. {bundle} is an id or id@major. One server per bundle and mode is built
// on first use and kept. A request's response is one application/json body unless it asked for
// progress notifications (see responder).
func Handler(h *host.Host, o Options) http.Handler {
	c := &serverCache{h: h, o: o, servers: map[serverKey]*sdk.Server{}}
	mux := http.NewServeMux()
	mux.Handle("/mcp/{bundle}", c.knownBundle(false, tracked(o.Agent, responder(serverOf))))
	mux.Handle("/mcp/{bundle}/acli", c.knownBundle(true, tracked(o.Agent, responder(serverOf))))
	return mux
}

// serverKey names one kept server: a bundle of the host (its registry does not change) and a mode.
type serverKey struct {
	b    *manifest.Bundle
	acli bool
}

// serverCache holds the servers Handler built, one per bundle and mode.
type serverCache struct {
	h       *host.Host
	o       Options
	mu      sync.Mutex
	servers map[serverKey]*sdk.Server
}

// get is the server of b in the mode, built on first use.
func (c *serverCache) get(b *manifest.Bundle, acliMode bool) *sdk.Server {
	key := serverKey{b, acliMode}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.servers[key]; ok {
		return s
	}
	o := c.o
	o.ACLI, o.Stateless = acliMode, true
	s := NewServer(c.h, b, o)
	c.servers[key] = s
	return s
}

// serverCtxKey marks a request's context with the server knownBundle chose for it.
type serverCtxKey struct{}

// serverOf is the server knownBundle chose for r (the SDK asks for it twice a request); nil, which
// the SDK answers with 400, when there is none.
func serverOf(r *http.Request) *sdk.Server {
	s, _ := r.Context().Value(serverCtxKey{}).(*sdk.Server)
	return s
}

// knownBundle answers 404 with the loaded bundles for a path that names no servable bundle, and
// hands the server of the bundle it names, in the mode, to next in the request's context: the
// bundle is looked up once a request.
func (c *serverCache) knownBundle(acliMode bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := c.h.Bundle(r.PathValue("bundle"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverCtxKey{}, c.get(b, acliMode))))
	})
}

// responder is the SDK's stateless streamable HTTP handler for the servers get returns, in the
// two forms the transport allows for a POSTed request: an SSE stream (text/event-stream) for a
// request that may need progress notifications before its response, and one application/json
// body for every other. A stateless server sends a client nothing but progress notifications and
// the responses (it makes no requests of the client, the approval flow is multi-round-trip
// results), so a request without a progress token loses nothing in JSON, and the daemon saves
// the stream's framing and its flushes (a write to the socket per event and one to end it).
func responder(get func(*http.Request) *sdk.Server) http.Handler {
	stream := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	plain := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			stream.ServeHTTP(w, r) // the SDK refuses it
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, sdk.DefaultMaxRequestBodyBytes))
		if err != nil {
			if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if mayWantProgress(body) {
			stream.ServeHTTP(w, r)
			return
		}
		plain.ServeHTTP(w, r)
	})
}

// mayWantProgress reports whether a request body may carry a progress token
// (params._meta.progressToken): it names the key, or holds a \u escape, which could spell the key
// in a form the bytes do not show. A false positive only keeps the SSE stream.
func mayWantProgress(body []byte) bool {
	return bytes.Contains(body, []byte("progressToken")) || bytes.Contains(body, []byte(`\u`))
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
