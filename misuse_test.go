package clihost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateDirApartFromWorkspace: a state directory that is the workspace, lies inside it
// (WithStateDir(".clihost") with the current directory as the workspace) or contains it is
// refused by New. Inside a workspace, every tool allowed to write ./** could replace the CLIs
// Install put in its bin/ (which then run under another bundle's sandbox and credentials) and
// the homes it keeps; clihost never lets a sandbox write its own state.
func TestStateDirApartFromWorkspace(t *testing.T) {
	ws := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(ws)
	for name, opts := range map[string][]Option{
		"the workspace":                 {WithStateDir(ws), WithWorkspace(ws)},
		"inside the workspace":          {WithStateDir(filepath.Join(ws, ".clihost")), WithWorkspace(ws)},
		"relative, in the current dir":  {WithStateDir(".clihost")},
		"through a symlink":             {WithStateDir(filepath.Join(link, ".clihost")), WithWorkspace(ws)},
		"containing the workspace":      {WithStateDir(ws), WithWorkspace(filepath.Join(ws, "sub"))},
		"the workspace through symlink": {WithStateDir(link), WithWorkspace(ws)},
	} {
		h, err := New(context.Background(), append(opts, WithCatalog())...)
		if err == nil {
			h.Close()
			t.Errorf("%s: New succeeded with the state directory overlapping the workspace", name)
			continue
		}
		if !strings.Contains(err.Error(), "workspace") {
			t.Errorf("%s: %v, want an error naming the workspace", name, err)
		}
	}
	// Beside it is fine.
	h, err := New(context.Background(), WithCatalog(), WithStateDir(filepath.Join(t.TempDir(), "state")), WithWorkspace(ws))
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
}

// TestNilArgumentsRefused: a nil tool, fs.FS or Option is an error from New and Lint, never a
// panic of the embedding program.
func TestNilArgumentsRefused(t *testing.T) {
	for name, opt := range map[string]Option{
		"nil tool":   WithDefinitions(DefineCli(lsCLI(), "", DefineTool("list", lsTool(), ""), nil)),
		"nil fs.FS":  WithBundleFS("nothing", nil),
		"nil Option": nil,
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			if h, err := New(context.Background(), opt, WithWorkspace(t.TempDir())); err == nil {
				h.Close()
				t.Errorf("New succeeded")
			}
			if _, err := Lint(opt); err == nil {
				t.Errorf("Lint succeeded")
			}
		})
	}
}
