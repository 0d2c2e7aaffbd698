package agenttoken

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLive: a Live store sees tokens another store of the same state directory makes and
// revokes (with the revoked reason), and accepts nothing while the files cannot be read.
func TestLive(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	bot, err := other.Create("bot")
	if err != nil {
		t.Fatal(err)
	}
	if name, r, err := l.Check("Bearer " + bot); err != nil || r.Kind != OK || name != "bot" {
		t.Fatalf("a token made after: %q %+v %v", name, r, err)
	}
	if err := other.Revoke("bot"); err != nil {
		t.Fatal(err)
	}
	if _, r, err := l.Check("Bearer " + bot); err != nil || r.Kind != Revoked {
		t.Fatalf("a token revoked after: %+v %v", r, err)
	}
	def, _ := other.Token(Default)
	if err := os.Chmod(filepath.Join(dir, "token"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, r, err := l.Check("Bearer " + def); err == nil || r.Kind == OK {
		t.Fatalf("a token file others may read: %+v %v", r, err)
	}
	if err := os.Chmod(filepath.Join(dir, "token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, r, err := l.Check("Bearer " + def); err != nil || r.Kind != OK {
		t.Fatalf("the default token once its file is private again: %+v %v", r, err)
	}
}
