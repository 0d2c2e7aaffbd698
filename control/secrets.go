package control

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
)

// PathSecrets lists a bundle's SECRETS.md slots in the caller's scope (GET ?bundle=&workspace= →
// SecretList: names and set/unset, never values) and sets or unsets one (POST SecretRequest →
// SecretList).
const PathSecrets = "/v1/secrets"

// SecretRequest sets (Value) or empties (Unset) the slot Name designates (a slug or one of its
// variables) in the caller's scope: the request's workspace and the peer's user.
type SecretRequest struct {
	ScopeRequest
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	Unset bool   `json:"unset,omitempty"`
}

// SecretInfo is one slot of a bundle's inventory as clihostctl shows it. It never holds a value.
type SecretInfo struct {
	Slug        string   `json:"slug"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Kind        string   `json:"kind"`
	Env         []string `json:"env"`
	Required    bool     `json:"required"`
	Tools       []string `json:"tools,omitempty"` // access.bind's tools; empty: every tool
	Set         bool     `json:"set"`
}

// SecretList is a bundle's slots in one scope.
type SecretList struct {
	Bundle    string       `json:"bundle"`
	Workspace string       `json:"workspace"`
	User      string       `json:"user"`
	Secrets   []SecretInfo `json:"secrets"`
}

// SecretBackend is what a Backend that keeps secrets offers.
type SecretBackend interface {
	SecretList(ctx context.Context, req ScopeRequest, caller Caller) (SecretList, error)
	SetSecret(ctx context.Context, req SecretRequest, caller Caller) (SecretList, error)
}

// secretHandlers adds the secret endpoints to mux when b keeps secrets. Every admitted peer may use
// them, for its own scope only (its user; a workspace it may use, which the backend checks).
func secretHandlers(mux *http.ServeMux, b Backend) {
	sb, ok := b.(SecretBackend)
	if !ok {
		return
	}
	mux.HandleFunc("GET "+PathSecrets, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		l, err := sb.SecretList(r.Context(), ScopeRequest{Bundle: q.Get("bundle"), Workspace: q.Get("workspace")}, callerOf(r, q.Get("workspace")))
		if err != nil {
			writeError(w, http.StatusNotFound, err.Error(), "")
			return
		}
		writeJSON(w, l)
	})
	mux.HandleFunc("POST "+PathSecrets, func(w http.ResponseWriter, r *http.Request) {
		var req SecretRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "bad secret request: the body is not a JSON secret request", "")
			return
		}
		l, err := sb.SetSecret(r.Context(), req, callerOf(r, req.Workspace))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), "clihostctl secret list BUNDLE names the bundle's secrets")
			return
		}
		writeJSON(w, l)
	})
}

// SecretList lists bundle's secrets (names, set or unset) in the caller's scope.
func (c *Client) SecretList(ctx context.Context, bundle, workspace string) (SecretList, error) {
	var l SecretList
	q := url.Values{"bundle": {bundle}}
	if workspace != "" {
		q.Set("workspace", workspace)
	}
	return l, c.getJSON(ctx, PathSecrets+"?"+q.Encode(), &l)
}

// SetSecret sets or unsets one secret in the caller's scope.
func (c *Client) SetSecret(ctx context.Context, req SecretRequest) (SecretList, error) {
	resp, err := c.do(ctx, http.MethodPost, PathSecrets, req)
	if err != nil {
		return SecretList{}, err
	}
	defer resp.Body.Close()
	var l SecretList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return SecretList{}, err
	}
	return l, nil
}
