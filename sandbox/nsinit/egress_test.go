package nsinit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/egress"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// egressHost is the host side of the egress tests: an HTTP and an HTTPS server on the host's
// loopback, and a policy that allows the name "allowed.test" (resolved by a stub to 127.0.0.1,
// admitted as an operator would) on their ports and on ports 80 and 443. Upstream connections
// to port 80 go to the HTTP server instead, and to 443 to the HTTPS server, so that the
// transparent capture can be tested without binding the host's ports 80 and 443.
type egressHost struct {
	port, tlsPort int
	hits          atomic.Int32
	pol           *egress.Policy
	mu            sync.Mutex
	logged        []egress.Decision
}

func newEgressHost(t *testing.T) *egressHost {
	t.Helper()
	h := &egressHost{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		fmt.Fprintf(w, "host says %s %s", r.Host, r.URL.Path)
	})
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	tlsSrv := httptest.NewTLSServer(handler)
	t.Cleanup(tlsSrv.Close)
	h.port = srv.Listener.Addr().(*net.TCPAddr).Port
	h.tlsPort = tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	loopback := netip.MustParseAddr("127.0.0.1")
	h.pol = &egress.Policy{
		Allow:     []string{"allowed.test"},
		Ports:     []int{h.port, h.tlsPort, 80, 443},
		AdmitNets: []netip.Prefix{netip.PrefixFrom(loopback, 32)},
		Resolver: func(_ context.Context, host string) ([]netip.Addr, error) {
			if host == "allowed.test" {
				return []netip.Addr{loopback}, nil
			}
			return nil, errors.New("no such host (test resolver)")
		},
		Dial: func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
			switch addr.Port() {
			case 80:
				addr = netip.AddrPortFrom(addr.Addr(), uint16(h.port))
			case 443:
				addr = netip.AddrPortFrom(addr.Addr(), uint16(h.tlsPort))
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr.String())
		},
	}
	return h
}

func (h *egressHost) log(d egress.Decision) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logged = append(h.logged, d)
}

// decisions returns the decisions logged so far, one line each.
func (h *egressHost) decisions() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, d := range h.logged {
		fmt.Fprintf(&b, "%s %s:%d allowed=%v %s\n", d.Via, d.Host, d.Port, d.Allowed, d.Reason)
	}
	return b.String()
}

// egressPlan returns a plan running script with /bin/sh in an Egress sandbox, with seccomp, able
// to spawn curl and getent and to read what they need; proxy says whether the environment
// carries egress.ProxyEnv.
func egressPlan(t *testing.T, script string, proxy bool, spawn ...string) isolation.Plan {
	t.Helper()
	p := sh(t, script, append([]string{"/usr/bin/curl", "/usr/bin/getent"}, spawn...)...)
	p.Egress, p.Seccomp = true, true
	p.ReadOnly = append(p.ReadOnly, "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf", "/etc/ssl")
	if proxy {
		p.Env = append(p.Env, egress.ProxyEnv()...)
	}
	return p
}

// runEgress runs p sandboxed the way a host does: Start, CloseChildEnds, Listeners, Serve until
// the program is done, Wait, Failure. In a pooled run of the suite (poolEnv) the sandbox comes
// from the pool instead: an init of it, or its zygote.
func runEgress(t *testing.T, p isolation.Plan, h *egressHost) result {
	t.Helper()
	var (
		r    result
		lerr error
	)
	if testPool != nil {
		cmd, stdio := takeEgress(t, p)
		r, lerr = finishEgress(t, cmd, stdio, h)
	} else {
		cmd, stdout, stderr := capturing(t, p)
		if err := cmd.Start(); err != nil {
			cmd.CloseChildEnds()
			cmd.Failure()
			t.Fatal(err)
		}
		cmd.CloseChildEnds()
		stop := serveEgress(t, cmd, h, &lerr)
		werr := cmd.Wait()
		stop()
		r = finished(t, cmd, werr, stdout, stderr)
	}
	t.Logf("exit %d, failure %v\nstdout: %s\nstderr: %s\ndecisions:\n%s", r.code, r.failure, r.stdout, r.stderr, h.decisions())
	if lerr != nil {
		t.Fatalf("Listeners: %v (Failure: %v)", lerr, r.failure)
	}
	return r
}

