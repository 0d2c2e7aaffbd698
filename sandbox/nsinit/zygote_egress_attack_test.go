package nsinit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// The attacks of this file are a sandboxed program's with an egress grant (gh, kubectl, curl), and
// a hostile plan's, against the sandboxes the zygote builds for such calls: its thread makes the
// call's listeners in the call's network namespace, made before the call was known, and sends them
// to the host on a socket pair that came with the plan, while other calls' threads share its
// descriptor table.

// zygoteEgress takes a sandbox for p (with Egress) from pool, which must be its zygote's, and
// serves its listeners with h's policy until the program is done, as the runner does.
func zygoteEgress(t *testing.T, pool *Pool, p isolation.Plan, h *egressHost) (result, error) {
	t.Helper()
	cmd, stdio := takeReady(t, pool, p, false)
	if !cmd.FromZygote() {
		finishPooled(t, cmd, stdio)
		return result{}, fmt.Errorf("an init built the sandbox, not the zygote (%+v)", pool.Stats())
	}
	r, lerr := finishEgress(t, cmd, stdio, h)
	t.Logf("zygote: exit %d, failure %v\nstdout: %s\nstderr: %s\ndecisions:\n%s", r.code, r.failure, r.stdout, r.stderr, h.decisions())
	if lerr != nil {
		return r, fmt.Errorf("Listeners: %w (Failure: %v)", lerr, r.failure)
	}
	return r, nil
}

// egressProbe is a bash script for an egress sandbox: its descriptors, its network namespace's
// sockets (/proc/net, before any connection of its own), a request through its proxy for path, and
// direct connections to what it must not reach: the host's server at hostPort, a port other than
// the proxies' on IPv4 and IPv6, the proxy's port on IPv6 (nothing listens there), the host's
// abstract unix socket named abstract.
func egressProbe(hostPort int, path, abstract string) string {
	q := strconv.Itoa(hostPort)
	return `ls /proc/$$/fd; echo ---
cat /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 /proc/net/raw /proc/net/unix; echo ---
curl -sS -m 10 http://allowed.test:` + q + path + `; echo " proxy=$?"
for to in 127.0.0.1/` + q + ` 127.0.0.1/8080 ::1/8080 ::1/3128 ::1/443; do
	(echo x > /dev/tcp/$to) 2>&1 | sed "s|^|$to |"
done
curl -sS -m 5 --abstract-unix-socket ` + abstract + ` http://x/; echo " abstract=$?"
sleep 0.3; echo done`
}

// egressProbePlan is the plan of egressProbe.
func egressProbePlan(t *testing.T, script string) isolation.Plan {
	p := egressPlan(t, script, true, "/bin/ls", "/bin/cat", "/bin/sleep", "/bin/sed")
	p.Path, p.Args = realPath("/bin/bash"), []string{"bash", "-c", script}
	p.Exec = append(p.Exec, realPath("/bin/bash"))
	return p
}

// netSockets parses the /proc/net tables of egressProbe's output: the listening TCP sockets and
// bound UDP sockets ("tcp 127.0.0.1:3128", "udp6 ..."), the raw sockets and the unix sockets.
func netSockets(t *testing.T, out string) (bound []string, raw, unixSocks int) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 7 && f[0] == "Num" || len(f) > 3 && f[0] == "sl":
			continue // a header
		case len(f) >= 7 && strings.HasSuffix(f[0], ":") && len(f[1]) == 8+1+4+8: // unix: "0000...: 00000002 ..."
			unixSocks++
		case len(f) >= 4 && strings.HasSuffix(f[0], ":") && strings.Contains(f[1], ":"):
			local, state := f[1], f[3]
			hexAddr, hexPort, _ := strings.Cut(local, ":")
			port, _ := strconv.ParseUint(hexPort, 16, 16)
			switch {
			case len(hexAddr) == 8 && state == "0A":
				bound = append(bound, fmt.Sprintf("tcp %s:%d", ipv4Hex(hexAddr), port))
			case len(hexAddr) == 8 && state == "07":
				bound = append(bound, fmt.Sprintf("udp %s:%d", ipv4Hex(hexAddr), port))
			case len(hexAddr) == 32:
				bound = append(bound, fmt.Sprintf("v6 %s:%d state %s", hexAddr, port, state))
			default:
				raw++ // a raw socket, or a TCP one in another state
			}
		}
	}
	slices.Sort(bound)
	return bound, raw, unixSocks
}

