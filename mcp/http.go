package mcp

import (
	"fmt"
	"net/http"
	"sync"

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
			oo.ACLI = acliMode
			s := NewServer(h, b, oo)
			servers[key] = s
			return s
		}
	}
	opts := &sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}
	mux := http.NewServeMux()
	mux.Handle("/mcp/{bundle}", sdk.NewStreamableHTTPHandler(get(false), opts))
	mux.Handle("/mcp/{bundle}/acli", sdk.NewStreamableHTTPHandler(get(true), opts))
	return mux
}
