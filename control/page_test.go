package control

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// pageBackend is fakeBackend with a status page whose login is url (an error when it is "").
type pageBackend struct {
	fakeBackend
	url string
}

func (p pageBackend) PageLogin(context.Context) (PageLogin, error) {
	if p.url == "" {
		return PageLogin{}, errors.New("the status page's login works only on loopback")
	}
	return PageLogin{URL: p.url, Expires: time.Now().Add(time.Minute)}, nil
}

// TestPageLoginOnlyForRootAndOwner: a login URL of the status page (which shows every caller's
// calls, as the audit log) goes to root and the daemon's own user; a member of --group, admitted
// to the socket, is refused it. A daemon without a loopback login says why, with the way in.
func TestPageLoginOnlyForRootAndOwner(t *testing.T) {
	const url = "http://127.0.0.1:8931/login?code=SECRET-CODE"
	h := Handler(pageBackend{url: url}, Admission{OwnerUID: 1000, GroupID: 4242})
	for _, c := range ownerOnlyPeers {
		rec := post(h, PathPageLogin, c.peer)
		if rec.Code != c.want {
			t.Errorf("%s: HTTP %d, want %d (%s)", c.name, rec.Code, c.want, rec.Body.String())
		}
		if got := strings.Contains(rec.Body.String(), "SECRET-CODE"); got != (c.want == http.StatusOK) {
			t.Errorf("%s: the URL sent: %v (%s)", c.name, got, rec.Body.String())
		}
	}
	rec := post(Handler(pageBackend{}, Admission{OwnerUID: 1000, GroupID: -1}), PathPageLogin, Peer{UID: 0})
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "loopback") || !strings.Contains(rec.Body.String(), "clihostctl token") {
		t.Errorf("no loopback login: HTTP %d %s", rec.Code, rec.Body.String())
	}
}

// post sends POST path with an empty JSON body as peer p.
func post(h http.Handler, path string, p Peer) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}"))
	req = req.WithContext(context.WithValue(req.Context(), peerKey{}, p))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