// ipv4Hex is the dotted form of /proc/net's little-endian hexadecimal IPv4 address.
func ipv4Hex(h string) string {
	v, _ := strconv.ParseUint(h, 16, 32)
	return fmt.Sprintf("%d.%d.%d.%d", byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

// wantEgressSockets are what an egress sandbox's network namespace holds: the listeners the host
// serves, and nothing else (no neighbour's, no host's).
func wantEgressSockets() []string {
	var out []string
	for _, s := range listenSpecs() {
		proto := "tcp"
		if s.typ == unix.SOCK_DGRAM {
			proto = "udp"
		}
		out = append(out, fmt.Sprintf("%s %d.%d.%d.%d:%d", proto, s.addr[0], s.addr[1], s.addr[2], s.addr[3], s.port))
	}
	slices.Sort(out)
	return out
}

// abstractListener is an abstract unix socket of the host's, counting the connections it accepts.
func abstractListener(t *testing.T) (name string, accepted *atomic.Int32) {
	t.Helper()
	name = fmt.Sprintf("clihost-egress-attack-%d-%d", os.Getpid(), time.Now().UnixNano())
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return name, accepted
}

// TestZygoteEgressCallsAreApart runs 8 egress calls at once through the zygote, each served by a
// host of its own (its own servers and policy): each program holds its standard streams only (not
// its listeners, not a neighbour's, not the egress socket pairs in the zygote's shared descriptor
// table), its network namespace holds its own listeners and nothing else, its proxy is its own
// host's (the request reaches that host's server and no other), and nothing but the proxy ports
// is reachable: not the host's loopback server, not another port on IPv4 or IPv6, not the host's
// abstract unix socket.
func TestZygoteEgressCallsAreApart(t *testing.T) {
	pool := zygotePool(t)
	const calls = 8
	name, accepted := abstractListener(t)
	hosts := make([]*egressHost, calls)
	results := make([]result, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		hosts[i] = newEgressHost(t)
		wg.Go(func() {
			p := egressProbePlan(t, egressProbe(hosts[i].port, "/call-"+strconv.Itoa(i), name))
			results[i], errs[i] = zygoteEgress(t, pool, p, hosts[i])
		})
	}
	wg.Wait()
	want := wantEgressSockets()
	for i, r := range results {
		if errs[i] != nil {
			t.Errorf("call %d: %v", i, errs[i])
			continue
		}
		fds, rest, _ := strings.Cut(r.stdout, "---\n")
		tables, probes, _ := strings.Cut(rest, "---\n")
		if got := strings.Fields(fds); !slices.Equal(got, []string{"0", "1", "2"}) {
			t.Errorf("call %d: the program has descriptors %v, want only 0 1 2", i, got)
		}
		bound, raw, unixSocks := netSockets(t, tables)
		if !slices.Equal(bound, want) || raw != 0 || unixSocks != 0 {
			t.Errorf("call %d: its network namespace holds %v, %d raw or other, %d unix sockets; want %v and nothing else:\n%s",
				i, bound, raw, unixSocks, want, tables)
		}
		// Landlock refuses the ports that are not the proxies'; on IPv6 nothing listens.
		wantLines(t, probes,
			"host says allowed.test:"+strconv.Itoa(hosts[i].port)+" /call-"+strconv.Itoa(i)+" proxy=0",
			"127.0.0.1/"+strconv.Itoa(hosts[i].port)+" bash: connect: Permission denied",
			"127.0.0.1/8080 bash: connect: Permission denied",
			"::1/8080 bash: connect: Permission denied",
			"::1/3128 bash: connect: Connection refused",
			"::1/443 bash: connect: Connection refused",
			" abstract=7", "done")
		if n := hosts[i].hits.Load(); n != 1 {
			t.Errorf("call %d: its host's server saw %d requests, want its own 1", i, n)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's abstract unix socket accepted %d connections from the sandboxes", n)
	}
	requireZygoteServed(t, pool, calls)
}

// TestZygoteEgressLateListeners: the host takes a call's listeners, and reads its report, later
// than the call lasted (a busy host: the program, which needs no network this time, was done long
// before). The listeners were sent before the program started, and the end line was written when
// it ended; an init's host receives both however late it asks, and so must the zygote's: a call
// that ran is not reported as a sandbox that was not built, or one without its end.
func TestZygoteEgressLateListeners(t *testing.T) {
	for _, zygote := range []bool{false, true} {
		pool := newInitPool(t)
		if zygote {
			pool = zygotePool(t)
		}
		p := plan(t, "/bin/true", nil)
		UseEgress(&p)
		cmd, stdio := takeReady(t, pool, p, false)
		if cmd.FromZygote() != zygote {
			t.Fatalf("the sandbox is not the one asked for (zygote: %v): %+v", zygote, pool.Stats())
		}
		t.Cleanup(func() { cmd.report.Close() }) // the host lets go, also when the test fails
		waitZombie(t, cmd.Process.Pid)
		time.Sleep(pid1Drain + 500*time.Millisecond) // past the moment the wait for a stuck thread ends
		ls, lerr := cmd.Listeners()
		r := finishPooled(t, cmd, stdio)
		if r.code != 0 || r.failure != nil {
			t.Errorf("zygote %v: exit %d, failure %v", zygote, r.code, r.failure)
		}
		if lerr != nil {
			t.Errorf("zygote %v: Listeners after the call ended: %v (the sandbox was built and the program ran)", zygote, lerr)
		} else {
			ls.Close()
		}
	}
}

// waitZombie waits (at most 10 s) until the process pid has exited (it is not reaped yet).
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if _, rest, ok := strings.Cut(string(data), ") "); err == nil && ok && strings.HasPrefix(rest, "Z") {
			return
		}
	}
	t.Fatalf("process %d did not exit within 10s", pid)
}

// hostSockets returns the inodes ("socket:[N]") of the sockets this process holds.
func hostSockets(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		if target, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.HasPrefix(target, "socket:") {
			out[target] = true
		}
	}
	return out
}

