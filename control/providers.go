package control

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// PathProviders lists the daemon's provider bundles (those with a metadata.provider block) with
// their circuit breakers: GET [?bundle=ID] → []ProviderStatus. clihostctl ask reads it to drive
// the providers through the daemon.
const PathProviders = "/v1/providers"

// The states of a provider's circuit breaker.
const (
	BreakerClosed   = "closed"    // calls go through
	BreakerOpen     = "open"      // calls are refused (provider_unavailable) until RetryAt
	BreakerHalfOpen = "half_open" // the cool-down is over: one probe call goes through
)

// ProviderStatus is one provider bundle as clihostctl ask drives it.
type ProviderStatus struct {
	Bundle string `json:"bundle"` // id@major
	ID     string `json:"id"`
	// Tool is the tool ask calls with {"prompt": …}; Format how its stdout is read.
	Tool   string `json:"tool"`
	Format string `json:"format"`
	// Model says the tool takes a "model" input.
	Model   bool         `json:"model"`
	Breaker BreakerState `json:"breaker"`
}

// BreakerState is a provider's circuit breaker, kept by the daemon while it runs (it is not
// persisted: a restarted daemon starts every breaker closed), one per provider bundle and user.
type BreakerState struct {
	State string `json:"state"` // closed, open, half_open
	// Failures counts the consecutive failed calls of the provider's tool (reset by a success).
	Failures int `json:"failures"`
	// Threshold is the number of consecutive failures that opens the breaker; Cooldown how long
	// it stays open before a probe call is let through.
	Threshold int   `json:"threshold"`
	CooldownS int64 `json:"cooldown_s"`
	// LastError is the category (and message) of the last failure.
	LastError string `json:"last_error,omitempty"`
	// OpenedAt and RetryAt are set while the breaker is open: when it opened and when the next
	// probe may go through.
	OpenedAt *time.Time `json:"opened_at,omitempty"`
	RetryAt  *time.Time `json:"retry_at,omitempty"`
}

// ProviderBackend is what a Backend offers for provider bundles, when it has any.
type ProviderBackend interface {
	// Providers lists the provider bundles (only bundle, matched as id or id@major, when set), with
	// the breakers of the peer whose request ctx belongs to (see PeerOf).
	Providers(ctx context.Context, bundle string) ([]ProviderStatus, error)
}

func providerHandlers(mux *http.ServeMux, b Backend) {
	pb, ok := b.(ProviderBackend)
	if !ok {
		return
	}
	mux.HandleFunc("GET "+PathProviders, func(w http.ResponseWriter, r *http.Request) {
		ps, err := pb.Providers(r.Context(), r.URL.Query().Get("bundle"))
		if err != nil {
			writeError(w, http.StatusNotFound, err.Error(), "clihostctl status lists the loaded bundles")
			return
		}
		writeJSON(w, ps)
	})
}

// Providers asks the daemon for its provider bundles (bundle: one of them, "" for all).
func (c *Client) Providers(ctx context.Context, bundle string) ([]ProviderStatus, error) {
	var ps []ProviderStatus
	path := PathProviders
	if bundle != "" {
		path += "?bundle=" + url.QueryEscape(bundle)
	}
	err := c.getJSON(ctx, path, &ps)
	return ps, err
}
