package clihost

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
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

// TestHintsNameTheGoAPI: the errors a Host with a state directory returns tell its embedder what
// to call (Host.Setup, Host.Login, SetupOptions.Values, Host.Lint), never a clihostctl command,
// which would act on a daemon's state, not this Host's.
func TestHintsNameTheGoAPI(t *testing.T) {
	ctx := context.Background()
	c := lsCLI()
	c.Setup = []manifest.SetupStep{{ID: "colour", Kind: "prompt", Type: "text", Prompt: "Which colour?", Persist: &manifest.Persist{Env: "LS_COLOUR"}}}
	c.Auth = &manifest.Auth{Login: &manifest.Login{Cmd: "ls --version", CompletesWhen: &manifest.ExitCheck{Cmd: "ls --version"}}}
	broken := lsTool()
	broken.Runner = nil
	bad := lsCLI()
	bad.ID = "broken"
	h, err := New(ctx, WithDefinitions(DefineCli(c, "", DefineTool("list", lsTool(), "")), DefineCli(bad, "", DefineTool("list", broken, ""))),
		WithStateDir(t.TempDir()), WithWorkspace(fixture.Workspace(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	check := func(what string, err error, want string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: %v, want a *Error", what, err)
		}
		text := e.Message + " " + e.Hint
		if strings.Contains(text, "clihostctl") || strings.Contains(text, "clihostd") || !strings.Contains(text, want) {
			t.Errorf("%s: %q, want %q and no clihostctl or clihostd", what, text, want)
		}
	}
	list := func() error {
		_, err := h.Call(ctx, "ls", "list", map[string]any{"path": "."}, CallOptions{})
		return err
	}
	check("a call before setup", list(), "Host.Setup")
	check("setup without the answer", h.Setup(ctx, "ls", SetupOptions{}), "SetupOptions.Values")
	if err := h.Setup(ctx, "ls", SetupOptions{Values: map[string]string{"colour": "red"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Logout("ls"); err != nil {
		t.Fatal(err)
	}
	check("a call logged out", list(), "Host.Login")
	_, err = h.Call(ctx, "broken", "list", map[string]any{"path": "."}, CallOptions{})
	check("a bundle with lint errors", err, "Host.Lint")

}

// TestConcurrentFirstCalls: a Host's methods may be called from several goroutines, the first calls
// included: as root, each CLI's uid gets its home in the state directory on first use, and calls
// racing to make it all run (none sees it half made, owned by root).
func TestConcurrentFirstCalls(t *testing.T) {
	fixture.NeedRoot(t)
	ctx := context.Background()
	ws := fixture.Workspace(t)
	for range 10 {
		h, err := New(ctx, WithDefinitions(lsDefinition(t)), WithStateDir(t.TempDir()), WithWorkspace(ws))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				if _, err := h.Call(ctx, "ls", "list", map[string]any{"path": "."}, CallOptions{}); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		h.Close()
		close(errs)
		for err := range errs {
			t.Fatalf("a first call racing others: %v", err)
		}
	}
}

// TestApprovalHintNamesAnswerApproval: approval_required tells the embedder how it answers
// (Host.AnswerApproval with the pending id), not to "run the call from a terminal", which only a
// person at clihostctl can do.
func TestApprovalHintNamesAnswerApproval(t *testing.T) {
	h, err := New(context.Background(), WithDefinitions(lsDefinition(t, func(tool *manifest.Tool) { tool.Approval = "always" })),
		WithWorkspace(fixture.Workspace(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	_, err = h.Call(context.Background(), "ls", "list", map[string]any{"path": "."}, CallOptions{})
	var e *Error
	if !errors.As(err, &e) || e.Code != errcode.ApprovalRequired {
		t.Fatalf("%v, want approval_required", err)
	}
	if !strings.Contains(e.Hint, "Host.AnswerApproval") || !strings.Contains(e.Hint, e.Detail.Approval.ID) || strings.Contains(e.Hint, "terminal") {
		t.Errorf("hint %q, want Host.AnswerApproval with the id %s", e.Hint, e.Detail.Approval.ID)
	}
}

// TestInstallCancelled: an Install whose context ends (cancelled, or its deadline passed) while the
// download stalls stops at once with cancelled, as a call does, not install_failed with advice to
// fix the bundle.
func TestInstallCancelled(t *testing.T) {
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("x"))
		w.(http.Flusher).Flush()
		<-stall
	}))
	defer srv.Close()
	defer close(stall)
	h, err := New(context.Background(), WithDefinitions(echoDefinition(srv.URL+"/echo", strings.Repeat("0", 64))),
		WithStateDir(t.TempDir()), WithWorkspace(fixture.Workspace(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err = h.Install(ctx, "echo", InstallOptions{})
	var e *Error
	if !errors.As(err, &e) || e.Code != errcode.Cancelled || time.Since(start) > 10*time.Second {
		t.Errorf("Install past its deadline: %v after %v, want cancelled", err, time.Since(start))
	}
}

// TestLifecycleCancelled: a Login waiting for its completes_when check whose context ends returns
// cancelled (the caller's doing), not auth_required with "run Login again".
func TestLifecycleCancelled(t *testing.T) {
	c := lsCLI()
	c.Auth = &manifest.Auth{Login: &manifest.Login{Cmd: "ls --version", CompletesWhen: &manifest.ExitCheck{Cmd: "ls ./never-there"}}}
	h, err := New(context.Background(), WithDefinitions(DefineCli(c, "", DefineTool("list", lsTool(), ""))),
		WithStateDir(t.TempDir()), WithWorkspace(fixture.Workspace(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var e *Error
	if err := h.Login(ctx, "ls", LoginOptions{}); !errors.As(err, &e) || e.Code != errcode.Cancelled {
		t.Errorf("Login past its deadline: %v, want cancelled", err)
	}
}
