package agenttoken

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	def, ok := s.Token(Default)
	if !ok || len(def) != 64 {
		t.Fatalf("default token %q", def)
	}
	if st, err := os.Stat(filepath.Join(dir, "token")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	bot, err := s.Create("ci-bot")
	if err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]string{"Bearer " + def: Default, "Bearer " + bot: "ci-bot", bot: "", "Bearer " + bot + "x": "", "Bearer ": "", "": ""} {
		if got, ok := s.Match(header); got != want || ok != (want != "") {
			t.Errorf("Match(%q) = %q %v, want %q", header, got, ok, want)
		}
	}
	for _, bad := range []string{"", "Ci", "../x", "a/b", ".tmp", strings.Repeat("a", 65), "ci-bot"} {
		if _, err := s.Create(bad); err == nil {
			t.Errorf("Create(%q) accepted", bad)
		}
	}
	// Another start reads the named token back and ignores files that are not tokens.
	if err := os.WriteFile(filepath.Join(dir, "tokens", "x.tmp"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s2.Match("Bearer " + bot); got != "ci-bot" || len(s2.List()) != 2 {
		t.Fatalf("reopened: %q %+v", got, s2.List())
	}
	if err := s2.Revoke(Default); err == nil {
		t.Error("the default token was revoked")
	}
	if err := s2.Revoke("ci-bot"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.Match("Bearer " + bot); ok {
		t.Error("a revoked token still matches")
	}
	if _, err := os.Stat(filepath.Join(dir, "tokens", "ci-bot")); !os.IsNotExist(err) {
		t.Errorf("revoked token file: %v", err)
	}
	// A token file others may read is refused.
	if _, err := s2.Create("open"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "tokens", "open"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("world-readable token: %v", err)
	}
}
