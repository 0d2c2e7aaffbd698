package control

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// PathPageLogin mints a one-time login URL of the daemon's status page (POST → PageLogin): the
// browser that opens it, on this machine, gets a session cookie for the page. Root and the
// daemon's own user only, as the audit log the page shows.
const PathPageLogin = "/v1/page/login"

// PageBackend is what a Backend offers for its status page, when it has one.
type PageBackend interface {
	PageLogin(ctx context.Context) (PageLogin, error)
}

// PageLogin is a login URL of the status page: it works once, before Expires, from loopback.
type PageLogin struct {
	URL     string    `json:"url"`
	Expires time.Time `json:"expires"`
}

func pageHandlers(mux *http.ServeMux, b Backend, a Admission) {
	pb, ok := b.(PageBackend)
	if !ok {
		return
	}
	mux.HandleFunc("POST "+PathPageLogin, func(w http.ResponseWriter, r *http.Request) {
		if !a.operatorOnly(w, r, "only root or clihostd's own user may open the status page",
			"it shows every caller's calls, as the audit log does: ask the operator (sudo clihostctl open)") {
			return
		}
		login, err := pb.PageLogin(r.Context())
		if err != nil {
			writeError(w, http.StatusConflict, err.Error(), "open the page with the bearer token instead (clihostctl token prints it)")
			return
		}
		writeJSON(w, login)
	})
}

// PageLogin asks the daemon for a one-time login URL of its status page.
func (c *Client) PageLogin(ctx context.Context) (PageLogin, error) {
	var l PageLogin
	resp, err := c.do(ctx, http.MethodPost, PathPageLogin, struct{}{})
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	return l, json.NewDecoder(resp.Body).Decode(&l)
}
