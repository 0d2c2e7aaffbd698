package output

import (
	"os"
	"testing"
)

// TestClassifyProviderRealLines: lines the agent CLIs print (Node, Rust, Claude Code, Codex, Gemini,
// Qwen) when a local file, the network or the egress proxy fails them, each in its class.
func TestClassifyProviderRealLines(t *testing.T) {
	cases := []struct{ text, want string }{
		// Local files: neither authentication nor not_found.
		{"Error: EACCES: permission denied, mkdir '/root/.gemini'", CategoryLocal},
		{"Error: EACCES: permission denied, open '/home/u/.qwen/settings.json'", CategoryLocal},
		{"Error: ENOENT: no such file or directory, open '/home/agent/.claude.json'", CategoryLocal},
		{"Error: EROFS: read-only file system, mkdir '/home/u/.claude/projects'", CategoryLocal},
		{"Error: failed to create /root/.codex: Permission denied (os error 13)", CategoryLocal},
		{"Error loading config.toml: No such file or directory (os error 2)", CategoryLocal},
		{"mkdir /home/agent/.ax-glm: read-only file system", CategoryLocal},
		{"node: /etc/ssl/openssl.cnf: Permission denied", CategoryLocal},
		{"API Error: 403 egress proxy: host statsig.anthropic.com is not in the egress allowlist", CategoryLocal},
		{"TypeError: fetch failed\n  [cause]: Error: Proxy response (403) !== 200 when HTTP Tunneling", CategoryLocal},
		// A missing command stays not_found; Google's PERMISSION_DENIED (a key's access) stays authentication.
		{"Error: spawn claude ENOENT", CategoryNotFound},
		{`{"error":{"code":403,"message":"Permission denied on resource project x.","status":"PERMISSION_DENIED"}}`, CategoryAuthentication},
		// Network: not unknown.
		{"TypeError: fetch failed", CategoryNetwork},
		{"Error: getaddrinfo EAI_AGAIN generativelanguage.googleapis.com", CategoryNetwork},
		{"FetchError: request to https://api.x.ai/v1 failed, reason: getaddrinfo ENOTFOUND api.x.ai", CategoryNetwork},
		{"TypeError: fetch failed\n  [cause]: Error: Proxy response (502) !== 200 when HTTP Tunneling { code: 'UND_ERR_ABORTED' }", CategoryNetwork},
		{"Error [ERR_PROXY_TUNNEL]: Failed to establish a tunnel", CategoryNetwork},
		{"Reconnecting... waiting for network (Connection failed: error sending request)", CategoryNetwork},
		{"API Error: Connection error.", CategoryNetwork},
		{"connect ENETUNREACH 2606:4700::6812:1a2b:443", CategoryNetwork},
		{"API Error: 502 egress proxy: lookup api.anthropic.com: no such host", CategoryNetwork},
		{"API Error: 504 egress proxy: lookup api.anthropic.com: i/o timeout", CategoryNetwork},
		// A provider's own error in the same text keeps its category.
		{"Warning: EACCES: permission denied, open '/home/u/.gemini/tmp/log.json'\nError: 429 RATE_LIMIT_EXCEEDED", CategoryRateLimit},
		{"ENOENT: no such file or directory, open '/home/u/.qwen/cache'\n[API Error: 503 service_unavailable]", CategoryServer},
		// The table as before.
		{"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}", CategoryRateLimit},
		{"Invalid API key · Please run /login", CategoryAuthentication},
	}
	for _, c := range cases {
		if got := ClassifyProvider(c.text, 1); got.Category != c.want {
			t.Errorf("%q: %s, want %s", c.text, got.Category, c.want)
		}
	}
}

// TestClassifyProviderIgnoresRetryNotices: the error fields of Claude Code's system/api_retry
// events (and Codex's "Reconnecting..." events) are the CLI's own retries, not the call's error:
// the call's error wins, and when there is none the last notice says what the CLI was retrying.
func TestClassifyProviderIgnoresRetryNotices(t *testing.T) {
	retry := `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed"}`
	stream := retry + "\n" + `{"type":"result","subtype":"success","is_error":true,"result":"API Error: 503 service_unavailable"}`
	if got := ClassifyProvider(stream, 1); got.Category != CategoryServer {
		t.Errorf("result after an api_retry: %s (%q), want server", got.Category, got.Message)
	}
	r, _ := ParseProvider(ProviderStreamJSON, []byte(retry+"\n"+`{"type":"result","is_error":false,"result":"fine"}`))
	if r.Error != "" || r.Content != "fine" || len(r.Retries) != 1 {
		t.Errorf("parse: %+v", r)
	}
	noResponse := `{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":9000,"error_status":null,"error":"unknown"}`
	if got := ClassifyProvider(noResponse, 1); got.Category != CategoryNetwork {
		t.Errorf("only retries without a response: %s (%q), want network", got.Category, got.Message)
	}
}

// TestClassifyTimeout: a call stopped at its deadline is classified from what it printed.
func TestClassifyTimeout(t *testing.T) {
	cases := []struct{ stdout, stderr, want string }{
		{`{"type":"thread.started","thread_id":"t"}` + "\n" + `{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`, "", CategoryNetwork},
		{`{"type":"system","subtype":"init"}` + "\n" + `{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1200,"error_status":502,"error":"server_error"}`, "", CategoryServer},
		{"", "Attempt 2 failed: exception TypeError: fetch failed sending request. Retrying with backoff...", CategoryNetwork},
		{`{"type":"system","subtype":"init"}`, "", CategoryTimeout},
		{"", "", CategoryTimeout},
	}
	for _, c := range cases {
		got := ClassifyTimeout(c.stdout, c.stderr)
		if got.Category != c.want || got.ShouldRetry || !got.ShouldFallback {
			t.Errorf("stdout %q stderr %q: %+v, want %s, no retry, fallback", c.stdout, c.stderr, got, c.want)
		}
	}
}

// TestClassifyTimeoutRecorded: Codex 0.169's own output, recorded with no network until timeout(1)
// stopped it after 300 s (codex exec --json; it retries "waiting for network" without end, even
// with request_max_retries and stream_max_retries at 1): the deadline's class is network.
func TestClassifyTimeoutRecorded(t *testing.T) {
	data, err := os.ReadFile("testdata/codex-0.169-recorded-no-network-timeout.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := ParseProvider(ProviderStreamJSON, data)
	if r.Error != "" || r.Content != "" || len(r.Retries) == 0 {
		t.Fatalf("parse: %+v", r)
	}
	if pe := ClassifyTimeout(string(data), "Reading additional input from stdin...\n"); pe.Category != CategoryNetwork {
		t.Fatalf("%+v, want network", pe)
	}
}
