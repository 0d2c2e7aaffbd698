package tests

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/agenttoken"
	"github.com/clihost/clihost/internal/fixture"
)

// startServeMCPLines starts clihostctl serve-mcp with args and returns its base URL and the
// second line of its stderr (where the token is, or the warning of --no-auth).
func startServeMCPLines(t *testing.T, args ...string) (base, second string) {
	t.Helper()
	cmd := exec.Command(bin.ctl, append([]string{"serve-mcp", "--workspace", fixture.Workspace(t)}, args...)...)
	cmd.Env = mcpEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	fixture.Start(t, cmd)
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	var got []string
	for len(got) < 2 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve-mcp %v ended: %q", args, got)
			}
			got = append(got, l)
		case <-time.After(30 * time.Second):
			t.Fatalf("serve-mcp %v: %q after 30s", args, got)
		}
	}
	base, ok := strings.CutPrefix(got[0], "listening on ")
	if !ok {
		t.Fatalf("serve-mcp: first line %q", got[0])
	}
	return base, got[1]
}

// post sends an MCP initialize to url with the headers and returns the status and body.
func post(t *testing.T, url string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String()
}

// TestServeMCPAuth: serve-mcp requires clihostd's kind of bearer token, made in its state
// directory; the official client with the token works, without it gets the reason. Requests a
// browser page could send are refused with and without --no-auth.
func TestServeMCPAuth(t *testing.T) {
	state := t.TempDir()
	base, second := startServeMCPLines(t, "--listen", "127.0.0.1:0", "--state", state)
	tokenFile := filepath.Join(state, "token")
	if !strings.Contains(second, tokenFile) {
		t.Fatalf("second stderr line %q does not name the token file %s", second, tokenFile)
	}
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(tokenFile); st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", st.Mode().Perm())
	}
	token := strings.TrimSpace(string(raw))
	url := base + "/mcp/jq"
	rep := runClient(t, "client2.mjs", target{"http", []string{"--bearer", token, "--url", url}}, []step{{"op": "list"}})
	if len(rep.Steps) != 1 || rep.Steps[0].Error != nil {
		t.Fatalf("with the token: %+v", rep)
	}
	if code, body := post(t, url, nil); code != http.StatusUnauthorized || !strings.Contains(body, "no bearer token") || !strings.Contains(body, "token file") {
		t.Errorf("without a token: %d %q", code, body)
	}
	if code, body := post(t, url, map[string]string{"Authorization": "Bearer " + strings.Repeat("1", 64)}); code != http.StatusUnauthorized || !strings.Contains(body, "not a token of this server") {
		t.Errorf("with a wrong token: %d %q", code, body)
	}
	bearer := map[string]string{"Authorization": "Bearer " + token}
	if code, body := post(t, url, bearer); code != http.StatusOK {
		t.Errorf("raw initialize with the token: %d %q", code, body)
	}
	browserAttacks(t, url, bearer)

	// --no-auth: no token, and still no browser.
	base, second = startServeMCPLines(t, "--listen", "127.0.0.1:0", "--no-auth")
	if !strings.Contains(second, "WARNING") || !strings.Contains(second, "without authentication") {
		t.Errorf("--no-auth's second line %q is no warning", second)
	}
	if code, body := post(t, base+"/mcp/jq", nil); code != http.StatusOK {
		t.Errorf("--no-auth, no token: %d %q", code, body)
	}
	browserAttacks(t, base+"/mcp/jq", nil)
}

