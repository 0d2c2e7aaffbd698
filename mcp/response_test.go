package mcp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// setStreamableHeaders sets the headers a streamable HTTP client sends with a POSTed message.
func setStreamableHeaders(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Protocol-Version", "2025-11-25")
}

// rawPost POSTs one JSON-RPC message to url as a streamable HTTP client does and returns the
// response's status, Content-Type and body.
func rawPost(t *testing.T, url, body string) (status int, contentType, out string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	setStreamableHeaders(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(data)
}

// TestHTTPResponseForm: a request that asks for no progress gets its response as one
// application/json body (no SSE framing); a tools/call with a progress token, named plainly or
// spelled with a JSON escape, still gets an SSE stream carrying the progress notifications before
// the result.
func TestHTTPResponseForm(t *testing.T) {
	fixture.Need(t, "sleep")
	srv := httptest.NewServer(Handler(sleepHost(t), Options{Caller: host.Caller{Workspace: fixture.Workspace(t)}}))
	defer srv.Close()
	url := srv.URL + "/mcp/sleep"

	for name, body := range map[string]string{
		"tools/list": `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
		"tools/call": `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nap","arguments":{"s":"0"}}}`,
		"ping":       `{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	} {
		status, ct, out := rawPost(t, url, body)
		if status != http.StatusOK || ct != "application/json" || !strings.HasPrefix(out, `{"jsonrpc":"2.0"`) || !strings.Contains(out, `"result"`) {
			t.Errorf("%s: %d, Content-Type %q, body %.300s; want one application/json response", name, status, ct, out)
		}
	}

	for name, meta := range map[string]string{
		"plain":   `{"progressToken":"tok"}`,
		"escaped": `{"progress\u0054oken":"tok"}`,
	} {
		status, ct, out := rawPost(t, url, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":`+meta+`,"name":"nap","arguments":{"s":"0.4"}}}`)
		if status != http.StatusOK || ct != "text/event-stream" || !strings.Contains(out, `"method":"notifications/progress"`) ||
			strings.Index(out, "notifications/progress") > strings.Index(out, `"result"`) {
			t.Errorf("%s progress token: %d, Content-Type %q, body %.500s; want an SSE stream with progress before the result", name, status, ct, out)
		}
	}
}

// TestHTTPBodyLimit: the body is read under the SDK's limit before the SDK sees it; a larger one
// is refused with 413, as the SDK refuses it.
func TestHTTPBodyLimit(t *testing.T) {
	srv := httptest.NewServer(Handler(sleepHost(t), Options{Caller: host.Caller{Workspace: fixture.Workspace(t)}}))
	defer srv.Close()
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 5<<20) + `"}}`
	if status, _, out := rawPost(t, srv.URL+"/mcp/sleep", big); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d %.200s; want 413", status, out)
	}
}
