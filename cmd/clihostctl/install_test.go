package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/doctor"
	"github.com/clihost/clihost/internal/fixture"
)

// TestRootOnly: sudo clihostctl install runs a package manager as root from a bundle on disk only
// when nobody but root can change what the bundle's path names. A symbolic link in a folder another
// user may write (the named path, or one a link leads through) is refused even when it leads to a
// root-only CLI.md: that user could have swapped it in after clihostctl read its own file there.
// Before the fix only the fully resolved path was checked, and both links passed.
func TestRootOnly(t *testing.T) {
	fixture.NeedRoot(t)
	base := t.TempDir() // root's, 0700 under the sticky /tmp
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	rootDir := filepath.Join(base, "root")
	userDir := filepath.Join(base, "user")
	for _, d := range []string{rootDir, userDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(userDir, fixture.AgentID, fixture.AgentID); err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(rootDir, "CLI.md")
	if err := os.WriteFile(cli, []byte("---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link in the user's folder to root's file; a link in root's folder through a link in the
	// user's folder; a root-owned link to root's file (positive control).
	if err := os.Symlink(cli, filepath.Join(userDir, "CLI.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(userDir, "CLI.md"), filepath.Join(rootDir, "via-user")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("CLI.md", filepath.Join(rootDir, "own-link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{cli, filepath.Join(rootDir, "own-link"), filepath.Join(rootDir, "..", "root", "CLI.md")} {
		if err := rootOnly(p); err != nil {
			t.Errorf("positive control %s: %v", p, err)
		}
	}
	for _, p := range []string{filepath.Join(userDir, "CLI.md"), filepath.Join(rootDir, "via-user")} {
		err := rootOnly(p)
		if err == nil || !strings.Contains(err.Error(), userDir+" does not belong to root") {
			t.Errorf("%s: %v, want %s named as not root's", p, err, userDir)
		}
	}
}

// TestInstallPrintsNoTerminalEscapes: under sudo, clihostctl install prints on root's terminal what
// whatever listens on the control socket says, and the daemon's user owns that socket's folder. A
// fake daemon's messages with terminal escape sequences (retitle the window, clear the screen,
// BEL) come out as visible \xNN text, never as the raw bytes. Before the fix they were printed raw.
func TestInstallPrintsNoTerminalEscapes(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	evil := "\x1b]0;pwned\x07\x1b[2J\u009b31m"
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+control.PathInstall, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		_ = enc.Encode(control.InstallEvent{Phase: "checking", Message: "checking " + evil})
		_ = enc.Encode(control.InstallEvent{Phase: "error", Message: "failed " + evil,
			Error: &callresult.Error{Code: "install_failed", Message: "failed", Hint: "hint " + evil}})
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	code, out, errOut := runCtl(t, "--socket", sock, "install", "jq")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, errOut)
	}
	for _, s := range []string{out, errOut} {
		if strings.ContainsAny(s, "\x1b\x07\u009b") {
			t.Fatalf("raw control characters reached the terminal: %q", s)
		}
	}
	for _, want := range []string{`checking \x1b]0;pwned\x07\x1b[2J\x9b31m`, `failed \x1b]0;pwned`, `hint: hint \x1b]0;pwned`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
}

// TestDoctorPrintsNoTerminalEscapes: doctor (run as root) prints what the daemon reports (its
// workspace, its probe's error and hint) without raw control characters. Before the fix it
// printed them raw.
func TestDoctorPrintsNoTerminalEscapes(t *testing.T) {
	var out strings.Builder
	g := &globalOptions{io: &IOStreams{Out: &out, ErrOut: &out}}
	printDoctor(g, doctor.Report{Checks: []doctor.Check{{Name: "daemon", Status: doctor.Fail,
		Message: "workspace /w\x1b]0;pwned\x07", Fix: "fix \x1b[2J"}}})
	if strings.ContainsAny(out.String(), "\x1b\x07") || !strings.Contains(out.String(), `/w\x1b]0;pwned\x07`) {
		t.Fatalf("doctor printed %q", out.String())
	}
}
