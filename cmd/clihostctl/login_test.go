package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
)

// listenAs creates a unix socket listening at path whose credentials (what SO_PEERCRED tells a
// client) are uid's: listen(2) runs on a thread of this process that took uid as its effective
// uid with a raw system call (that thread only) and is never given back.
func listenAs(t *testing.T, path string, uid int) net.Listener {
	t.Helper()
	type res struct {
		ln  net.Listener
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread's credentials are not the process's any more.
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			c <- res{err: e}
			return
		}
		ln, err := net.Listen("unix", path)
		c <- res{ln, err}
	}()
	r := <-c
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.ln
}

// TestRootLoginRunsNothingAnUnprivilegedDaemonChose: clihostctl login runs the command (and the
// sandbox plan) the daemon sends. Under sudo against the unit's daemon (User=clihost, whose user
// owns /run/clihost), a compromised daemon user could send any command, sandbox off, and root ran
// it. Root's clihostctl now refuses to run what a daemon that is not root chose. Before the fix the
// fake daemon's command ran as root.
func TestRootLoginRunsNothingAnUnprivilegedDaemonChose(t *testing.T) {
	fixture.NeedRoot(t)
	dir := t.TempDir()
	fixture.Reachable(t, dir)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(dir, "ran-as-root")
	serve := func(uid int) string {
		sock := filepath.Join(dir, "fake"+strconv.Itoa(uid)+".sock")
		ln := listenAs(t, sock, uid)
		srv := &http.Server{Handler: fakeLoginDaemon(mark)}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return sock
	}
	code, _, errOut := runCtl(t, "--socket", serve(fixture.AgentID), "login", "gh", "--workspace", dir)
	if _, err := os.Stat(mark); err == nil {
		t.Fatalf("root ran the command an unprivileged daemon sent (exit %d): %s", code, errOut)
	}
	if code == 0 || !strings.Contains(errOut, "not root") {
		t.Fatalf("exit %d, want a refusal naming the daemon's uid as not root; stderr %q", code, errOut)
	}
	// Positive control: the same answer from a root daemon runs (a root daemon chooses root's sandbox).
	if code, _, errOut := runCtl(t, "--socket", serve(0), "login", "gh", "--workspace", dir); code != 0 {
		t.Fatalf("positive control, a root daemon: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("positive control, a root daemon: its login command did not run: %v", err)
	}
}

// fakeLoginDaemon answers a login with a command that writes mark, unsandboxed, and then "authed".
func fakeLoginDaemon(mark string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+control.PathLogin, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(control.LoginInfo{Bundle: "gh", Argv: []string{"/bin/sh", "-c", "id -u > " + mark}})
	})
	mux.HandleFunc("POST "+control.PathLogin, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(control.AuthResult{Phase: "authed"})
	})
	return mux
}

// TestSetupOpensOnlyWebURLs: a setup step's visit URL comes from the daemon and clihostctl hands
// it to xdg-open, which opens a file: URL or a local .desktop file with whatever runs it. Only
// http(s) URLs are opened: a fake xdg-open on PATH records what it gets; the https URL (positive
// control) reaches it, the file: URL never does (none within a second after it). Before the fix
// both were opened.
func TestSetupOpensOnlyWebURLs(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "opened")
	script := "#!/bin/sh\nprintf '%s\\n' \"$1\" >> " + log + "\n"
	if err := fixture.WriteFile(filepath.Join(dir, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	opened := func() string { b, _ := os.ReadFile(log); return string(b) }
	for _, c := range []struct {
		url  string
		open bool
	}{{"https://example.invalid/device", true}, {"file:///tmp/evil.desktop", false}} {
		sock := filepath.Join(dir, "fake.sock")
		os.Remove(sock)
		os.Remove(log)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET "+control.PathSetup, func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(control.SetupInfo{Bundle: "x"})
		})
		mux.HandleFunc("POST "+control.PathSetup, func(w http.ResponseWriter, r *http.Request) {
			enc := json.NewEncoder(w)
			_ = enc.Encode(control.SetupEvent{Phase: "visit", Step: "s", URL: c.url})
			_ = enc.Encode(control.SetupEvent{Phase: "done"})
		})
		srv := &http.Server{Handler: mux}
		go srv.Serve(ln)
		code, _, errOut := runCtl(t, "--socket", sock, "setup", "x", "--workspace", dir)
		srv.Close()
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.url, code, errOut)
		}
		got := false
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && !got; time.Sleep(20 * time.Millisecond) {
			got = strings.Contains(opened(), c.url)
		}
		if got != c.open {
			t.Errorf("%s: handed to xdg-open %v, want %v (opened: %q)", c.url, got, c.open, opened())
		}
	}
}

