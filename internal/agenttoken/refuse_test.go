package agenttoken

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCheckReasons: a request without a token, with another scheme, with a wrong token and with
// a revoked agent token (also after a restart) is refused, each with its own reason; the token's
// value is never part of the reason.
func TestCheckReasons(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := s.Token(Default)
	bot, err := s.Create("ci-bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke("ci-bot"); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Store{s, reopened} {
		for _, c := range []struct {
			header, agent string
			reason        Kind
		}{
			{"Bearer " + def, Default, OK},
			{"bearer " + def, Default, OK}, // the scheme is case-insensitive (RFC 9110 11.1)
			{"", "", NoToken},
			{"Basic dXNlcjpwYXNz", "", NotBearer},
			{"Bearer ", "", NoToken},
			{"Bearer " + def + "x", "", WrongToken},
			{"Bearer " + bot, "", Revoked},
		} {
			agent, reason := st.Check(c.header)
			if agent != c.agent || reason.Kind != c.reason {
				t.Errorf("Check(%q) = %q %v, want %q %v", c.header, agent, reason.Kind, c.agent, c.reason)
			}
			if c.reason == Revoked && reason.Agent != "ci-bot" {
				t.Errorf("a revoked token's reason names %q, want ci-bot", reason.Agent)
			}
		}
	}
}

// TestRefuse: the 401 carries RFC 6750's challenge (error, error_description, a quoted string
// without quotes or backslashes inside) and the same reason with the hint in its body.
func TestRefuse(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bot, _ := s.Create("ci-bot")
	_ = s.Revoke("ci-bot")
	for header, want := range map[string]string{
		"":                                  "no bearer token",
		"Basic x":                           "not a bearer token",
		"Bearer " + strings.Repeat("0", 64): "not a token of this server",
		"Bearer " + bot:                     "agent token ci-bot was revoked",
	} {
		_, reason := s.Check(header)
		rec := httptest.NewRecorder()
		Refuse(rec, "clihostd", reason, "run 'clihostctl token' on the daemon's host to print the token")
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%q: status %d", header, rec.Code)
		}
		ch := rec.Header().Get("WWW-Authenticate")
		desc, ok := strings.CutPrefix(ch, `Bearer realm="clihostd", error="invalid_token", error_description="`)
		if !ok || !strings.HasSuffix(desc, `"`) || strings.ContainsAny(strings.TrimSuffix(desc, `"`), "\"\\") {
			t.Errorf("%q: WWW-Authenticate %q", header, ch)
		}
		for _, part := range []string{ch, rec.Body.String()} {
			if !strings.Contains(part, want) || !strings.Contains(part, "clihostctl token") {
				t.Errorf("%q: %q does not say %q and the hint", header, part, want)
			}
			if bot != "" && strings.Contains(part, bot) {
				t.Errorf("%q: the token's value is in the reply", header)
			}
		}
	}
}
