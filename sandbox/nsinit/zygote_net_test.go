package nsinit

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// The zygote's network namespaces (zygote_net.go), attacked: a call may run in a namespace an
// earlier call left only when that call had the same key and identity, and left nothing in it.

// netPlan is a plan running probe mode mode (netProbe) under key, TCP allowed.
func netPlan(t *testing.T, mode, key string, args ...string) isolation.Plan {
	t.Helper()
	p := probePlan(t, mode)
	p.Args = append(p.Args, args...)
	p.NetworkKey, p.NoNetwork = key, false
	return p
}

// netLook runs the look probe under key (and uid, when not 0) and returns what it printed.
func netLook(t *testing.T, pool *Pool, key string, uid int, args ...string) map[string]string {
	t.Helper()
	p := netPlan(t, "netlook", key, args...)
	if uid != 0 {
		p.UID, p.GID = uid, uid
	}
	r := runPooled(t, pool, p)
	if r.code != 0 {
		t.Fatalf("netlook: exit %d %v\n%s%s", r.code, r.failure, r.stdout, r.stderr)
	}
	return lines(r.stdout)
}

// pause lets the zygote's thread of the last call give its namespace back (after the host let go).
func pause() { time.Sleep(100 * time.Millisecond) }

// TestZygoteReusesANetworkNamespaceWithinItsKeyOnly: calls of one key and identity, one after
// the other, run in a namespace they used before (the point of the pool); a call of another key,
// of the same key as another user, or of no key never gets one of theirs, nor leaves its own.
func TestZygoteReusesANetworkNamespaceWithinItsKeyOnly(t *testing.T) {
	pool := zygotePool(t)
	seen := map[string][]string{} // namespace → the keys of the calls that ran in it
	look := func(key string, uid int) string {
		ns := netLook(t, pool, key, uid)["ns"]
		if ns == "" || ns == "?" {
			t.Fatal("netlook printed no namespace")
		}
		who := key + "/" + strconv.Itoa(uid)
		if !slices.Contains(seen[ns], who) {
			seen[ns] = append(seen[ns], who)
		}
		pause()
		return ns
	}
	var k1 []string
	for range 4 {
		k1 = append(k1, look("k1", 0))
		look("k2", 0)
		if pool.root { // on a rootless host every call runs as the host user
			look("k1", nobody-1)
		}
		look("", 0)
	}
	for ns, keys := range seen {
		if len(keys) > 1 {
			t.Errorf("network namespace %s ran calls of %v: a namespace must serve one key and identity", ns, keys)
		}
	}
	slices.Sort(k1)
	if len(slices.Compact(k1)) == 4 {
		t.Errorf("four calls of key k1 ran in four namespaces %v: none was reused", k1)
	}
	for ns, keys := range seen {
		if keys[0] == "/0" && slices.Contains(k1, ns) {
			t.Errorf("a call without a key ran in %s, a namespace of k1's", ns)
		}
	}
}

// TestZygoteDoesNotReuseANamespaceACallLeftSomethingIn: a call of key k leaves a TCP connection in
// TIME_WAIT, then one leaves a bound UDP socket alive in a cycle of unix sockets (an SCM_RIGHTS
// message holding the socket and the socket pair that carries it: it outlives every process of the
// call until the kernel's garbage collection). The next calls of k must see none of it: no TCP or
// UDP socket in /proc/net, and the UDP port free to bind; and none may run in the namespace of the
// time-wait socket.
func TestZygoteDoesNotReuseANamespaceACallLeftSomethingIn(t *testing.T) {
	pool := zygotePool(t)
	// Warm the key: a clean call's namespace is in the pool.
	netLook(t, pool, "k", 0)
	pause()
	for _, mode := range []string{"netleave-tw", "netleave-cycle"} {
		r := runPooled(t, pool, netPlan(t, mode, "k"))
		left := lines(r.stdout)
		if r.code != 0 || left["port"] == "" {
			t.Fatalf("%s: exit %d %v\n%s%s", mode, r.code, r.failure, r.stdout, r.stderr)
		}
		pause()
		for range 3 {
			now := netLook(t, pool, "k", 0, left["port"])
			switch {
			case now["ns"] != left["ns"]:
			case mode == "netleave-cycle":
				// The kernel's garbage collection of unix sockets, which runs on its own, may free
				// the cycle before the zygote looks at the namespace: it is then clean, and may be
				// used again. What the next call sees is checked below.
				t.Logf("%s: the cycle was freed before the call's end was checked: its namespace was reused", mode)
			default: // a time-wait socket stays a minute
				t.Errorf("%s: the next call of the key ran in the namespace the call left %s in", mode, left["left"])
			}
			if now["tcp"] != "0" || now["udp"] != "0" || now["bind "+left["port"]] != "ok" {
				t.Errorf("%s: the next call of the key sees the call before it: %v", mode, now)
			}
			pause()
		}
	}
}

