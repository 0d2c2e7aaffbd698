package control

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/clihost/clihost/internal/agenttoken"
)

// PathTokens lists the MCP endpoints' bearer tokens (GET → []agenttoken.Info, never their
// values) and makes or revokes one (POST TokenChange → TokenInfo). Root and the daemon's own user
// only, as PathToken.
const PathTokens = "/v1/tokens"

// TokenBackend is what a Backend offers for named agent tokens, when it has them.
type TokenBackend interface {
	Tokens() []agenttoken.Info
	CreateToken(name string) (TokenInfo, error)
	RevokeToken(name string) error
}

// TokenChange makes (or, with Revoke, deletes) the token of agent Name.
type TokenChange struct {
	Name   string `json:"name"`
	Revoke bool   `json:"revoke,omitempty"`
}

func tokenHandlers(mux *http.ServeMux, b Backend, a Admission) {
	tb, ok := b.(TokenBackend)
	if !ok {
		return
	}
	operator := func(w http.ResponseWriter, r *http.Request) bool {
		return a.operatorOnly(w, r, "only root or clihostd's own user may list, make or revoke agent tokens",
			"a token lets its holder act as an agent in the daemon's workspace: ask the operator (sudo clihostctl token …)")
	}
	mux.HandleFunc("GET "+PathTokens, func(w http.ResponseWriter, r *http.Request) {
		if operator(w, r) {
			writeJSON(w, tb.Tokens())
		}
	})
	mux.HandleFunc("POST "+PathTokens, func(w http.ResponseWriter, r *http.Request) {
		if !operator(w, r) {
			return
		}
		var req TokenChange
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "bad token request: "+err.Error(), "")
			return
		}
		if req.Revoke {
			if err := tb.RevokeToken(req.Name); err != nil {
				writeError(w, http.StatusBadRequest, err.Error(), "clihostctl token list names the tokens")
				return
			}
			writeJSON(w, TokenInfo{Name: req.Name})
			return
		}
		info, err := tb.CreateToken(req.Name)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), "")
			return
		}
		writeJSON(w, info)
	})
}

// Tokens lists the agent tokens.
func (c *Client) Tokens(ctx context.Context) ([]agenttoken.Info, error) {
	var out []agenttoken.Info
	return out, c.getJSON(ctx, PathTokens, &out)
}

// ChangeToken makes or revokes an agent token.
func (c *Client) ChangeToken(ctx context.Context, req TokenChange) (TokenInfo, error) {
	var t TokenInfo
	resp, err := c.do(ctx, http.MethodPost, PathTokens, req)
	if err != nil {
		return t, err
	}
	defer resp.Body.Close()
	return t, json.NewDecoder(resp.Body).Decode(&t)
}