// TestTrustsDaemon: clihostctl runs a login a daemon chose only when that daemon is root or runs as
// clihostctl's own user; root and a socket group's member refuse a daemon of another, unprivileged
// user (whose logins are that user's anyway), naming it.
func TestTrustsDaemon(t *testing.T) {
	for _, tc := range []struct {
		daemon, self int
		ok           bool
		says         string
	}{
		{0, 0, true, ""}, {0, 1000, true, ""}, {998, 998, true, ""},
		{998, 0, false, "not root"}, {998, 1000, false, "neither root nor you (uid 1000)"},
	} {
		err := trustsDaemon(tc.daemon, tc.self, "/run/clihost/clihostd.sock")
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), tc.says) {
			t.Errorf("daemon uid %d, clihostctl uid %d: %v, want ok=%v saying %q", tc.daemon, tc.self, err, tc.ok, tc.says)
		}
	}
}

// TestSetupShowsDeviceCode: a device-flow step's visit carries the user code; clihostctl shows it
// with the verification URL, control characters a hostile server put in it removed.
func TestSetupShowsDeviceCode(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir+":"+os.Getenv("PATH")) // no xdg-open to run
	if err := fixture.WriteFile(filepath.Join(dir, "xdg-open"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+control.PathSetup, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(control.SetupInfo{Bundle: "x"})
	})
	mux.HandleFunc("POST "+control.PathSetup, func(w http.ResponseWriter, r *http.Request) {
		enc := json.NewEncoder(w)
		_ = enc.Encode(control.SetupEvent{Phase: "visit", Step: "login", URL: "https://auth.example/activate", UserCode: "WDJB-MJHT\x1b[2J"})
		_ = enc.Encode(control.SetupEvent{Phase: "done"})
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	code, _, errOut := runCtl(t, "--socket", sock, "setup", "x", "--workspace", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "enter the code WDJB-MJHT") || !strings.Contains(errOut, "https://auth.example/activate") || strings.Contains(errOut, "\x1b") {
		t.Fatalf("stderr %q", errOut)
	}
}

// TestLoginCallbackHelper is the login command of TestLoginRequiresCallbackURL (it does nothing
// unless that test runs it): it listens where CLIHOST_CALLBACK_URL says, checks that its last
// argument is the same URL (login.cmd's '${callback_url}'), takes one request and records its query.
func TestLoginCallbackHelper(t *testing.T) {
	out := os.Getenv("CALLBACK_HELPER_OUT")
	if out == "" {
		t.Skip("run by TestLoginRequiresCallbackURL")
	}
	u, err := url.Parse(os.Getenv("CLIHOST_CALLBACK_URL"))
	if err != nil || os.Args[len(os.Args)-1] != u.String() {
		t.Fatalf("callback URL %q, argument %q", u, os.Args[len(os.Args)-1])
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out+".url", []byte(u.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == u.Path {
			w.WriteHeader(http.StatusOK) // the browser gets its answer before the server goes
			w.(http.Flusher).Flush()
			got <- r.URL.RawQuery
		}
	})}
	go srv.Serve(ln)
	q := <-got
	// Shutdown, not Close: Close could end the connection before the answer left (the browser
	// then saw EOF; CI did once, under load).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	if err := os.WriteFile(out, []byte(q), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLoginRequiresCallbackURL: a login with requires_callback_url gets a loopback callback URL
// allocated by the host, in CLIHOST_CALLBACK_URL and in place of '${callback_url}'; a request to it
// (the browser's redirect) reaches the login command.
func TestLoginRequiresCallbackURL(t *testing.T) {
	dir := t.TempDir()
	fixture.Reachable(t, dir)
	out := filepath.Join(dir, "callback")
	sock := filepath.Join(dir, "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+control.PathLogin, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(control.LoginInfo{Bundle: "gh", RequiresCallbackURL: true,
			Argv:   []string{exe, "-test.run=^TestLoginCallbackHelper$", "-test.count=1", "--", "${callback_url}"},
			EnvSet: map[string]string{"CALLBACK_HELPER_OUT": out}})
	})
	mux.HandleFunc("POST "+control.PathLogin, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(control.AuthResult{Phase: "authed"})
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	type result struct {
		code   int
		errOut string
	}
	done := make(chan result, 1)
	ios, _, errb := testStreams("")
	go func() {
		code := run([]string{"--socket", sock, "login", "gh", "--workspace", dir}, newGlobalOptions(ios))
		done <- result{code, errb.String()}
	}()
	// The browser: the callback URL, requested once the login command listens.
	var cb string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && cb == ""; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(out + ".url"); err == nil {
			cb = string(b)
		}
	}
	if resp, err := http.Get(cb + "?code=abc"); err == nil {
		resp.Body.Close()
	}
	select {
	case r := <-done:
		if r.code != 0 || !strings.Contains(r.errOut, cb) {
			t.Fatalf("login: exit %d (want 0, the callback URL %q shown): %s", r.code, cb, r.errOut)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("login did not finish")
	}
	if !strings.HasPrefix(cb, "http://127.0.0.1:") {
		t.Fatalf("callback URL %q", cb)
	}
	if q, err := os.ReadFile(out); err != nil || string(q) != "code=abc" {
		t.Fatalf("the login command got %q, %v", q, err)
	}
}

