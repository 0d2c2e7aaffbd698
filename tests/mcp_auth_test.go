package tests

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnauthorizedSaysWhy: clihostd's MCP endpoint refuses a request without a token, with a
// wrong one and with a revoked agent token, each with its reason. The official TypeScript SDK
// clients (v1 and v2, without an OAuth provider) throw with the reason and the hint ("run
// 'clihostctl token'"), and the SDK's own RFC 6750 parser reads error="invalid_token" and the
// reason from the challenge. (SDK v2's message is its own, "the server requires authorization
// (HTTP 401)"; the reason is in the error's data.text, the body.) The token itself is never echoed.
func TestUnauthorizedSaysWhy(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	r := d.ctl(t, "token", "create", "ci-bot")
	bot := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(bot) < 32 {
		t.Fatalf("token create: %d %s", r.code, r.stderr)
	}
	if r := d.ctl(t, "token", "revoke", "ci-bot"); r.code != 0 {
		t.Fatalf("token revoke: %d %s", r.code, r.stderr)
	}
	url := d.mcp + "/mcp/jq"
	for _, c := range []struct {
		name, token, want string
	}{
		{"no token", "", "no bearer token"},
		{"wrong token", strings.Repeat("0f", 32), "not a token of this server"},
		{"revoked token", bot, "agent token ci-bot was revoked"},
	} {
		for _, client := range []string{"client.mjs", "client2.mjs"} {
			args := []string{filepath.Join(e2eDir, client), "--timeout", "20000", "--script", `[{"op":"list"}]`, "--url", url}
			if c.token != "" {
				args = append(args, "--bearer", c.token)
			}
			cmd := exec.Command(nodeBin(t), args...)
			cmd.Env = mcpEnv()
			out, err := cmd.Output()
			var rep struct {
				Fatal struct {
					Message string
					Data    struct{ Text string } // SDK v2: the body, beside its own message
				} `json:"fatal"`
			}
			jerr := json.Unmarshal(out, &rep)
			shown := rep.Fatal.Message + " " + rep.Fatal.Data.Text
			if err == nil || jerr != nil || !strings.Contains(shown, c.want) || !strings.Contains(shown, "clihostctl token") {
				t.Errorf("%s, %s: %v, report %s; want the client's error to say %q and the hint", client, c.name, err, out, c.want)
			}
			if c.token != "" && strings.Contains(string(out), c.token) {
				t.Errorf("%s, %s: the token is echoed", client, c.name)
			}
			t.Logf("%s, %s: the client throws %q", client, c.name, rep.Fatal.Message)
		}
		args := []string{filepath.Join(e2eDir, "auth401.mjs"), url}
		if c.token != "" {
			args = append(args, c.token)
		}
		cmd := exec.Command(nodeBin(t), args...)
		out, err := cmd.Output()
		var got struct {
			Status                  int
			Error, ErrorDescription string
		}
		if err != nil || json.Unmarshal(out, &got) != nil || got.Status != 401 || got.Error != "invalid_token" || !strings.Contains(got.ErrorDescription, c.want) {
			t.Errorf("auth401.mjs, %s: %v %s; want 401, invalid_token and %q as the SDK reads the challenge", c.name, err, out, c.want)
		}
	}
}