// socketOf is the "socket:[N]" name of f.
func socketOf(t *testing.T, f *os.File) string {
	t.Helper()
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// TestZygoteEgressFailuresLeaveNothing sends the zygote egress calls that fail before their
// listeners were sent (a plan path that does not resolve), after (a directory the program cannot
// enter, a program that is not there), that succeed, and whose host never asks for the listeners.
// The host's wait for the listeners ends on every path; afterwards the zygote holds as many
// descriptors and children as before (no egress socket pair's end, no listener), and the host
// holds neither the host's end of any call's pair nor any listener.
func TestZygoteEgressFailuresLeaveNothing(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	h := newEgressHost(t)
	good := plan(t, "/bin/true", nil)
	UseEgress(&good)
	runPooled(t, pool, good)
	fdsBefore, kidsBefore := zygoteBaseline(t, zpid)
	before := hostSockets(t)
	script := workTree(t, "/var/tmp") + "/script" // its interpreter is not there: the exec fails
	if err := fixture.WriteFile(script, []byte("#!/nonexistent/clihost-attack\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		mod  func(p *isolation.Plan)
		sent bool // the listeners were sent before the failure
		ok   bool
	}{
		{"resolve", func(p *isolation.Plan) { p.ReadWrite = append(p.ReadWrite, "/nonexistent-nsinit-path") }, false, false},
		{"chdir", func(p *isolation.Plan) { p.Dir = "/root" }, true, false},
		{"exec", func(p *isolation.Plan) { p.Path, p.Args, p.Exec = script, []string{"x"}, append(p.Exec, script) }, true, false},
		{"success", func(*isolation.Plan) {}, true, true},
	}
	var ends []string // the host's ends of the calls' socket pairs
	for round := range 3 {
		for _, c := range cases {
			for _, ask := range []bool{true, false} {
				p := plan(t, "/bin/true", nil)
				UseEgress(&p)
				c.mod(&p)
				cmd, stdio := takeReady(t, pool, p, false)
				if !cmd.FromZygote() {
					t.Fatalf("%s: the zygote did not build the sandbox: %+v", c.name, pool.Stats())
				}
				ends = append(ends, socketOf(t, cmd.egress.end))
				var lerr error
				stop := func() {}
				if ask {
					stop = serveEgress(t, cmd, h, &lerr)
				}
				r := finishPooled(t, cmd, stdio)
				stop()
				if ok := r.code == 0 && r.failure == nil; ok != c.ok {
					t.Errorf("round %d, %s: exit %d, failure %v", round, c.name, r.code, r.failure)
				}
				if ask && (lerr == nil) != c.sent {
					t.Errorf("round %d, %s: Listeners = %v, want listeners: %v", round, c.name, lerr, c.sent)
				}
			}
		}
	}
	requireZygoteServed(t, pool, 1+3*2*int64(len(cases)))
	zygoteBackTo(t, pool, zpid, fdsBefore, kidsBefore, 5*time.Second, "egress calls")
	after := hostSockets(t)
	for _, end := range ends {
		if after[end] {
			t.Errorf("the host still holds the end %s of a finished call's egress socket pair", end)
		}
	}
	for s := range after {
		if !before[s] && !slices.Contains(ends, s) {
			if typ, _ := socketType(t, s); typ == "listener" {
				t.Errorf("the host still holds a listener %s of a finished call", s)
			}
		}
	}
}

// socketType says what the socket named s ("socket:[N]") that this process holds is: "listener"
// for one bound as an egress listener is (listenSpecs), else its listenSpec; "" with an error for
// one that is not IPv4, and "" for one it does not hold.
func socketType(t *testing.T, s string) (string, error) {
	t.Helper()
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		if target, _ := os.Readlink("/proc/self/fd/" + e.Name()); target != s {
			continue
		}
		fd, _ := strconv.Atoi(e.Name())
		spec, err := describeSocket(fd)
		if err != nil {
			return "", err
		}
		if slices.Contains(listenSpecs(), spec) {
			return "listener", nil
		}
		return spec.String(), nil
	}
	return "", nil
}

// TestZygoteKilledWithEgressCallInFlight: the zygote dies (SIGKILL) with an egress call sent but
// not yet taken by a thread (the zygote is stopped meanwhile): the descriptors in flight, the
// zygote's end of the egress pair among them, are released with its socket, and the host's take
// returns at once (no sandbox, an error); the pool then serves egress calls again (a new zygote or
// an init).
func TestZygoteKilledWithEgressCallInFlight(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	if err := unix.Kill(zpid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, zpid) // SIGSTOP is delivered to each thread in its time: none may read the request
	p := plan(t, "/bin/true", nil)
	UseEgress(&p)
	prepared, err := prepare(p, true)
	if err != nil {
		t.Fatal(err)
	}
	pool.mu.Lock()
	z := pool.zyg
	pool.mu.Unlock()
	type taken struct {
		cmd *Cmd
		err error
	}
	done := make(chan taken, 1)
	go func() {
		cmd, _, err := z.take(prepared, false, nil, nil)
		done <- taken{cmd, err}
	}()
	time.Sleep(200 * time.Millisecond) // the request is in the zygote's socket, unread
	if err := unix.Kill(zpid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.cmd != nil {
			t.Fatalf("a killed zygote built a sandbox (err %v)", r.err)
		}
		t.Logf("take: %v", r.err)
	case <-time.After(30 * time.Second): // a bound, not a measurement
		t.Fatal("take did not return after the zygote died with the call in flight")
	}
	// The pool goes on: the next egress call is served (by a new zygote or an init) and gets its
	// listeners.
	h := newEgressHost(t)
	q := strconv.Itoa(h.port)
	cmd, stdio := takeReady(t, pool, egressPlan(t, `curl -sS -m 10 http://allowed.test:`+q+`/after; echo " proxy=$?"`, true), false)
	r, lerr := finishEgress(t, cmd, stdio, h)
	if lerr != nil {
		t.Fatalf("Listeners after the zygote died: %v", lerr)
	}
	wantLines(t, r.stdout, "host says allowed.test:"+q+" /after proxy=0")
}

// waitStopped waits until every thread of process pid is stopped (state T), at most 10 seconds.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	task := "/proc/" + strconv.Itoa(pid) + "/task"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		entries, err := os.ReadDir(task)
		if err != nil {
			t.Fatal(err)
		}
		stopped := 0
		for _, e := range entries {
			data, _ := os.ReadFile(task + "/" + e.Name() + "/stat")
			// The state follows the command name's closing parenthesis.
			if i := strings.LastIndexByte(string(data), ')'); i >= 0 && strings.HasPrefix(string(data[i+1:]), " T") {
				stopped++
			}
		}
		if stopped == len(entries) {
			return
		}
	}
	t.Fatalf("process %d's threads did not all stop within 10s", pid)
}

