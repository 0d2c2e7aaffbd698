package control

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/sandboxprobe"
)

type fakeBackend struct{ audit string }

func (f fakeBackend) Status(context.Context, string) ([]BundleStatus, error) {
	return []BundleStatus{{ID: "jq", Key: "jq@1", Install: "installed", Ready: true}}, nil
}
func (f fakeBackend) Install(_ context.Context, req InstallRequest, progress func(InstallEvent)) InstallEvent {
	progress(InstallEvent{Phase: "progress", Done: 1, Total: 2})
	return InstallEvent{Phase: "done", Message: "installed " + req.Bundle}
}
func (f fakeBackend) RecordInstall(_ context.Context, req RecordRequest) InstallEvent {
	return InstallEvent{Phase: "done", Method: req.Method}
}

// Call echoes who called which tool, so the test sees the peer credentials arrive: user name, uid,
// gid and supplementary groups, the workspace, and the tool.
func (f fakeBackend) Call(_ context.Context, req CallRequest, _ map[string]any, c Caller) callresult.Envelope {
	return callresult.Envelope{OK: true, Value: fmt.Sprintf("%s %d %d %v %s:%s", c.User, c.Peer.UID, c.Peer.GID, c.Peer.Groups, c.Workspace, req.Tool)}
}
func (f fakeBackend) Token() TokenInfo { return TokenInfo{Token: "t"} }
func (f fakeBackend) Daemon(_ context.Context, probe bool) DaemonStatus {
	return DaemonStatus{Version: "test", Sandbox: sandboxprobe.Result{State: map[bool]string{true: sandboxprobe.Works, false: sandboxprobe.Off}[probe]}}
}
func (f fakeBackend) AuditFile() string { return f.audit }

