package approval

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadPolicyWay: a FIFO named as the policy is refused at once (clihostd's start or reload
// does not hang on it), and a symlink in the middle of the policy's chain of links, in a folder
// others may write (neither on the named nor the resolved path), is refused: its writer could
// point it at another file and approve every call.
func TestLoadPolicyWay(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "approvals.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := LoadPolicy(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Error("LoadPolicy of a FIFO still blocked after 3s")
	}

	named, open, real := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(real, "approvals.yaml")
	if err := os.WriteFile(target, []byte("rules: [{bundle: git, decision: deny}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hop := filepath.Join(open, "hop")
	link := filepath.Join(named, "approvals.yaml")
	if err := os.Symlink(target, hop); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hop, link); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(link); err == nil || !strings.Contains(err.Error(), open) {
		t.Errorf("a link chain through a world-writable folder: %v", err)
	}
	if err := os.Chmod(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(link); err != nil {
		t.Errorf("the same chain once the folder is private: %v", err)
	}
}
