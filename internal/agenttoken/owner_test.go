package agenttoken

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestForeignTokenFile: a token file (the default one or a named agent's) owned by another user
// is refused, mode 0600 or not: that user wrote it, so knows the token, and could run every tool
// as the server's user (root running clihostd or serve-mcp with --state in a folder another user
// prepared, or the state key of a configuration file naming one).
func TestForeignTokenFile(t *testing.T) {
	fixture.NeedRoot(t)
	eve := fixture.User(t, "clihost-t-outside")
	for _, file := range []string{"token", filepath.Join("tokens", "planted")} {
		dir := t.TempDir()
		if _, err := Open(dir); err != nil { // the default token, ours
			t.Fatal(err)
		}
		path := filepath.Join(dir, file)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Repeat("e", 64)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, eve.UID, eve.GID); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir)
		if err == nil {
			_, ok := s.Match("Bearer " + strings.Repeat("e", 64))
			t.Fatalf("%s owned by uid %d was read (the planted token matches: %v)", file, eve.UID, ok)
		}
		if !strings.Contains(err.Error(), "owned by") {
			t.Errorf("%s: %v, want owned by", file, err)
		}
	}
}

// TestRevokedListNotFollowed: a symlink planted as tokens/.revoked is not written through when a
// token is revoked (root's daemon appending a line to the file it names, /etc/passwd say).
func TestRevokedListNotFollowed(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Create("bot")
	if err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(victim, []byte("root:x:0:0::/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "tokens", ".revoked")); err != nil {
		t.Fatal(err)
	}
	err = s.Revoke("bot")
	if data, _ := os.ReadFile(victim); string(data) != "root:x:0:0::/root:/bin/sh\n" {
		t.Fatalf("revoking wrote through the planted link (err %v): %q", err, data)
	}
	if err == nil {
		t.Error("revoking through a planted link succeeded")
	}
	if _, ok := s.Match("Bearer " + tok); ok {
		t.Error("the token still matches after a revoke whose list could not be written")
	}
}

// TestTokenTmpNotFollowed: a new token is not written through a file or link planted where it is
// first written (token.tmp, tokens/NAME.tmp), which its planter could read.
func TestTokenTmpNotFollowed(t *testing.T) {
	dir := t.TempDir()
	spy := filepath.Join(t.TempDir(), "spy")
	if err := os.WriteFile(spy, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(spy, filepath.Join(dir, "token.tmp")); err != nil {
		t.Fatal(err)
	}
	s, openErr := Open(dir)
	if data, _ := os.ReadFile(spy); len(data) != 0 {
		t.Fatalf("the default token was written through token.tmp: %q", data)
	}
	if openErr != nil {
		t.Fatal(openErr) // a stale or planted token.tmp is replaced, not an error
	}
	if err := os.MkdirAll(filepath.Join(dir, "tokens"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(spy, filepath.Join(dir, "tokens", "bot.tmp")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("bot"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(spy); len(data) != 0 {
		t.Fatalf("an agent token was written through tokens/bot.tmp: %q", data)
	}
	if st, err := os.Lstat(filepath.Join(dir, "tokens", "bot")); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Fatalf("tokens/bot: %v %v", st, err)
	}
}