// browserAttacks: a DNS-rebound page (Host: its own name, resolving to 127.0.0.1) and a page of
// another origin posting to the loopback server (a "simple" request needs no CORS preflight) are
// refused with 403, whatever token they carry.
func browserAttacks(t *testing.T, url string, extra map[string]string) {
	t.Helper()
	for name, h := range map[string]map[string]string{
		"rebinding Host":         {"Host": "evil.example:8931"},
		"rebinding Host, Origin": {"Host": "evil.example:8931", "Origin": "http://evil.example:8931"},
		"cross-origin POST":      {"Origin": "http://evil.example", "Content-Type": "text/plain"},
		"cross-site fetch":       {"Sec-Fetch-Site": "cross-site"},
		"null origin":            {"Origin": "null"},
	} {
		for k, v := range extra {
			h[k] = v
		}
		if code, body := post(t, url, h); code != http.StatusForbidden {
			t.Errorf("%s: %d %q, want 403", name, code, body)
		}
	}
}

// TestServeMCPListenRefusals: serve-mcp refuses to listen beyond loopback unless told to
// (--allow-remote), and never without a token there; a remote listener still needs the token.
func TestServeMCPListenRefusals(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", "0.0.0.0:0"},
		{"--listen", "[::]:0"},
		{"--listen", ":0"},
		{"--listen", "192.0.2.10:0"},
		{"--listen", "[2001:db8::1]:0"},
		{"--listen", "myhost.example:0"},
		{"--listen", "0.0.0.0:0", "--no-auth"},
		{"--listen", "0.0.0.0:0", "--no-auth", "--allow-remote"},
		{"--listen", "[::]:0", "--no-auth", "--allow-remote"},
	} {
		r := runBin(t, bin.ctl, "", append([]string{"serve-mcp"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "not a loopback address") {
			t.Errorf("serve-mcp %v: exit %d, %q; want 2 and the refusal", args, r.code, r.stderr)
		}
	}
	if base, _ := startServeMCPLines(t, "--listen", "localhost:0", "--no-auth"); !strings.HasPrefix(base, "http://127.") && !strings.HasPrefix(base, "http://[::1]") {
		t.Errorf("--listen localhost:0 listens on %s", base)
	}
	state := t.TempDir()
	base, second := startServeMCPLines(t, "--listen", "0.0.0.0:0", "--allow-remote", "--state", state)
	if !strings.Contains(second, filepath.Join(state, "token")) {
		t.Errorf("--allow-remote: second line %q", second)
	}
	url := "http://127.0.0.1:" + base[strings.LastIndex(base, ":")+1:] + "/mcp/jq"
	if code, body := post(t, url, nil); code != http.StatusUnauthorized {
		t.Errorf("--allow-remote without a token: %d %q", code, body)
	}
	raw, _ := os.ReadFile(filepath.Join(state, "token"))
	if code, body := post(t, url, map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(raw))}); code != http.StatusOK {
		t.Errorf("--allow-remote with the token: %d %q", code, body)
	}
}

// TestServeMCPTokenChanges: serve-mcp shares its state directory's tokens with clihostd (the
// same files): a token clihostd revokes after serve-mcp started is refused by serve-mcp too, at
// once and with the reason, and one it makes is accepted.
func TestServeMCPTokenChanges(t *testing.T) {
	state := t.TempDir()
	s, err := agenttoken.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	bot, err := s.Create("bot")
	if err != nil {
		t.Fatal(err)
	}
	base, _ := startServeMCPLines(t, "--listen", "127.0.0.1:0", "--state", state)
	url := base + "/mcp/jq"
	if code, body := post(t, url, map[string]string{"Authorization": "Bearer " + bot}); code != http.StatusOK {
		t.Fatalf("bot's token before the revoke: %d %q", code, body)
	}
	other, err := agenttoken.Open(state) // clihostd's store of the same state directory
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Revoke("bot"); err != nil {
		t.Fatal(err)
	}
	fresh, err := other.Create("fresh")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, url, map[string]string{"Authorization": "Bearer " + bot}); code != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
		t.Errorf("bot's token after clihostd revoked it: %d %q", code, body)
	}
	if code, body := post(t, url, map[string]string{"Authorization": "Bearer " + fresh}); code != http.StatusOK {
		t.Errorf("a token clihostd made after serve-mcp started: %d %q", code, body)
	}
}
