package nsinit

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// An outside review's attacks on the zygote's reuse of network namespaces (zygote_net.go, commit
// de92678): hostile programs in sandboxes that try to leave, in a namespace that reads as clean,
// something a later call sees or is affected by. Probe modes (netReviewProbe, hooked into
// attackProbe): netpass, netmeet, netleave-metrics, netrto, netsysctl. The two defects it found
// (sockets passed out of a call, counted by no protocol, acting in a later call's namespace; TCP
// metrics outliving their connections) failed these tests on de92678 and are fixed: a namespace is
// used again only when "sockets: used" is 0 and it saves no TCP metrics.

// TestZygoteNetReviewPassedSocketActsInALaterCallsNamespace: a call of key "victim" binds a TCP
// socket (bound, not listening: no protocol counts it) and makes another (unbound), hands both
// over a unix socket it may reach (a pathname socket: Landlock ABI < 9 does not restrict
// connecting to one) to a process outside its sandbox, and ends. Its namespace reads as clean and
// goes to the pool for "victim". The process outside (here the test; in life any process that can
// accept on a socket the call can reach: another caller's sandbox in a shared workspace, another
// user's process on the host) then listens with the first and connects with the second, in the
// namespace of whichever later call of "victim" gets it. Such a later call (a benign tool of the
// same caller) dials a loopback port and listens on one: it must reach no listener of anyone
// else's, and no one else may reach its listener. The key restricts who GETS the namespace, not
// who holds sockets in it: the claim "never anything of another caller" does not hold.
//
// FAILS on de92678: the later call talks to the outside process both ways.
func TestZygoteNetReviewPassedSocketActsInALaterCallsNamespace(t *testing.T) {
	pool := zygotePool(t)
	dir := reachableDir(t, 0o755)
	path := filepath.Join(dir, "drop.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	port, secretPort := 20000+rand.IntN(10000), 30000+rand.IntN(10000)

	// The fds the outside process receives.
	got := make(chan []int, 1)
	go func() {
		c, err := ul.AcceptUnix()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		fds := receiveTwo(c)
		_, _ = c.Write([]byte{'k'})
		got <- fds
	}()

	left := victimPasses(t, pool, dir, path, port)
	var fds []int
	select {
	case fds = <-got:
	case <-time.After(5 * time.Second):
	}
	if len(fds) != 2 {
		t.Fatalf("the outside process received %v", fds)
	}
	listener, dialer := fds[0], fds[1]
	defer unix.Close(listener)
	defer unix.Close(dialer)
	pause() // the call's namespace was found clean and is in the pool for "victim"

	// Now, outside any sandbox: listen in that namespace, and connect into it when someone comes.
	if err := unix.Listen(listener, 4); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((4 * time.Second).Nanoseconds())
	_ = unix.SetsockoptTimeval(listener, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	stolen := make(chan string, 1)
	go func() {
		nfd, _, err := unix.Accept(listener)
		if err != nil {
			stolen <- "accept: " + errName(err)
			return
		}
		defer unix.Close(nfd)
		_, _ = unix.Write(nfd, []byte("hello from outside the call\n"))
		if err := unix.Connect(dialer, &unix.SockaddrInet4{Port: secretPort, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			stolen <- "connect: " + errName(err)
			return
		}
		_ = unix.SetsockoptTimeval(dialer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		buf := make([]byte, 128)
		n, _ := unix.Read(dialer, buf)
		stolen <- strings.TrimSpace(string(buf[:max(n, 0)]))
	}()

	for range 3 {
		rc := runPooled(t, pool, netPlan(t, "netmeet", "victim", strconv.Itoa(port), strconv.Itoa(secretPort)))
		now := lines(rc.stdout)
		if now["ns"] != left["ns"] {
			pause()
			continue
		}
		if strings.HasPrefix(now["dial"], "got") {
			t.Errorf("a later call of the key reached a listener of a process outside its sandbox (which a call before it had handed a socket of its namespace): %q", now["dial"])
		}
		select {
		case s := <-stolen:
			if strings.Contains(s, "SECRET") {
				t.Errorf("a process outside the call reached the later call's loopback listener and read %q", s)
			} else {
				t.Logf("outside: %s", s)
			}
		case <-time.After(5 * time.Second):
		}
		return
	}
	t.Logf("no later call ran in namespace %s: nothing to reach", left["ns"])
}

// TestZygoteNetReviewAnotherCallersSandboxActsInALaterCallsNamespace: the attack above with
// clihost's own sandboxes only. A long call of another key (and, as root, another uid), "attacker",
// binds a unix socket in a directory it may write; a call of key "victim" that may read that
// directory (a workspace both callers share, or any path both see) hands it two TCP sockets of its
// namespace and ends. Once its namespace is back in the pool for "victim", the attacker listens and
// connects with them: the next call of "victim" dials the attacker's listener and serves its own
// loopback listener to the attacker. Another caller's sandbox acts inside the victim's later call's
// network namespace.
//
// FAILS on de92678.
func TestZygoteNetReviewAnotherCallersSandboxActsInALaterCallsNamespace(t *testing.T) {
	pool := zygotePool(t)
	dir := reachableDir(t, 0o777|os.ModeSticky)
	path := filepath.Join(dir, "drop.sock")
	port, secretPort := 20000+rand.IntN(10000), 30000+rand.IntN(10000)
	ap := netPlan(t, "netcatch", "attacker", path, strconv.Itoa(port), strconv.Itoa(secretPort))
	if pool.root {
		ap.UID, ap.GID = nobody-1, nobody-1
	}
	ap.ReadWrite = append(ap.ReadWrite, dir)
	cmd, stdio := takeReady(t, pool, ap, true)
	out := bufio.NewReader(stdio.Out)
	await := func(want string) string {
		t.Helper()
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("the attacker, awaiting %q: %q %v", want, line, err)
			}
			if strings.HasPrefix(line, want) {
				return strings.TrimSpace(line)
			}
			t.Logf("attacker: %s", strings.TrimSpace(line))
		}
	}
	await("ready")

	left := victimPasses(t, pool, dir, path, port)
	await("caught: ok")
	pause()
	if _, err := stdio.In.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	await("listening")
	ran := false
	for range 3 {
		rc := runPooled(t, pool, netPlan(t, "netmeet", "victim", strconv.Itoa(port), strconv.Itoa(secretPort)))
		now := lines(rc.stdout)
		if now["ns"] != left["ns"] {
			pause()
			continue
		}
		ran = true
		if strings.HasPrefix(now["dial"], "got") {
			t.Errorf("a later call of key victim reached a listener of a call of key attacker: %q", now["dial"])
		}
		break
	}
	stdio.In.Close()
	stole := await("stole")
	if ran && strings.Contains(stole, "SECRET") {
		t.Errorf("a call of key attacker reached the loopback listener of a later call of key victim: %s", stole)
	}
	if !ran {
		t.Logf("no later call ran in namespace %s", left["ns"])
	}
	finishPooled(t, cmd, stdio)
}

// TestZygoteNetReviewTCPMetricsSurviveIntoTheNextCall: a call of key m ends a loopback TCP
// connection whose ACKs it delayed (so its smoothed RTT is tens of ms), gets rid of the TIME_WAIT
// it left (a new connection from the same port takes the time-wait socket over, tcp_tw_reuse=2 for
// loopback, and is reset), and closes everything. Nothing is counted: no socket, no time-wait, no
// fragment, no flow label; but the kernel's TCP metrics cache of the namespace (per destination
// address, kept an hour) holds the RTT. The next call of m that gets that namespace sees its first
// loopback connection start with a longer RTO (tcp_init_metrics seeds it from the cached RTT)
// than in a new namespace. Not one of the counters the design says a call may see: a leftover the
// checks do not see, observable (and writable, per 127/8 address: a channel) by the next call.
//
// FAILS on de92678 (same key only: low severity).
func TestZygoteNetReviewTCPMetricsSurviveIntoTheNextCall(t *testing.T) {
	pool := zygotePool(t)
	rto := func(out map[string]string) int {
		n, err := strconv.Atoi(out["rto"])
		if err != nil {
			t.Fatalf("netrto printed no rto: %v", out)
		}
		return n
	}
	var base int
	for range 2 {
		r := runPooled(t, pool, netPlan(t, "netrto", "m"))
		base = max(base, rto(lines(r.stdout)))
		pause()
	}
	r := runPooled(t, pool, netPlan(t, "netleave-metrics", "m"))
	left := lines(r.stdout)
	if r.code != 0 || left["left"] == "" {
		t.Fatalf("netleave-metrics: exit %d %v\n%s%s", r.code, r.failure, r.stdout, r.stderr)
	}
	pause()
	for range 3 {
		r := runPooled(t, pool, netPlan(t, "netrto", "m"))
		now := lines(r.stdout)
		if now["ns"] != left["ns"] {
			pause()
			continue
		}
		if got := rto(now); got >= base+8000 {
			t.Errorf("the next call of the key, in the namespace the call before left (%s), starts a loopback connection with an RTO of %d us, %d us in a new namespace: the TCP metrics cache survived", left["left"], got, base)
		}
		return
	}
	t.Logf("no later call ran in namespace %s", left["ns"])
}

// TestZygoteNetReviewNetworkSysctlsAreOutOfReach: per-namespace sysctls would outlive a call in a
// reused namespace and be seen by every later one (rootless: the program is its user namespace's
// root, which owns the namespace's net sysctls). The program may write none: /proc is read-only to
// it (Landlock, DAC as root's nobody). Held on de92678.
func TestZygoteNetReviewNetworkSysctlsAreOutOfReach(t *testing.T) {
	pool := zygotePool(t)
	r := runPooled(t, pool, netPlan(t, "netsysctl", "s"))
	out := lines(r.stdout)
	n := 0
	for k, v := range out {
		if strings.HasPrefix(k, "write ") {
			n++
			if v == "ok" {
				t.Errorf("the program wrote the sysctl %s of its (reusable) network namespace", strings.TrimPrefix(k, "write "))
			}
		}
	}
	if n == 0 {
		t.Fatalf("netsysctl tried nothing:\n%s%s", r.stdout, r.stderr)
	}
}

// TestZygoteNetReviewAheadKeyHoldsTheNetworkKey: a sandbox built ahead took its namespace for the
// plan it was built for (zcall.build runs reuse then): the call it runs must have the same
// NetworkKey and identity, which aheadKey (compared by fits) must therefore hold. Held on de92678.
func TestZygoteNetReviewAheadKeyHoldsTheNetworkKey(t *testing.T) {
	p := isolation.Plan{Path: "/bin/true", UID: 1000, GID: 1000, Groups: []int{1000}, NetworkKey: "uid:1000"}
	base := aheadKey(envelope{Protocol: planProtocol, Plan: p})
	for name, q := range map[string]isolation.Plan{
		"key":    func() isolation.Plan { q := p; q.NetworkKey = "uid:1001"; return q }(),
		"no key": func() isolation.Plan { q := p; q.NetworkKey = ""; return q }(),
		"uid":    func() isolation.Plan { q := p; q.UID = 1001; return q }(),
		"groups": func() isolation.Plan { q := p; q.Groups = []int{1000, 27}; return q }(),
		"egress": func() isolation.Plan { q := p; q.Egress = true; return q }(),
	} {
		if bytes.Equal(aheadKey(envelope{Protocol: planProtocol, Plan: q}), base) {
			t.Errorf("a plan of another %s has the same aheadKey: a sandbox built ahead (in a namespace of the first) would run it", name)
		}
		if name != "egress" && networkKey(q) == networkKey(p) {
			t.Errorf("a plan of another %s has the same networkKey", name)
		}
	}
}

// netReviewProbe runs this file's probes (see attackProbe); each prints its namespace's cookie
// (ns). netpass ARGS path port: binds a TCP socket to 127.0.0.1:port (no listen), makes an unbound
// one, sends both over the unix socket at path and waits for a byte back. netmeet ARGS dial listen:
// listens on 127.0.0.1:listen, dials 127.0.0.1:dial and prints what it read ("dial"), then serves
// a secret to whoever connects within a second ("accepted"). netleave-metrics: leaves the TCP
// metrics of 127.0.0.1 and nothing counted. netrto: the RTO (us) of a new loopback connection's
// client. netsysctl: tries to open network sysctls for writing.
func netReviewProbe(mode string) {
	fmt.Println("ns:", netnsCookie())
	loop := func(port int) *unix.SockaddrInet4 {
		return &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
	}
	switch mode {
	case "netpass":
		port, _ := strconv.Atoi(os.Args[2])
		s1, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err == nil {
			_ = unix.SetsockoptInt(s1, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			err = unix.Bind(s1, loop(port))
		}
		s2, err2 := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		u, err3 := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil && err2 == nil && err3 == nil {
			err = unix.Connect(u, &unix.SockaddrUnix{Name: os.Args[1]})
		}
		if err == nil {
			err = unix.Sendmsg(u, []byte{0}, unix.UnixRights(s1, s2), nil, 0)
		}
		if err == nil {
			_, err = unix.Read(u, make([]byte, 1))
		}
		fmt.Println("errors:", errName(err), errName(err2), errName(err3))
		if err == nil && err2 == nil && err3 == nil {
			fmt.Println("passed: ok")
		}
		fmt.Println("counted:", countedSockets())
	case "netcatch":
		port, _ := strconv.Atoi(os.Args[2])
		secret, _ := strconv.Atoi(os.Args[3])
		ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: os.Args[1], Net: "unix"})
		if err == nil {
			err = os.Chmod(os.Args[1], 0o777)
		}
		if err != nil {
			fmt.Println("unix listen:", err)
			return
		}
		fmt.Println("ready")
		c, err := ul.AcceptUnix()
		if err != nil {
			fmt.Println("unix accept:", err)
			return
		}
		fds := receiveTwo(c)
		_, _ = c.Write([]byte{'k'})
		c.Close() // else the victim's end of it lives on, counted in its namespace
		ul.Close()
		if len(fds) != 2 {
			fmt.Println("caught:", err, fds)
			return
		}
		fmt.Println("caught: ok")
		in := bufio.NewReader(os.Stdin)
		_, _ = in.ReadString('\n') // the victim's call ended: its namespace is in the pool
		if err := unix.Listen(fds[0], 4); err != nil {
			fmt.Println("stole: listen", errName(err))
			return
		}
		tv := unix.NsecToTimeval((5 * time.Second).Nanoseconds())
		_ = unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		fmt.Println("listening")
		nfd, _, err := unix.Accept(fds[0])
		if err != nil {
			fmt.Println("stole: nothing, accept", errName(err))
			return
		}
		_, _ = unix.Write(nfd, []byte("hello from the attacker's sandbox\n"))
		if err := unix.Connect(fds[1], loop(secret)); err != nil {
			fmt.Println("stole: nothing, connect", errName(err))
			return
		}
		_ = unix.SetsockoptTimeval(fds[1], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		buf := make([]byte, 128)
		n, _ := unix.Read(fds[1], buf)
		fmt.Printf("stole: %q\n", strings.TrimSpace(string(buf[:max(n, 0)])))
		_ = port
	case "netmeet":
		dial, _ := strconv.Atoi(os.Args[1])
		listen, _ := strconv.Atoi(os.Args[2])
		ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: listen})
		if err != nil {
			fmt.Println("listen:", err)
			return
		}
		defer ln.Close()
		c, err := net.DialTimeout("tcp4", "127.0.0.1:"+strconv.Itoa(dial), time.Second)
		if err != nil {
			fmt.Println("dial: refused", err)
		} else {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Printf("dial: got %q\n", strings.TrimSpace(line))
			c.Close()
		}
		_ = ln.SetDeadline(time.Now().Add(time.Second))
		if s, err := ln.Accept(); err == nil {
			_, _ = s.Write([]byte("SECRET OF THE LATER CALL\n"))
			time.Sleep(100 * time.Millisecond)
			s.Close()
			fmt.Println("accepted: yes")
		} else {
			fmt.Println("accepted: no")
		}
	case "netleave-metrics":
		fmt.Println("left:", leaveMetrics())
		fmt.Println("counted:", countedSockets())
	case "netrto":
		l, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		_ = unix.Bind(l, loop(0))
		_ = unix.Listen(l, 4)
		sa, _ := unix.Getsockname(l)
		c, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err := unix.Connect(c, sa); err != nil {
			fmt.Println("connect:", errName(err))
			return
		}
		if info, err := unix.GetsockoptTCPInfo(c, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			fmt.Println("rto:", info.Rto)
		}
		// Reset, not closed: no TIME_WAIT, no metrics of this probe's own.
		_ = unix.SetsockoptLinger(c, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
		unix.Close(c)
		unix.Close(l)
	case "netsysctl":
		for _, name := range []string{"net/ipv4/ping_group_range", "net/ipv4/ip_local_port_range",
			"net/ipv4/ip_unprivileged_port_start", "net/ipv4/tcp_fastopen", "net/ipv6/conf/lo/disable_ipv6",
			"net/core/somaxconn", "net/ipv4/tcp_max_tw_buckets"} {
			fd, err := unix.Open("/proc/sys/"+name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			fmt.Printf("write %s: %s\n", name, errName(err))
		}
	}
}

// leaveMetrics ends a loopback connection with delayed ACKs so that both its ends store their RTT
// in the namespace's TCP metrics, then takes its TIME_WAIT over and resets it, and closes
// everything: what it returns says what it left.
func leaveMetrics() string {
	loop := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	l, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err := unix.Bind(l, loop); err != nil {
		return "bind: " + errName(err)
	}
	_ = unix.Listen(l, 4)
	la, _ := unix.Getsockname(l)
	c, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	_ = unix.SetsockoptInt(c, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Connect(c, la); err != nil {
		return "connect: " + errName(err)
	}
	s, _, err := unix.Accept(l)
	if err != nil {
		return "accept: " + errName(err)
	}
	_ = unix.SetsockoptInt(c, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	buf := make([]byte, 16)
	for range 8 {
		_ = unix.SetsockoptInt(s, unix.IPPROTO_TCP, unix.TCP_QUICKACK, 0) // delayed ACKs
		_, _ = unix.Write(c, []byte{'x'})
		time.Sleep(150 * time.Millisecond)
		_, _ = unix.Read(s, buf)
	}
	var rtt uint32
	if info, err := unix.GetsockoptTCPInfo(c, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
		rtt = info.Rtt
	}
	ca, _ := unix.Getsockname(c)
	unix.Close(c) // FIN first: c's end goes to TIME_WAIT, storing its metrics
	time.Sleep(20 * time.Millisecond)
	unix.Close(s) // LAST_ACK, then closed, storing its metrics
	time.Sleep(1100 * time.Millisecond)
	// The time-wait socket taken over by a connection from its port (loopback: tcp_tw_reuse=2,
	// after a second), then reset.
	r, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	_ = unix.SetsockoptInt(r, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(r, ca); err != nil {
		return "rebind: " + errName(err)
	}
	if err := unix.Connect(r, la); err != nil {
		return "reconnect: " + errName(err)
	}
	_ = unix.SetsockoptLinger(r, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(r)
	time.Sleep(50 * time.Millisecond)
	unix.Close(l)
	time.Sleep(50 * time.Millisecond)
	return fmt.Sprintf("TCP metrics of 127.0.0.1 (rtt %d us)", rtt)
}

// countedSockets is what the zygote's check would count now: the sockets of each protocol that
// has any, and the TCP line of sockstat.
func countedSockets() string {
	var out []string
	if b, err := os.ReadFile("/proc/self/net/protocols"); err == nil {
		for _, l := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 2 && f[2] != "0" {
				out = append(out, f[0]+"="+f[2])
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/net/sockstat"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "TCP:") {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, " ")
}

// receiveTwo reads one byte from c with the descriptors (two at most) sent with it; nil when none
// came.
func receiveTwo(c *net.UnixConn) []int {
	oob := make([]byte, unix.CmsgSpace(8))
	_, oobn, _, _, err := c.ReadMsgUnix(make([]byte, 1), oob)
	if err != nil {
		return nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil
	}
	fds, _ := unix.ParseUnixRights(&msgs[0])
	return fds
}

// reachableDir is a new directory of mode under /var/tmp (which a sandbox shows as it is, unlike
// /tmp), removed at the test's end.
func reachableDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "netrev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// victimPasses warms key "victim" with a call, then runs a call of it that binds 127.0.0.1:port,
// makes an unbound TCP socket and passes both over the unix socket at path (in dir, which it may
// read: netpass), and returns what that call printed.
func victimPasses(t *testing.T, pool *Pool, dir, path string, port int) map[string]string {
	t.Helper()
	netLook(t, pool, "victim", 0)
	pause()
	a := netPlan(t, "netpass", "victim", path, strconv.Itoa(port))
	a.ReadOnly = append(a.ReadOnly, dir)
	ra := runPooled(t, pool, a)
	left := lines(ra.stdout)
	if ra.code != 0 || left["passed"] != "ok" {
		t.Fatalf("netpass: exit %d %v\n%s%s", ra.code, ra.failure, ra.stdout, ra.stderr)
	}
	return left
}
