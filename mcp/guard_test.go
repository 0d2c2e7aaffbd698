package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGuard: over a real loopback listener, requests a browser page could send (a rebound Host,
// another origin) get 403; a client that is not a browser, naming the server by a loopback name,
// passes.
func TestGuard(t *testing.T) {
	srv := httptest.NewServer(Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, c := range []struct {
		host    string
		headers map[string]string
		want    int
	}{
		{"127.0.0.1:" + port, nil, http.StatusNoContent},
		{"localhost:" + port, nil, http.StatusNoContent},
		{"LOCALHOST.:" + port, nil, http.StatusNoContent},
		{"[::1]:" + port, nil, http.StatusNoContent},
		{"127.0.0.1:" + port, map[string]string{"Origin": "http://127.0.0.1:" + port}, http.StatusNoContent},
		{"evil.example:" + port, nil, http.StatusForbidden},
		{"127.0.0.1.evil.example", nil, http.StatusForbidden},
		{"[::ffff:7f00:1]x", nil, http.StatusForbidden},
		{"127.0.0.1:" + port, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"127.0.0.1:" + port, map[string]string{"Origin": "http://localhost:" + port}, http.StatusForbidden}, // another origin, though local
		{"127.0.0.1:" + port, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		req.Host = c.host
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Host %q %v: %d, want %d", c.host, c.headers, resp.StatusCode, c.want)
		}
	}
}
