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

// rawPost POSTs one JSON-RPC message to url as a streamable HTTP client does and returns the
// response's Content-Type and body.
func rawPost(t *testing.T, url, body string) (string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %v %s", resp.Status, err, out)
	}
	return resp.Header.Get("Content-Type"), string(out)
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
		ct, out := rawPost(t, url, body)
		if ct != "application/json" || !strings.HasPrefix(out, `{"jsonrpc":"2.0"`) || !strings.Contains(out, `"result"`) {
			t.Errorf("%s: Content-Type %q, body %.300s; want one application/json response", name, ct, out)
		}
	}

	for name, meta := range map[string]string{
		"plain":   `{"progressToken":"tok"}`,
		"escaped": `{"progress\u0054oken":"tok"}`,
	} {
		ct, out := rawPost(t, url, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":`+meta+`,"name":"nap","arguments":{"s":"0.4"}}}`)
		if ct != "text/event-stream" || !strings.Contains(out, `"method":"notifications/progress"`) ||
			strings.Index(out, "notifications/progress") > strings.Index(out, `"result"`) {
			t.Errorf("%s progress token: Content-Type %q, body %.500s; want an SSE stream with progress before the result", name, ct, out)
		}
	}
}

// TestHTTPBodyLimit: the body is read under the SDK's limit before the SDK sees it; a larger one
// is refused with 413, as the SDK refuses it.
func TestHTTPBodyLimit(t *testing.T) {
	srv := httptest.NewServer(Handler(sleepHost(t), Options{Caller: host.Caller{Workspace: fixture.Workspace(t)}}))
	defer srv.Close()
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 5<<20) + `"}}`
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp/sleep", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("%s %.200s; want 413", resp.Status, out)
	}
}