// TestZygoteEgressDecisionsAsInit runs one script of every kind of egress (the HTTP proxy, CONNECT,
// SOCKS5, the DNS stub, the transparent capture on 80, 443 and 22, names and ports the policy
// refuses, connections Landlock refuses) in a sandbox from an init and in one from the zygote: the
// program sees the same, and the host's policy logs the same decisions.
func TestZygoteEgressDecisionsAsInit(t *testing.T) {
	script := func(h *egressHost) string {
		q, qs := strconv.Itoa(h.port), strconv.Itoa(h.tlsPort)
		return `cat /etc/resolv.conf /etc/hosts
curl -sS -m 10 -x http://127.0.0.1:3128 http://allowed.test:` + q + `/http-proxy; echo " http=$?"
curl -sS -m 10 -x http://127.0.0.1:3128 -k https://allowed.test:` + qs + `/connect; echo " connect=$?"
curl -sS -m 10 -x socks5h://127.0.0.1:1080 http://allowed.test:` + q + `/socks; echo " socks=$?"
curl -sS -m 10 -x http://127.0.0.1:3128 -o /dev/null -w '%{http_code}' http://denied.test:` + q + `/; echo " denied-http=$?"
curl -sS -m 10 -x http://127.0.0.1:3128 http://allowed.test:1/ -o /dev/null; echo " denied-port=$?"
getent hosts allowed.test denied.test; echo "dns=$?"
curl -sS -m 10 http://allowed.test/transparent; echo " capture=$?"
curl -sS -m 10 -k https://allowed.test/tls; echo " capture-tls=$?"
curl -sS -m 10 telnet://allowed.test:22 </dev/null; echo " capture-ssh=$?"
curl -s -m 10 http://127.65.0.9/ || echo " capture-unassigned refused" # a reset or an empty reply, as the close goes
curl -sS -m 5 http://allowed.test:8080/; echo " other-port=$?"
curl -sS -m 5 http://127.0.0.1:` + q + `/; echo " direct=$?"
exit 0`
	}
	took := regexp.MustCompile(`after [0-9]+ ms`) // curl's own timing
	normalize := func(h *egressHost, s string) string {
		return took.ReplaceAllString(strings.NewReplacer(strconv.Itoa(h.port), "PORT", strconv.Itoa(h.tlsPort), "TLSPORT").Replace(s), "after N ms")
	}
	var outs, decisions [2]string
	for i, zygote := range []bool{false, true} {
		pool := newInitPool(t)
		if zygote {
			pool = zygotePool(t)
		}
		h := newEgressHost(t)
		cmd, stdio := takeReady(t, pool, egressPlan(t, script(h), false, "/bin/cat"), false)
		if cmd.FromZygote() != zygote {
			t.Fatalf("the sandbox is not the one asked for (zygote: %v): %+v", zygote, pool.Stats())
		}
		r, lerr := finishEgress(t, cmd, stdio, h)
		t.Logf("zygote %v: exit %d, failure %v\nstdout: %s\nstderr: %s\ndecisions:\n%s", zygote, r.code, r.failure, r.stdout, r.stderr, h.decisions())
		if lerr != nil || r.code != 0 || r.failure != nil {
			t.Fatalf("zygote %v: Listeners %v, exit %d, failure %v", zygote, lerr, r.code, r.failure)
		}
		// Sorted: the DNS stub may log a resolver's parallel A and AAAA queries either way round.
		lines := strings.Split(normalize(h, h.decisions()), "\n")
		slices.Sort(lines)
		outs[i], decisions[i] = normalize(h, r.stdout+r.stderr), strings.Join(lines, "\n")
	}
	if outs[0] != outs[1] {
		t.Errorf("the program saw other things through the zygote:\ninit:\n%s\nzygote:\n%s", outs[0], outs[1])
	}
	if decisions[0] != decisions[1] {
		t.Errorf("the host's policy decided otherwise through the zygote:\ninit:\n%s\nzygote:\n%s", decisions[0], decisions[1])
	}
	for _, want := range []string{"http allowed.test:PORT allowed=true", "connect allowed.test:TLSPORT allowed=true",
		"socks5 allowed.test:PORT allowed=true", "capture allowed.test:80 allowed=true", "capture allowed.test:443 allowed=true",
		"capture allowed.test:22 allowed=false", "dns denied.test:0 allowed=false"} {
		if !strings.Contains(decisions[1], want) {
			t.Errorf("no decision %q through the zygote", want)
		}
	}
}