// TestSandboxedLoginGetsItsCallback: as users deploy it, the login command runs in the kernel
// sandbox (its own network namespace, no network). With requires_callback_url the host's loopback
// port of the allocated URL is forwarded to the command's loopback while it runs: the browser's
// request reaches it; once the command ended, nothing answers there.
func TestSandboxedLoginGetsItsCallback(t *testing.T) {
	fixture.NeedRoot(t)
	sandboxedLoginCallback(t)
}

// TestSandboxedLoginGetsItsCallbackUnprivileged is the same login run by an unprivileged user
// (nobody): the test binary runs itself through setpriv, where the sandbox is built in a user
// namespace.
func TestSandboxedLoginGetsItsCallbackUnprivileged(t *testing.T) {
	if os.Getenv("CLIHOST_TEST_UNPRIVILEGED_LOGIN") == "1" {
		sandboxedLoginCallback(t)
		return
	}
	fixture.NeedRoot(t)
	fixture.Need(t, "setpriv")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	bin := filepath.Join(dir, "clihostctl.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := fixture.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o1777); err != nil { // past the umask
		t.Fatal(err)
	}
	fixture.Reachable(t, tmp)
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
		bin, "-test.run=^TestSandboxedLoginGetsItsCallbackUnprivileged$", "-test.count=1", "-test.v")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp, "HOME=" + tmp, "CLIHOST_TEST_UNPRIVILEGED_LOGIN=1"}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

// sandboxedLoginCallback runs a login with requires_callback_url in the sandbox and plays the
// browser (see TestSandboxedLoginGetsItsCallback).
func sandboxedLoginCallback(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "login-helper")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := fixture.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, filepath.Dir(bin))
	ws := fixture.Workspace(t)
	out := filepath.Join(ws, "callback")
	plan := &isolation.Plan{UID: fixture.AgentID, GID: fixture.AgentID, Exec: []string{bin}, ReadWrite: []string{ws},
		NoNetwork: true, Seccomp: true, NoExecMemfd: true}
	info := control.LoginInfo{Bundle: "gh", RequiresCallbackURL: true, Sandbox: plan,
		Argv:   []string{bin, "-test.run=^TestLoginCallbackHelper$", "-test.count=1", "--", "${callback_url}"},
		EnvSet: map[string]string{"CALLBACK_HELPER_OUT": out}}
	ios, _, errb := testStreams("")
	done := make(chan error, 1)
	go func() { done <- runLoginCommand(context.Background(), ios, info, ws) }()
	var cb string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && cb == ""; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(out + ".url"); err == nil {
			cb = string(b)
		}
	}
	if cb == "" {
		t.Fatal("the sandboxed login command never listened")
	}
	resp, err := http.Get(cb + "?code=xyz")
	if err != nil {
		t.Fatalf("the browser could not reach the callback %s: %v", cb, err)
	}
	resp.Body.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("login: %v; stderr %s", err, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("login did not finish")
	}
	if q, err := os.ReadFile(out); err != nil || string(q) != "code=xyz" {
		t.Fatalf("the login command got %q, %v", q, err)
	}
	if plan.Ingress != nil {
		t.Error("the daemon's plan was changed in place")
	}
	u, _ := url.Parse(cb)
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Fatal("the callback port still answers after the login ended")
	}
}

// TestLoginCallbackPortHeld: the callback port allocated for a sandboxed login stays reserved on
// the host's loopback until the login ends: another local user cannot bind it between its
// allocation and the forwarder's listen (it used to be closed and listened on again, a window in
// which a squatter took the port: the login then failed, or, unconfined, its redirect went to the
// squatter). The forwarder itself (SO_REUSEPORT, this user) still binds it.
func TestLoginCallbackPortHeld(t *testing.T) {
	info := control.LoginInfo{Argv: []string{"gh", "auth", "login"}, Sandbox: &isolation.Plan{}}
	u, release, err := withCallbackURL(&info)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := url.Parse(u)
	if _, err := net.Listen("tcp", p.Host); err == nil {
		t.Fatalf("%s could be bound by another listener while the login holds it", p.Host)
	}
	fwd, err := listenReusePort(p.Host)
	if err != nil {
		t.Fatalf("the forwarder cannot bind %s: %v", p.Host, err)
	}
	fwd.Close()
	release()
	ln, err := net.Listen("tcp", p.Host)
	if err != nil {
		t.Fatalf("%s still held after the login: %v", p.Host, err)
	}
	ln.Close()
}

// listenReusePort listens on addr with SO_REUSEPORT, as the sandbox's ingress forwarder does.
func listenReusePort(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}