func TestAdmission(t *testing.T) {
	a := Admission{OwnerUID: 1000, GroupID: -1}
	for _, c := range []struct {
		p    Peer
		want bool
	}{{Peer{UID: 0}, true}, {Peer{UID: 1000}, true}, {Peer{UID: 1001, GID: 1001}, false}, {Peer{UID: 1001, GID: 1001, Groups: []int{4242}}, false}} {
		if got := a.admits(c.p); got != c.want {
			t.Errorf("admits(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
	if !(Admission{OwnerUID: 1000, GroupID: 4242}).admits(Peer{UID: 1001, GID: 4242}) {
		t.Error("a member of the configured group was refused")
	}
	// A supplementary group the peer's process holds (SO_PEERGROUPS), even if the user database
	// has no such user.
	if !(Admission{OwnerUID: 1000, GroupID: 4242}).admits(Peer{UID: 424242, GID: 1001, Groups: []int{7, 4242}}) {
		t.Error("a process in the configured group (supplementary) was refused")
	}
}

// TestSocketRoundTrip serves the API on a real unix socket: the peer's credentials are read (the
// caller's user name reaches the call), status, install progress, calls and the audit log go through.
func TestSocketRoundTrip(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "ctl.sock")
	audit := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(audit, []byte("{\"type\":\"cli.invoked\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func(a Admission) func() {
		ln, err := Listen(sock, -1)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: Handler(fakeBackend{audit: audit}, a), ConnContext: ConnContext}
		go srv.Serve(ln)
		return func() { srv.Close() }
	}
	stop := serve(Admission{OwnerUID: os.Geteuid(), GroupID: -1})
	if _, err := Listen(sock, -1); err == nil || !strings.Contains(err.Error(), "another clihostd") {
		t.Fatalf("a second listener on a live socket: %v", err)
	}
	c := NewClient(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx, "")
	if err != nil || len(st) != 1 || st[0].Key != "jq@1" {
		t.Fatalf("status %+v %v", st, err)
	}
	for _, probe := range []bool{false, true} {
		if d, err := c.Daemon(ctx, probe); err != nil || d.Version != "test" || d.Sandbox.Works() != probe {
			t.Fatalf("daemon (probe %v): %+v %v", probe, d, err)
		}
	}
	var events int
	last, err := c.Install(ctx, InstallRequest{Bundle: "jq"}, func(InstallEvent) { events++ })
	if err != nil || last.Phase != "done" || events != 2 {
		t.Fatalf("install %+v %v (%d events)", last, err, events)
	}
	env, err := c.Call(ctx, CallRequest{Bundle: "jq", Tool: "eval", Workspace: "/w"})
	groups, _ := os.Getgroups()
	slices.Sort(groups)
	want := fmt.Sprintf(" %d %d %v /w:eval", os.Geteuid(), os.Getegid(), groups)
	if err != nil || !env.OK || !strings.HasSuffix(env.Value.(string), want) {
		t.Fatalf("call %+v %v, want the value to end in %q", env, err, want)
	}
	var b strings.Builder
	if err := c.Audit(ctx, false, false, &b); err != nil || !strings.Contains(b.String(), "cli.invoked") {
		t.Fatalf("audit %q %v", b.String(), err)
	}
	visits := 0
	ev, err := c.Setup(ctx, SetupRequest{ScopeRequest: ScopeRequest{Bundle: "x"}, Values: map[string]string{"pick": "a"}}, func(SetupEvent) { visits++ })
	if err != nil || ev.Phase != "done" || visits != 1 || !ev.Steps[0].Done {
		t.Fatalf("setup %+v %v (%d visits)", ev, err, visits)
	}
	if res, err := c.Login(ctx, ScopeRequest{Bundle: "x"}); err != nil || res.Phase != "authed" {
		t.Fatalf("login %+v %v", res, err)
	}
	stop()
}

func TestNoDaemon(t *testing.T) {
	_, err := NewClient(filepath.Join(t.TempDir(), "none.sock")).Status(context.Background(), "")
	if err == nil || !strings.Contains(err.Error(), ErrNoDaemon.Error()) {
		t.Fatalf("err = %v", err)
	}
}

func (f fakeBackend) SetupInfo(_ context.Context, req ScopeRequest, c Caller) (SetupInfo, error) {
	return SetupInfo{Bundle: req.Bundle, Workspace: c.User}, nil
}
func (f fakeBackend) Setup(_ context.Context, req SetupRequest, _ Caller, emit func(SetupEvent)) SetupEvent {
	emit(SetupEvent{Phase: "visit", Step: "pick", URL: "http://127.0.0.1:1/cb"})
	return SetupEvent{Phase: "done", Steps: []SetupStep{{ID: "pick", Done: req.Values["pick"] != ""}}}
}
func (f fakeBackend) LoginInfo(_ context.Context, req ScopeRequest, _ Caller) (LoginInfo, error) {
	return LoginInfo{Bundle: req.Bundle, Argv: []string{"/bin/true"}}, nil
}
func (f fakeBackend) Login(context.Context, ScopeRequest, Caller) AuthResult {
	return AuthResult{Phase: "authed"}
}
func (f fakeBackend) Logout(context.Context, ScopeRequest, Caller) AuthResult {
	return AuthResult{Phase: "unauthed"}
}

func TestClientSocketFallsBackToTheUnitsSocket(t *testing.T) {
	dir := t.TempDir()
	def, system := filepath.Join(dir, "user.sock"), filepath.Join(dir, "system.sock")
	if got := firstSocket(def, system); got != def {
		t.Fatalf("no socket anywhere: %q, want the default %q (its absence is the error to report)", got, def)
	}
	listen := func(p string) {
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	if err := os.WriteFile(def, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	listen(system)
	if got := firstSocket(def, system); got != system {
		t.Fatalf("a plain file at the default, the unit's socket listening: %q, want %q", got, system)
	}
	os.Remove(def)
	listen(def)
	if got := firstSocket(def, system); got != def {
		t.Fatalf("both listening: %q, want the caller's own default %q", got, def)
	}
}

// TestTokenOnlyForRootAndOwner (and the audit log, which records every caller's calls): the MCP bearer token goes to root and the daemon's own user; a
// member of --group, admitted to the socket, is refused it (403): with it, the member would run
// CLIs as the agent in the daemon's workspace, which it may not name itself. Before the fix every
// admitted peer got it.
func TestTokenOnlyForRootAndOwner(t *testing.T) {
	a := Admission{OwnerUID: 1000, GroupID: 4242}
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(audit, []byte(`{"type":"cli.invoked","user_id":"alice"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := Handler(fakeBackend{audit: audit}, a)
	for _, path := range []string{PathToken, PathAudit} {
		for _, c := range ownerOnlyPeers {
			rec := get(h, path, c.peer)
			if rec.Code != c.want {
				t.Errorf("%s: GET %s: HTTP %d, want %d (%s)", c.name, path, rec.Code, c.want, rec.Body.String())
			}
			if c.want != http.StatusOK && (strings.Contains(rec.Body.String(), `"token"`) || strings.Contains(rec.Body.String(), "alice")) {
				t.Errorf("%s: GET %s sent it: %s", c.name, path, rec.Body.String())
			}
			if c.want == http.StatusOK && path == PathAudit && !strings.Contains(rec.Body.String(), `"user_id":"alice"`) {
				t.Errorf("%s: GET %s: the audit log was not served: %s", c.name, path, rec.Body.String())
			}
		}
	}
}

// TestAllowUnverifiedOnlyForRootAndOwner: an install that lets a curl installer without a checksum
// run (as root, on a root daemon) is the operator's decision: a member of --group asking for it is
// refused (403) before the backend runs anything; the same member's ordinary install goes through.
// Before the fix the member's allow_unverified reached the installer.
func TestAllowUnverifiedOnlyForRootAndOwner(t *testing.T) {
	h := Handler(fakeBackend{}, Admission{OwnerUID: 1000, GroupID: 4242})
	for _, c := range []struct {
		name       string
		peer       Peer
		unverified bool
		want       int
	}{
		{"root", Peer{UID: 0}, true, http.StatusOK},
		{"the daemon's user", Peer{UID: 1000, GID: 1000}, true, http.StatusOK},
		{"a member, verified only", Peer{UID: 1001, GID: 1001, Groups: []int{4242}}, false, http.StatusOK},
		{"a member, unverified", Peer{UID: 1001, GID: 1001, Groups: []int{4242}}, true, http.StatusForbidden},
	} {
		body := fmt.Sprintf(`{"bundle":"jq","allow_unverified":%v}`, c.unverified)
		req := httptest.NewRequest(http.MethodPost, PathInstall, strings.NewReader(body))
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, c.peer))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: HTTP %d, want %d (%s)", c.name, rec.Code, c.want, rec.Body.String())
		}
	}
}