// takeEgress takes a sandbox for p from testPool. In a root run through the zygote it must be the
// zygote's (once it runs): an egress test an init served would prove nothing of the zygote's.
func takeEgress(t *testing.T, p isolation.Plan) (*Cmd, *Stdio) {
	t.Helper()
	zygote := os.Getenv(poolEnv) == zygoteMode && os.Geteuid() == 0
	if zygote {
		waitZygote(t, testPool)
	}
	cmd, stdio := takeReady(t, testPool, p, false)
	if zygote && !cmd.FromZygote() {
		finishPooled(t, cmd, stdio)
		t.Fatalf("an init served the egress call, not the zygote: %+v", testPool.Stats())
	}
	return cmd, stdio
}

// finishEgress serves the listeners of cmd, taken from a pool, with h's policy until its program
// is done, and returns its result and what Listeners returned.
func finishEgress(t *testing.T, cmd *Cmd, stdio *Stdio, h *egressHost) (result, error) {
	t.Helper()
	var lerr error
	stop := serveEgress(t, cmd, h, &lerr)
	r := finishPooled(t, cmd, stdio)
	stop()
	return r, lerr
}

// serveEgress takes the listeners of cmd (the error in *lerr) and serves them with h's policy
// until stop, which reports an error of Serve's.
func serveEgress(t *testing.T, cmd *Cmd, h *egressHost, lerr *error) (stop func()) {
	t.Helper()
	ls, err := cmd.Listeners()
	*lerr = err
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	if err == nil {
		go func() { served <- egress.Serve(ctx, ls, h.pol, h.log) }()
	} else {
		served <- nil
	}
	return func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
}

// wantLines fails t unless out contains every line of want.
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("output lacks the line %q", w)
		}
	}
}

func TestEgressThroughProxies(t *testing.T) {
	requireRoot(t)
	h := newEgressHost(t)
	q, qs := strconv.Itoa(h.port), strconv.Itoa(h.tlsPort)
	script := `curl -sS -m 10 http://allowed.test:` + q + `/http-proxy; echo " http=$?"
curl -sS -m 10 -k https://allowed.test:` + qs + `/connect; echo " connect=$?"
curl -sS -m 10 -x socks5h://127.0.0.1:1080 http://allowed.test:` + q + `/socks; echo " socks=$?"
curl -sS -m 10 -o /dev/null -w '%{http_code}' http://denied.test:` + q + `/; echo " denied-http=$?"
curl -sS -m 10 -k https://denied.test:` + qs + `/; echo " denied-connect=$?"
curl -sS -m 10 -x socks5h://127.0.0.1:1080 http://denied.test:` + q + `/; echo " denied-socks=$?"
curl -sS -m 10 http://allowed.test:1/; echo " denied-port=$?"
`
	r := runEgress(t, egressPlan(t, script, true), h)
	if r.code != 0 || r.failure != nil {
		t.Fatalf("exit %d, failure %v", r.code, r.failure)
	}
	wantLines(t, r.stdout,
		"host says allowed.test:"+q+" /http-proxy http=0",
		"host says allowed.test:"+qs+" /connect connect=0",
		"host says allowed.test:"+q+" /socks socks=0",
		"403 denied-http=0",
		" denied-connect=56", // CONNECT answered 403
		" denied-socks=97",   // SOCKS reply 0x02
		" denied-port=0",     // the proxy's 403 page, printed by curl
	)
	if !strings.Contains(r.stdout, "port 1 is not allowed") {
		t.Errorf("the refusal of port 1 does not say why")
	}
	if n := h.hits.Load(); n != 3 {
		t.Errorf("the host's servers saw %d requests, want 3", n)
	}
	for _, via := range []string{"http", "connect", "socks5"} {
		if d := h.decisions(); !strings.Contains(d, via+" allowed.test:") || !strings.Contains(d, via+" denied.test:") {
			t.Errorf("no %s decisions for both names logged", via)
		}
	}
}

