package clihost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
)

// echoDefinition is a bundle whose CLI, clihost-t-echo (coreutils' echo), is downloaded from url.
func echoDefinition(url, sum string) *Definition {
	return DefineCli(manifest.CLI{
		Name: "echo", ID: "echo", Version: "1.0.0", Bin: "clihost-t-echo", Description: "echo, downloaded.",
		Install:      []manifest.InstallMethod{{Method: manifest.MethodDownload, URL: url, ExtractBin: "clihost-t-echo", VerifySHA256: sum}},
		VersionCheck: manifest.VersionCheck{Cmd: "clihost-t-echo --version", Parse: `\(GNU coreutils\) (\d+\.\d+)`},
		Sandbox: manifest.Sandbox{Network: &manifest.Network{Egress: []string{}}, FS: &manifest.FS{Read: []string{"./**"}},
			Exec: &manifest.Exec{Allow: new(false)}, Env: &manifest.Env{Pass: []string{}}},
		Output: &manifest.Output{DefaultFormat: "text"},
	}, "", DefineTool("say", manifest.Tool{Name: "Say", ID: "echo.say", Version: "1.0.0", Description: "Prints the words.",
		Inputs:  map[string]any{"type": "object", "properties": map[string]any{"words": map[string]any{"type": "string", "pattern": "^[^-]"}}},
		Outputs: map[string]any{"type": "string"}, Runner: &manifest.ToolRunner{Argv: []string{"${input.words}"}}}, ""))
}

// TestInstall: Install downloads the CLI (checked against verify_sha256), checks its version in the
// sandbox and records it in the state directory, where calls, and a later Host, find it; a download
// that does not match its checksum installs nothing.
func TestInstall(t *testing.T) {
	fixture.Need(t, "echo")
	echo, err := os.ReadFile("/bin/echo")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(echo) }))
	defer srv.Close()
	sum := sha256.Sum256(echo)
	state, ws := t.TempDir(), fixture.Workspace(t)
	fixture.Reachable(t, state) // a root program's CLIs run as the workspace's owner, from state/bin
	open := func(d *Definition) *Host {
		h, err := New(context.Background(), WithDefinitions(d), WithStateDir(state), WithWorkspace(ws))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ctx := context.Background()
	var e *Error

	bad := open(echoDefinition(srv.URL+"/echo", strings.Repeat("0", 64)))
	if _, err := bad.Verify(ctx, "echo"); !errors.As(err, &e) || e.Code != errcode.NotInstalled {
		t.Fatalf("Verify before Install: %v, want not_installed", err)
	}
	if _, err := bad.Install(ctx, "echo", InstallOptions{}); !errors.As(err, &e) || e.Code != errcode.InstallFailed || !strings.Contains(e.Hint, "verify_sha256") {
		t.Fatalf("Install with a wrong checksum: %v, want install_failed", err)
	}
	if _, err := bad.Verify(ctx, "echo"); !errors.As(err, &e) || e.Code != errcode.NotInstalled {
		t.Fatalf("Verify after a refused download: %v, want not_installed", err)
	}
	bad.Close()

	h := open(echoDefinition(srv.URL+"/echo", hex.EncodeToString(sum[:])))
	bin, err := h.Install(ctx, "echo", InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bin.Method != manifest.MethodDownload || bin.Version == "" || !strings.HasPrefix(bin.Path, filepath.Join(state, "bin")+"/") {
		t.Errorf("Install: %+v", bin)
	}
	if env, err := h.Call(ctx, "echo", "say", map[string]any{"words": "installed"}, CallOptions{}); err != nil || env.Value != "installed\n" {
		t.Fatalf("call: %+v %v", env, err)
	}
	again, err := h.Install(ctx, "echo", InstallOptions{})
	if err != nil || again.Path != bin.Path || again.Method != "" {
		t.Errorf("Install again: %+v %v, want the binary found, nothing installed", again, err)
	}
	h.Close()
	later := open(echoDefinition(srv.URL+"/echo", hex.EncodeToString(sum[:])))
	defer later.Close()
	if found, err := later.Verify(ctx, "echo"); err != nil || found.Path != bin.Path {
		t.Errorf("a later Host: %+v %v, want %s", found, err, bin.Path)
	}
}

// TestNoState: a Host without a state directory keeps nothing and says so.
func TestNoState(t *testing.T) {
	h, err := New(context.Background(), WithCatalog(), WithWorkspace(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	if _, err := h.Install(ctx, "jq", InstallOptions{}); !errors.Is(err, ErrNoState) {
		t.Errorf("Install: %v", err)
	}
	if err := h.Setup(ctx, "jq", SetupOptions{}); !errors.Is(err, ErrNoState) {
		t.Errorf("Setup: %v", err)
	}
	if err := h.Login(ctx, "jq", LoginOptions{}); !errors.Is(err, ErrNoState) {
		t.Errorf("Login: %v", err)
	}
	if err := h.Logout("jq"); !errors.Is(err, ErrNoState) {
		t.Errorf("Logout: %v", err)
	}
}

// TestOptionsRefused: options that cannot be honoured fail New instead of being ignored.
func TestOptionsRefused(t *testing.T) {
	for name, opt := range map[string]Option{
		"relative deny":     WithDeny("state.db"),
		"missing dir":       WithBundleDirs(filepath.Join(t.TempDir(), "nothing")),
		"nil definition":    WithDefinitions(nil),
		"bad definition":    WithDefinitions(DefineCli(manifest.CLI{ID: "x", Commands: manifest.CommandTree{{Name: "a"}}}, "")),
		"missing workspace": WithWorkspace(filepath.Join(t.TempDir(), "nothing")),
	} {
		if h, err := New(context.Background(), opt); err == nil {
			h.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
	// The catalog named twice (WithDefaultBundles includes it) is loaded once.
	h, err := New(context.Background(), WithCatalog(), WithDefaultBundles(), WithWorkspace(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if r := h.Lint(); r.Errors != 0 {
		t.Errorf("catalog twice: %v", r.Findings)
	}
}
