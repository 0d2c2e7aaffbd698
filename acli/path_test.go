package acli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// workspace builds ws/{src/main.go, docs/, link-in → src, link-out → outside, dangling → outside/missing,
// loop → loop, rel-out → ../outside} next to an outside directory holding secret.txt.
func workspace(t testing.TB) (ws, outside string) {
	t.Helper()
	root := t.TempDir()
	ws, outside = filepath.Join(root, "ws"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(ws, "src"), filepath.Join(ws, "docs"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(ws, "src", "main.go"), filepath.Join(outside, "secret.txt")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"link-in":  filepath.Join(ws, "src"),
		"rel-in":   "src/main.go",
		"link-out": outside,
		"rel-out":  "../outside",
		"file-out": filepath.Join(outside, "secret.txt"),
		"dangling": filepath.Join(outside, "missing"),
		"loop":     "loop",
	} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	return ws, outside
}

func TestPathTraversal(t *testing.T) {
	b := kit(t)
	ws, _ := workspace(t)
	for _, tc := range []struct {
		value string
		why   string // "" when allowed
	}{
		{"src/main.go", ""},
		{"./src/main.go", ""},
		{"src/../docs/new.md", ""},
		{"src", ""},
		{".", ""},
		{"new/dir/file.txt", ""}, // does not exist yet: checked lexically
		{"link-in/main.go", ""},
		{"link-in/../docs", ""}, // .. after a symlink is physical: ws/src/.. = ws
		{"rel-in", ""},
		{"src/main.go/", ""},
		{"..", "leaves the workspace"},
		{"../outside/secret.txt", "leaves the workspace"},
		{"../../../etc/passwd", "leaves the workspace"},
		{"src/../../outside", "leaves the workspace"},
		{"new/../../x", "leaves the workspace"},
		{"/etc/passwd", "is an absolute path"},
		{"//server/share", "is an absolute path"},
		{`\windows\system32`, "is an absolute path"},
		{`C:\Windows`, "is an absolute path"},
		{"c:relative", "is an absolute path"},
		{"~/.ssh/id_rsa", "starts with ~"},
		{"~root", "starts with ~"},
		{"src/~backup", ""},
		{"link-out", "resolves through a symlink"},
		{"link-out/secret.txt", "resolves through a symlink"},
		{"link-out/new-file", "resolves through a symlink"},
		{"rel-out/secret.txt", "resolves through a symlink"},
		{"file-out", "resolves through a symlink"},
		{"link-in/../link-out", "resolves through a symlink"},
		{"dangling", "cannot be resolved"},
		{"dangling/x", "cannot be resolved"},
		{"loop", "cannot be resolved"},
		// Lexically inside (outside/secret.txt), physically root/outside/secret.txt.
		{"link-out/../outside/secret.txt", "resolves through a symlink"},
		// Lexically ws/ws/src/main.go, physically root/ws/src/main.go: inside after all.
		{"link-out/../ws/src/main.go", ""},
	} {
		t.Run(tc.value, func(t *testing.T) {
			for _, cmd := range []string{"files copy " + quoteArg(tc.value) + " ok", "files cat ok " + quoteArg(tc.value), "files copy a b --also " + quoteArg(tc.value)} {
				_, err := Parse(b, cmd, Options{Workspace: ws})
				if tc.why == "" {
					if err != nil {
						t.Fatalf("%s: %v", cmd, err)
					}
					continue
				}
				if err == nil || err.Code != PathTraversalBlocked || !strings.Contains(err.Message, tc.why) || err.Hint == "" {
					t.Fatalf("%s: got %v, want PATH_TRAVERSAL_BLOCKED %q", cmd, err, tc.why)
				}
			}
		})
	}
}

func TestPathValuePassedUnchanged(t *testing.T) {
	b := kit(t)
	ws, _ := workspace(t)
	req, err := Parse(b, "files copy ./src/../src/main.go link-in/x", Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if want := (in{"src": "./src/../src/main.go", "dst": "link-in/x"}); !reflect.DeepEqual(req.Input, want) {
		t.Fatalf("input = %#v", req.Input)
	}
}

func TestPathWithoutWorkspace(t *testing.T) {
	b := kit(t)
	if _, err := Parse(b, "files copy link-out/anything b", Options{}); err != nil {
		t.Fatalf("without a workspace only lexical checks apply: %v", err)
	}
	if _, err := Parse(b, "files copy ../x b", Options{}); err == nil || err.Code != PathTraversalBlocked {
		t.Fatalf("lexical check without a workspace: %v", err)
	}
	if _, err := Parse(b, "files copy a b", Options{Workspace: filepath.Join(t.TempDir(), "missing")}); err == nil || err.Code != ExecutionError {
		t.Fatalf("missing workspace: %v", err)
	}
}

// The workspace itself may sit behind a symlink (as /tmp does on some systems).
func TestPathWorkspaceBehindSymlink(t *testing.T) {
	b := kit(t)
	ws, _ := workspace(t)
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(ws, alias); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b, "files copy src/main.go link-in/x", Options{Workspace: alias}); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b, "files copy link-out/secret.txt x", Options{Workspace: alias}); err == nil || err.Code != PathTraversalBlocked {
		t.Fatalf("got %v", err)
	}
}