// TestZygoteKilledWhileEgressThreadHangs: the zygote dies (SIGKILL: the OOM killer, an operator)
// while the thread building an egress call hangs in the kernel as root, resolving a plan path on a
// FUSE file system whose server does not answer. The thread cannot die until the server answers,
// so the zygote's descriptors (its end of the egress pair) stay open, the call's PID 1 lives on
// (its parent-death signal waits for that thread), and the zygote's watch that would kill PID 1 at
// the plan's deadline is gone. The host's wait for the listeners, which the runner does before it
// watches the call's deadline itself, must still end by the plan's deadline; the runner then kills
// the sandbox (as it does when Listeners fails) and the call ends.
func TestZygoteKilledWhileEgressThreadHangs(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	stalled := make(chan struct{}, 1)
	mnt := fixture.HostileFUSE(t, func(pid uint32) bool {
		if !strings.HasPrefix(cmdline(int(pid)), procName+" "+zygoteMarker) &&
			!strings.HasPrefix(tgidCmdline(pid), procName+" "+zygoteMarker) {
			return false
		}
		select {
		case stalled <- struct{}{}:
		default:
		}
		return true
	})
	p := plan(t, "/bin/true", nil)
	p.ReadOnly = append(p.ReadOnly, mnt+"/d")
	p.Timeout = 3 * time.Second // the zygote is killed long before
	UseEgress(&p)
	cmd, stdio := takeReady(t, pool, p, false)
	t.Cleanup(func() { // before the FUSE server's release, which lets the thread die
		cmd.report.Close()
		stdio.Out.Close()
		stdio.Err.Close()
	})
	select {
	case <-stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the zygote's thread did not reach the FUSE mount")
	}
	if err := unix.Kill(zpid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := listenersWithin(t, cmd)
	if err == nil {
		t.Fatal("a call whose thread never got past its plan's paths gave listeners")
	}
	t.Logf("Listeners: %v", err)
	_ = cmd.Process.Signal(unix.SIGKILL) // what the runner does when Listeners fails
	select {
	case <-cmd.Ended():
	case <-time.After(30 * time.Second): // a bound, not a measurement
		t.Fatal("the call did not end after the host killed its PID 1")
	}
	if cmd.Failure() == nil {
		t.Error("no failure reported for a call whose zygote died")
	}
}

// zygoteRequest sends pool's zygote a request made by hand (a hostile or broken host's): the plan
// envelope of p and, when pair is not nil, pair as the egress descriptor (the header then says
// Egress), whatever p says. It returns what the report pipe carried up to the end line and the
// program's standard output.
func zygoteRequest(t *testing.T, pool *Pool, p isolation.Plan, pair *os.File) (report, stdout string) {
	t.Helper()
	root := os.Geteuid() == 0
	prepared, err := prepare(p, root)
	if err != nil {
		t.Fatal(err)
	}
	env, err := pooledEnvelope(prepared, false)
	if err != nil {
		t.Fatal(err)
	}
	env.UserNS = !root
	planR, err := writePlan(env)
	if err != nil {
		t.Fatal(err)
	}
	var host, sent []*os.File
	sent = append(sent, planR)
	for range 3 { // report, stdout, stderr
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		host, sent = append(host, r), append(sent, w)
	}
	defer closeFiles(host)
	h := zygoteHeader{Egress: pair != nil}
	if pair != nil {
		sent = append(sent, pair)
	}
	body, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	fds := make([]int, len(sent))
	for i, f := range sent {
		fds[i] = int(f.Fd())
	}
	pool.mu.Lock()
	z := pool.zyg
	pool.mu.Unlock()
	err = unix.Sendmsg(int(z.conn.Fd()), body, unix.UnixRights(fds...), nil, 0)
	closeFiles(sent)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, host[2]) }()
	_ = host[0].SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound, not a measurement
	var b strings.Builder
	sc := bufio.NewScanner(host[0])
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), endLine) {
			break
		}
	}
	host[0].Close() // the host lets go: the zygote's thread ends the call
	_ = host[1].SetReadDeadline(time.Now().Add(30 * time.Second))
	out, _ := io.ReadAll(host[1])
	return b.String(), string(out)
}