// TestZygotePID1NamespaceHoldsNothing: while a call listens on its loopback, another call (of
// another key) sees neither that listener nor any socket in its own namespace or in PID 1's (what
// /proc/1/net shows it), and PID 1's namespace has no address on its loopback.
func TestZygotePID1NamespaceHoldsNothing(t *testing.T) {
	pool := zygotePool(t)
	cmd, stdio := takeReady(t, pool, netPlan(t, "netlisten", "a"), true)
	out := bufio.NewReader(stdio.Out)
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("the listener: %q %v", line, err)
		}
		if line == "listening\n" {
			break
		}
	}
	for _, key := range []string{"b", "a", ""} {
		now := netLook(t, pool, key, 0)
		if now["tcp"] != "0" || now["pid1 tcp"] != "0" || now["pid1 addresses"] != "0" {
			t.Errorf("a call of key %q beside a listening call of key a: %v", key, now)
		}
	}
	stdio.In.Close()
	if r := finishPooled(t, cmd, stdio); r.code != 0 {
		t.Errorf("the listener: exit %d %v %s", r.code, r.failure, r.stderr)
	}
}

// netProbe runs the network probes of this file in a sandbox (see attackProbe): netlook prints
// its namespace's cookie (ns), the TCP and UDP sockets it sees (tcp, udp), those of PID 1's namespace
// (pid1 tcp) and PID 1's loopback addresses (pid1 addresses), and whether it may bind each UDP port
// its arguments name ("bind N"); netleave-tw leaves a TCP connection in TIME_WAIT, netleave-cycle
// a bound UDP socket in an SCM_RIGHTS cycle, both printing ns and the port; netlisten listens on
// TCP until its input ends.
func netProbe(mode string) {
	fmt.Println("ns:", netnsCookie())
	switch mode {
	case "netlook":
		fmt.Println("tcp:", procEntries("/proc/self/net/tcp")+procEntries("/proc/self/net/tcp6"))
		fmt.Println("udp:", procEntries("/proc/self/net/udp")+procEntries("/proc/self/net/udp6"))
		fmt.Println("pid1 tcp:", procEntries("/proc/1/net/tcp")+procEntries("/proc/1/net/tcp6"))
		addrs, err := os.ReadFile("/proc/1/net/if_inet6")
		v4, err4 := os.ReadFile("/proc/1/net/fib_trie")
		switch {
		case err != nil && err4 != nil:
			fmt.Println("pid1 addresses:", err, err4)
		default:
			fmt.Println("pid1 addresses:", strings.Count(string(addrs), "\n")+strings.Count(string(v4), "/32 host LOCAL"))
		}
		for _, port := range os.Args[1:] {
			n, _ := strconv.Atoi(port)
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
			if err == nil {
				err = unix.Bind(fd, &unix.SockaddrInet4{Port: n, Addr: [4]byte{127, 0, 0, 1}})
			}
			fmt.Printf("bind %s: %s\n", port, errName(err))
		}
	case "netleave-tw":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println("listen:", err)
			return
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			fmt.Println("dial:", err)
			return
		}
		s, _ := ln.Accept()
		c.Close() // the side that closes first keeps TIME_WAIT
		time.Sleep(10 * time.Millisecond)
		s.Close()
		fmt.Println("port:", ln.Addr().(*net.TCPAddr).Port)
		fmt.Println("left: a TCP connection in TIME_WAIT")
	case "netleave-cycle":
		udp, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err == nil {
			err = unix.Bind(udp, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
		}
		pair, err2 := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil || err2 != nil {
			fmt.Println("sockets:", err, err2)
			return
		}
		sa, _ := unix.Getsockname(udp)
		// Both ends and the UDP socket in flight on the pair itself: no process holds them.
		if err := unix.Sendmsg(pair[0], []byte{0}, unix.UnixRights(udp, pair[0], pair[1]), nil, 0); err != nil {
			fmt.Println("sendmsg:", err)
			return
		}
		unix.Close(udp)
		unix.Close(pair[0])
		unix.Close(pair[1])
		fmt.Println("port:", sa.(*unix.SockaddrInet4).Port)
		fmt.Println("left: a bound UDP socket in a cycle of unix sockets")
	case "netlisten":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println("listen:", err)
			return
		}
		fmt.Println("listening")
		_, _ = os.Stdin.Read(make([]byte, 1))
		ln.Close()
	}
}

// netnsCookie is the cookie of the calling thread's network namespace, which no other namespace
// ever has (its inode number is reused); "?" when it cannot be read.
func netnsCookie() string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "?"
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return "?"
	}
	return strconv.FormatUint(c, 10)
}

// procEntries is the number of sockets a /proc/net table lists (its lines but the header).
func procEntries(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return max(strings.Count(string(b), "\n")-1, 0)
}

// TestRequestNoThreadTookFinishes: a request whose descriptors a ready thread closes without
// taking it (a sandbox built ahead asked for on a stale copy of the mount table, see ready) has no
// zygote and no network namespace; finishing it must not touch either (it killed the zygote once).
func TestRequestNoThreadTookFinishes(t *testing.T) {
	req := newZcall()
	r, w, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	req.conn, req.report = r, w
	req.finish()
	if req.conn != -1 || req.report != -1 {
		t.Errorf("the request's descriptors are not closed: conn %d, report %d", req.conn, req.report)
	}
}