func TestEgressDirectConnectFails(t *testing.T) {
	requireRoot(t)
	h := newEgressHost(t)
	q := strconv.Itoa(h.port)
	// The host's loopback server is not there (own network namespace) and its port is not one
	// Landlock lets the program connect to; 127.0.0.1:80 is a capture listener, but not a fake
	// address; a UDP datagram to the outside has no route.
	script := `curl -sS -m 5 --noproxy '*' http://127.0.0.1:` + q + `/; echo " direct=$?"
echo hi > /dev/tcp/127.0.0.1/` + q + ` && echo CONNECTED-DIRECT
curl -sS -m 5 --noproxy '*' http://127.0.0.1:80/; echo " capture-non-fake=$?"
curl -sS -m 5 --noproxy '*' http://127.65.0.9:80/; echo " capture-unassigned=$?"
echo x > /dev/udp/8.8.8.8/53 && echo SENT-UDP
echo x > /dev/udp/127.0.0.1/53 && echo sent-udp-to-stub
ls /proc/$$/fd
exit 0`
	p := egressPlan(t, script, true, "/bin/ls")
	p.Path, p.Args = realPath("/bin/bash"), []string{"bash", "-c", script}
	p.Exec = append(p.Exec, realPath("/bin/bash"))
	r := runEgress(t, p, h)
	for _, escape := range []string{"CONNECTED", "SENT-UDP", "host says"} {
		if strings.Contains(r.stdout, escape) {
			t.Errorf("stdout %q: %s", r.stdout, escape)
		}
	}
	if strings.Contains(r.stdout, " direct=0") || strings.Contains(r.stdout, " capture-non-fake=0") || strings.Contains(r.stdout, " capture-unassigned=0") {
		t.Errorf("a direct connection succeeded: %q", r.stdout)
	}
	for _, want := range []string{"Permission denied", "Network is unreachable"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	wantLines(t, r.stdout, "sent-udp-to-stub", "0\n1\n2")
	if n := h.hits.Load(); n != 0 {
		t.Errorf("the host's server saw %d requests", n)
	}
	if d := h.decisions(); !strings.Contains(d, "capture 127.0.0.1:80 allowed=false destination 127.0.0.1:80 is not an address the DNS stub handed out") ||
		!strings.Contains(d, "capture 127.65.0.9:80 allowed=false") {
		t.Errorf("the refused captures were not logged")
	}
}

func TestEgressDNSAndCapture(t *testing.T) {
	requireRoot(t)
	h := newEgressHost(t)
	script := `cat /etc/resolv.conf /etc/hosts
getent hosts allowed.test; echo "allowed=$?"
getent hosts ALLOWED.test.; echo "again=$?"
getent hosts denied.test; echo "denied=$?"
getent ahostsv6 allowed.test; echo "v6=$?"
getent hosts localhost
curl -sS -m 10 http://allowed.test/transparent; echo " capture=$?"
curl -sS -m 10 -k https://allowed.test/tls; echo " capture-tls=$?"
curl -sS -m 10 -k --resolve evil.test:443:127.65.0.1 https://evil.test/; echo " sni-mismatch=$?"
curl -sS -m 10 http://denied.test/; echo " denied-capture=$?"
curl -sS -m 10 http://allowed.test:8080/; echo " other-port=$?"
echo x > /etc/resolv.conf && echo WROTE-RESOLV
exit 0`
	// No proxy variables: curl resolves through the stub and connects itself.
	r := runEgress(t, egressPlan(t, script, false, "/bin/cat"), h)
	wantLines(t, r.stdout,
		"nameserver 127.0.0.1",
		"127.0.0.1\tlocalhost",
		"127.65.0.1      allowed.test",
		"allowed=0",
		"127.65.0.1      ALLOWED.test",
		"again=0",
		"denied=2",
		"v6=2", // AAAA: no data (and ahostsv6 does not map v4 answers)
		"::1             localhost ip6-localhost ip6-loopback", // from our /etc/hosts
		"host says allowed.test /transparent capture=0",
		"host says allowed.test /tls capture-tls=0",
		" sni-mismatch=35",  // the capture closed the connection during the handshake
		" denied-capture=6", // could not resolve
		" other-port=7",     // nothing listens on 8080 in the sandbox
	)
	if strings.Contains(r.stdout, "WROTE") {
		t.Error("the sandbox could write its /etc/resolv.conf")
	}
	if n := h.hits.Load(); n != 2 {
		t.Errorf("the host's servers saw %d requests, want 2", n)
	}
	d := h.decisions()
	for _, want := range []string{
		"dns allowed.test:0 allowed=true allowed by allowed.test: fake address 127.65.0.1",
		"dns denied.test:0 allowed=false host denied.test is not in the egress allowlist: NXDOMAIN (A query)",
		"capture allowed.test:80 allowed=true allowed by allowed.test (address in an admitted network) (captured connection to 127.65.0.1:80)",
		"capture allowed.test:443 allowed=true",
		`capture allowed.test:443 allowed=false TLS server name "evil.test" does not match allowed.test`,
	} {
		if !strings.Contains(d, want) {
			t.Errorf("decisions lack %q", want)
		}
	}
	// The host's own files are untouched.
	if data, err := os.ReadFile("/etc/resolv.conf"); err != nil || string(data) == "nameserver 127.0.0.1\n" {
		t.Errorf("the host's /etc/resolv.conf: %q, %v", data, err)
	}
}

func TestEgressInitFailure(t *testing.T) {
	requireRoot(t)
	p := egressPlan(t, "echo RAN", true)
	p.ReadWrite = []string{"/nonexistent-nsinit-path"}
	var (
		cmd *Cmd
		end func() error // waits for the sandbox's end and returns its Failure
	)
	if testPool != nil {
		c, stdio := takeEgress(t, p)
		cmd, end = c, func() error { return finishPooled(t, c, stdio).failure }
	} else {
		cmd = startPlan(t, p)
		end = func() error { _ = cmd.Wait(); return cmd.Failure() }
	}
	done := make(chan error, 1)
	go func() {
		_, err := cmd.Listeners()
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "closed before sending its listeners") {
			t.Fatalf("Listeners = %v, want the socket's end", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("Listeners did not return after the init failed")
	}
	if err := end(); err == nil || !strings.Contains(err.Error(), "resolve: ReadWrite /nonexistent-nsinit-path") {
		t.Fatalf("Failure = %v", err)
	}
	if _, err := cmd.Listeners(); err == nil {
		t.Fatal("a second Listeners call succeeded")
	}
}

func TestListenersNeedEgress(t *testing.T) {
	cmd, err := Command(isolation.Plan{Path: "/bin/true", Args: []string{"true"}, Dir: "/", UID: nobody, GID: nobody, Exec: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Failure()
	defer cmd.CloseChildEnds()
	if len(cmd.ExtraFiles) != 2 {
		t.Errorf("a plan without Egress hands the init %d descriptors, want 2", len(cmd.ExtraFiles))
	}
	if _, err := cmd.Listeners(); err == nil || !strings.Contains(err.Error(), "no Egress") {
		t.Fatalf("Listeners without Egress = %v", err)
	}
	p := isolation.Plan{Path: "/bin/true", Args: []string{"true"}, Dir: "/", UID: nobody, GID: nobody, Exec: []string{"/bin/true"}, Egress: true}
	cmd2, err := Command(p)
	if err != nil {
		t.Fatal(err)
	}
	defer cmd2.Failure()
	defer cmd2.CloseChildEnds()
	if len(cmd2.ExtraFiles) != 3 {
		t.Errorf("an Egress plan hands the init %d descriptors, want 3", len(cmd2.ExtraFiles))
	}
	if _, err := cmd2.Listeners(); err == nil || !strings.Contains(err.Error(), "not been started") {
		t.Fatalf("Listeners before Start = %v", err)
	}
	p.NoNetwork = true
	if cmd, err := Command(p); err == nil {
		cmd.CloseChildEnds()
		t.Fatal("Egress with NoNetwork accepted")
	}
}

func TestEgressLandlockRules(t *testing.T) {
	v, err := landlockABI()
	if err != nil {
		fixture.Missing(t, "Landlock: %v", err)
	}
	cfg, err := landlockConfig(netEgress)
	if v < minEgressABI {
		if err == nil {
			t.Fatalf("ABI v%d: the egress configuration was accepted", v)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HandledAccessNet&(ll.AccessNetBindTCP|ll.AccessNetConnectTCP) != ll.AccessNetBindTCP|ll.AccessNetConnectTCP {
		t.Fatalf("handled network rights %v", cfg.HandledAccessNet)
	}
	got := netRules(cfg, netEgress, nil)
	for _, port := range []int{3128, 1080, 80, 443, 22} {
		if want := (portRule{ll.AccessNetConnectTCP, uint16(port)}); !slices.Contains(got, want) {
			t.Errorf("rules %v lack %v", got, want)
		}
	}
	for _, r := range got {
		if r.access&ll.AccessNetBindTCP != 0 {
			t.Errorf("a TCP bind is granted: %v", r)
		}
	}
	if rules := netRules(cfg, netDenied, nil); len(rules) != 0 {
		t.Errorf("NoNetwork grants %v", rules)
	}
}

// egressFilesEnv marks the copy of the test binary that TestEgressFilesOverSymlink runs in a
// new mount namespace.
const egressFilesEnv = "NSINIT_TEST_EGRESS_FILES"

// TestEgressFilesOverSymlink checks how the generated files cover a host file that is a symbolic
// link (as /etc/resolv.conf is under systemd-resolved), a dangling link and a missing file. It
// runs mountEgressFiles on files of its own, in a copy of the test binary started by unshare in
// a private mount namespace.
func TestEgressFilesOverSymlink(t *testing.T) {
	if dir := os.Getenv(egressFilesEnv); dir != "" {
		testEgressFilesChild(t, dir)
		return
	}
	requireRoot(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("unshare (util-linux) is needed: ", err)
	}
	dir := t.TempDir()
	fixture.WriteIn(t, dir, map[string]string{"run/stub-resolv.conf": "nameserver 127.0.0.53\n", "plain": "host plain\n"})
	if err := os.Symlink("run/stub-resolv.conf", filepath.Join(dir, "resolv.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run/missing", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", os.Args[0], "-test.run=^TestEgressFilesOverSymlink$", "-test.v")
	cmd.Env = append(os.Environ(), egressFilesEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	// The host's view is untouched.
	if data, _ := os.ReadFile(filepath.Join(dir, "resolv.conf")); string(data) != "nameserver 127.0.0.53\n" {
		t.Errorf("the host's file changed: %q", data)
	}
}

func testEgressFilesChild(t *testing.T, dir string) {
	files := []egressFile{
		{"a", filepath.Join(dir, "resolv.conf"), "ours a\n"},
		{"b", filepath.Join(dir, "dangling"), "ours b\n"},
		{"c", filepath.Join(dir, "plain"), "ours c\n"},
		{"d", filepath.Join(dir, "missing"), "ours d\n"},
	}
	if err := mountEgressFiles(files); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"resolv.conf":          "ours a\n",
		"run/stub-resolv.conf": "ours a\n", // the link's target, read directly
		"dangling":             "ours b\n",
		"plain":                "ours c\n",
	} {
		if data, err := os.ReadFile(filepath.Join(dir, path)); err != nil || string(data) != want {
			t.Errorf("%s reads %q, %v; want %q", path, data, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file was created: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain"), []byte("x"), 0o644); err == nil {
		t.Error("the generated file is writable")
	}
}

// egressRootlessEnv marks the copy of the test binary that TestEgressRootless runs as nobody.
const egressRootlessEnv = "NSINIT_TEST_EGRESS_ROOTLESS"

// TestEgressRootless runs an Egress sandbox from an unprivileged host process (a copy of this
// test binary run as nobody): the init binds the capture ports and mounts the generated files
// inside its user namespace.
func TestEgressRootless(t *testing.T) {
	if os.Getenv(egressRootlessEnv) == "1" {
		h := newEgressHost(t)
		r := runEgress(t, egressPlan(t, "getent hosts allowed.test; curl -sS -m 10 http://allowed.test/rootless", false), h)
		wantLines(t, r.stdout+"\n", "127.65.0.1      allowed.test", "host says allowed.test /rootless")
		return
	}
	requireRoot(t)
	rerunAsNobody(t, egressRootlessEnv, "-test.run=^"+t.Name()+"$")
}