// TestZygoteRefusesEgressMismatch: a request whose header and plan disagree about egress (a plan
// with Egress and no socket pair, a socket pair for a plan without), or whose egress descriptor is
// not a SOCK_SEQPACKET socket (a pipe, a stream socket), is refused before the program runs: no
// sandbox with an egress grant runs without its listeners handed to the host, none without one
// gets them, and the descriptor sent is closed (its host end reads the end).
func TestZygoteRefusesEgressMismatch(t *testing.T) {
	pool := zygotePool(t)
	withEgress := sh(t, "echo RAN")
	UseEgress(&withEgress)
	without := sh(t, "echo RAN")
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeR.Close()
	stream, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	streamHost := os.NewFile(uintptr(stream[0]), "stream-host")
	defer streamHost.Close()
	seqHost, seqZygote, err := newEgressPair()
	if err != nil {
		t.Fatal(err)
	}
	defer seqHost.close()
	cases := []struct {
		name string
		p    isolation.Plan
		pair *os.File
		host func() error // reads the host's end of what was sent: its end, once the zygote closed it
		want string
	}{
		{"egress plan, no pair", withEgress, nil, nil, "zygote: the plan's egress and the request's socket pair disagree"},
		{"pair, plan without egress", without, seqZygote, func() error { _, err := seqHost.receive(); return err },
			"zygote: the plan's egress and the request's socket pair disagree"},
		{"a pipe for the pair", withEgress, pipeW, func() error {
			_ = pipeR.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := io.ReadAll(pipeR)
			return err
		}, "network: egress listeners: fd "},
		{"a stream socket for the pair", withEgress, os.NewFile(uintptr(stream[1]), "stream-zygote"), func() error {
			_ = streamHost.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := io.ReadAll(streamHost)
			return err
		}, "is not the egress socket pair"},
	}
	for _, c := range cases {
		report, stdout := zygoteRequest(t, pool, c.p, c.pair)
		t.Logf("%s: report %q, stdout %q", c.name, report, stdout)
		if !strings.Contains(report, c.want) || !strings.Contains(report, endLine) {
			t.Errorf("%s: report %q, want the refusal %q and the end", c.name, report, c.want)
		}
		if strings.Contains(stdout, "RAN") {
			t.Errorf("%s: the program ran", c.name)
		}
		if c.host != nil {
			err := c.host()
			if c.pair == seqZygote && (err == nil || !strings.Contains(err.Error(), "closed before sending")) {
				t.Errorf("%s: the host's end of the pair: %v, want its end without listeners", c.name, err)
			} else if c.pair != seqZygote && err != nil {
				t.Errorf("%s: the descriptor sent was not closed: %v", c.name, err)
			}
		}
	}
}

// TestZygoteEgressWithStdinAndGroups: an egress call with every optional descriptor of a request
// (the program's standard input, the egress pair, the call's control groups) gets each where it
// belongs: its input on fd 0 (a pipe, not the egress pair or a cgroup file), the program in the
// call's control group, and its listeners to the host, which serves them.
func TestZygoteEgressWithStdinAndGroups(t *testing.T) {
	pool := zygotePool(t)
	h := newEgressHost(t)
	q := strconv.Itoa(h.port)
	p := egressPlan(t, `readlink /proc/self/fd/0; read line; echo "in: $line"; cat /proc/self/cgroup
curl -sS -m 10 http://allowed.test:`+q+`/stdin; echo " proxy=$?"`, true, "/usr/bin/readlink", "/bin/cat")
	p.Limits = isolation.Limits{MemoryBytes: 256 << 20, Pids: 64}
	cmd, stdio := takeReady(t, pool, p, true)
	if !cmd.FromZygote() {
		t.Fatalf("the zygote did not build the sandbox: %+v", pool.Stats())
	}
	if _, err := stdio.In.Write([]byte("piped input\n")); err != nil {
		t.Fatal(err)
	}
	stdio.In.Close()
	var lerr error
	stop := serveEgress(t, cmd, h, &lerr)
	var group string // the call's cgroup v1 group, as /proc/self/cgroup names it
	if g := cmd.Group(); g != nil && len(g.TasksFiles()) > 0 {
		group = ":/" + filepath.Base(filepath.Dir(g.TasksFiles()[0])) + "\n"
	}
	r := finishPooled(t, cmd, stdio)
	stop()
	t.Logf("exit %d, failure %v\nstdout: %s\nstderr: %s", r.code, r.failure, r.stdout, r.stderr)
	if lerr != nil || r.code != 0 || r.failure != nil {
		t.Fatalf("Listeners %v, exit %d, failure %v", lerr, r.code, r.failure)
	}
	wantLines(t, r.stdout, "in: piped input", "host says allowed.test:"+q+" /stdin proxy=0")
	if !strings.HasPrefix(r.stdout, "pipe:[") {
		t.Errorf("the program's standard input is not the host's pipe: %q", r.stdout)
	}
	if group != "" && !strings.Contains(r.stdout, group) {
		t.Errorf("the program is not in its call's control group %q: %q", group, r.stdout)
	}
}

// TestZygoteEgressOnAFreshThread: an egress call that arrives after the host's mount table changed
// is served on a thread made for it (the ready threads' copies are stale): its network namespace,
// made then, holds its own listeners only, its proxy is its host's, and Landlock refuses other
// ports, as on a thread made ahead.
func TestZygoteEgressOnAFreshThread(t *testing.T) {
	pool := zygotePool(t)
	runPooled(t, pool, sh(t, "true")) // the threads are ready
	mnt := workTree(t, "/var/tmp")
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	h := newEgressHost(t)
	name, accepted := abstractListener(t)
	r, err := zygoteEgress(t, pool, egressProbePlan(t, egressProbe(h.port, "/fresh", name)), h)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(r.stdout, "---\n")
	tables, probes, _ := strings.Cut(rest, "---\n")
	if bound, raw, unixSocks := netSockets(t, tables); !slices.Equal(bound, wantEgressSockets()) || raw != 0 || unixSocks != 0 {
		t.Errorf("the network namespace holds %v, %d raw or other, %d unix sockets:\n%s", bound, raw, unixSocks, tables)
	}
	wantLines(t, probes, "host says allowed.test:"+strconv.Itoa(h.port)+" /fresh proxy=0",
		"127.0.0.1/8080 bash: connect: Permission denied", "::1/8080 bash: connect: Permission denied", "done")
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's abstract unix socket accepted %d connections", n)
	}
}

// TestZygoteEgressFastOpenStaysInside: TCP Fast Open (sendto with MSG_FASTOPEN) connects without
// connect(2), so Landlock's TCP connect rule, a hook on connect(2), does not see it (nor its bind
// rule a listener that listen(2) bound by itself, without bind(2)). The seccomp filter refuses it
// (EOPNOTSUPP, as on a socket without fast open), to the host's loopback server and to the
// program's own listener alike, and the host's server sees nothing (the network namespace would
// have kept it out anyway).
func TestZygoteEgressFastOpenStaysInside(t *testing.T) {
	fixture.Need(t, "/usr/bin/python3") // Debian's (awscli depends on it)
	for _, zygote := range []bool{false, true} {
		pool := newInitPool(t)
		if zygote {
			pool = zygotePool(t)
		}
		fastOpenStaysInside(t, pool, zygote)
	}
}

// fastOpenStaysInside is TestZygoteEgressFastOpenStaysInside in a sandbox from pool (from its
// zygote or an init).
func fastOpenStaysInside(t *testing.T, pool *Pool, zygote bool) {
	h := newEgressHost(t)
	script := `import errno, socket
def fastopen(port):
    s = socket.socket()
    try:
        s.sendto(b"GET / HTTP/1.0\r\n\r\n", socket.MSG_FASTOPEN, ("127.0.0.1", port))
        s.settimeout(1)
        print("fast open", port == ` + strconv.Itoa(h.port) + ` and "host" or "own", "sent", s.recv(64)[:16])
    except OSError as e:
        print("fast open", port == ` + strconv.Itoa(h.port) + ` and "host" or "own", errno.errorcode.get(e.errno, "sent, " + str(e)))
fastopen(` + strconv.Itoa(h.port) + `)
own = socket.socket()
own.listen(1)
c = socket.socket()
try:
    c.connect(("127.0.0.1", own.getsockname()[1]))
    print("connect own: ok")
except OSError as e:
    print("connect own:", errno.errorcode.get(e.errno, e))
fastopen(own.getsockname()[1])
`
	p := plan(t, realPath("/usr/bin/python3"), []string{"-c", script})
	UseEgress(&p)
	p.Seccomp = true
	cmd, stdio := takeReady(t, pool, p, false)
	if cmd.FromZygote() != zygote {
		t.Fatalf("the sandbox is not the one asked for (zygote: %v): %+v", zygote, pool.Stats())
	}
	r, lerr := finishEgress(t, cmd, stdio, h)
	t.Logf("zygote %v: exit %d, failure %v, Listeners %v\nstdout: %s\nstderr: %s", zygote, r.code, r.failure, lerr, r.stdout, r.stderr)
	if lerr != nil || r.code != 0 || r.failure != nil {
		t.Fatalf("zygote %v: Listeners %v, exit %d, failure %v", zygote, lerr, r.code, r.failure)
	}
	wantLines(t, r.stdout, "fast open host ENOTSUP", "connect own: EACCES", "fast open own ENOTSUP")
	if n := h.hits.Load(); n != 0 {
		t.Errorf("zygote %v: the host's loopback server saw %d requests from the sandbox", zygote, n)
	}
}
