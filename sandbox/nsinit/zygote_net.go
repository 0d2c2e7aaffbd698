package nsinit

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// The zygote's network namespaces. Making a network namespace costs ~0.5 ms of CPU (the loopback
// device, its sysctl tables), and its teardown ~0.3 ms more in a kernel worker: on two cores, about
// a tenth of a back-to-back call's time. So the zygote runs a call in a namespace an earlier call
// left behind when that is safe, and else in a new one:
//
//   - Every call's PID 1 is in one namespace made once, which holds nothing (its loopback is
//     down) and where nothing runs but the PID 1s; PID 1 opens no socket. (PID 1 is started before
//     the call's namespace can be chosen; its namespace is what /proc/1/net shows the program.)
//   - A ready thread then makes, or takes from the pool's fresh ones, a new namespace with its
//     loopback up: the call's, unless the call may reuse one.
//   - A call may run in a used namespace only if its plan has a NetworkKey (the host's name for
//     who asked) and no egress (whose listeners are the call's), and only in one that a call of the
//     same key and the same identity (uid, gid, groups) left, in which nothing was left when that
//     call had ended: no socket at all ("sockets: used 0" of /proc/net/sockstat counts every socket
//     made in the namespace, bound or not, wherever it is: in flight in a unix socket, or held by a
//     process outside the sandbox it was passed to, which could otherwise listen on the loopback
//     of a later call), none by protocol (/proc/net/protocols), no TCP time-wait socket, no IP
//     fragment being reassembled, no IPv6 flow label; and the namespace keeps no TCP metrics
//     (tcp_no_metrics_save is set when it is made: they outlive connections and no count sees
//     them). One call at a time uses a namespace.
//   - Reuse stays within a key and identity all the same: what a call may see of the one before
//     is the counters of its loopback and protocols (/proc/net/dev, /proc/net/snmp).

// maxFreshNets and maxUsedNets bound the namespaces the pool keeps; maxUsedNetsPerKey those of
// one key.
const (
	maxFreshNets      = 4
	maxUsedNets       = 8
	maxUsedNetsPerKey = 2
)

// netns is a network namespace the zygote holds: its descriptor and those of the procfs files
// that tell what is left in it, opened in it (a procfs file shows the namespace of its opener).
type netns struct {
	// reusable says the namespace keeps no TCP metrics (tcp_no_metrics_save), which outlive their
	// connections and no check sees: only then may a call use it after another.
	reusable  bool
	ns        int    // the namespace (task/TID/ns/net)
	protocols int    // net/protocols: the sockets of each protocol
	sockstat  int    // net/sockstat: TCP's time-wait sockets, IPv4 fragments
	sockstat6 int    // net/sockstat6: IPv6 fragments
	flowlabel int    // net/ip6_flowlabel: IPv6 flow labels, which outlive their sockets
	used      bool   // a call's sandbox was built in it
	key       string // when used: the key of the calls that may use it again, "" for none
}

// close closes n's descriptors; the namespace goes when nothing else is in it.
func (n *netns) close() {
	for _, fd := range []*int{&n.ns, &n.protocols, &n.sockstat, &n.sockstat6, &n.flowlabel} {
		closeFD(fd)
	}
}

// clean reports whether nothing of the calls that used n is left in it (see the top of this file).
func (n *netns) clean() bool {
	protocols, err := rereadFD(n.protocols, nil)
	if err != nil || !noSockets(protocols) {
		return false
	}
	// "sockets: used" counts every socket made in the namespace, wherever it is now: bound or not,
	// in flight in a unix socket, held by a process outside the sandbox it was passed to.
	stat, err := rereadFD(n.sockstat, nil)
	if err != nil || !bytes.HasPrefix(stat, []byte("sockets: used 0\n")) || !bytes.Contains(stat, []byte(" tw 0 ")) ||
		!bytes.Contains(stat, []byte("FRAG: inuse 0 ")) {
		return false
	}
	if n.sockstat6 < 0 { // no IPv6
		return true
	}
	stat6, err := rereadFD(n.sockstat6, nil)
	if err != nil || !bytes.Contains(stat6, []byte("FRAG6: inuse 0 ")) {
		return false
	}
	labels, err := rereadFD(n.flowlabel, nil)
	return err == nil && bytes.Count(labels, []byte("\n")) == 1 // the header alone
}

// noSockets reports whether every protocol of a /proc/net/protocols text counts no socket (its
// third column).
func noSockets(text []byte) bool {
	lines := bytes.Split(bytes.TrimSpace(text), []byte("\n"))
	if len(lines) < 2 || !bytes.HasPrefix(lines[0], []byte("protocol ")) {
		return false
	}
	for _, l := range lines[1:] {
		f := bytes.Fields(l)
		if len(f) < 3 || string(f[2]) != "0" {
			return false
		}
	}
	return true
}

// netPool holds the network namespaces the zygote keeps between calls. A nil *netPool (probeZygote's)
// keeps none: every thread makes its own.
type netPool struct {
	proc int // the zygote's /proc/self (mountTable.proc)

	mu    sync.Mutex
	empty int      // PID 1s' namespace, made by the first thread that needs it; -1 until then
	fresh []*netns // made, never used
	used  []*netns // used, clean, oldest first
}

// newNetPool returns an empty pool of a zygote whose /proc/self is proc.
func newNetPool(proc int) *netPool { return &netPool{proc: proc, empty: -1} }

// enterEmpty moves the calling thread into the namespace of every call's PID 1 (see the top of
// this file), made on the first call; without a pool, into a new namespace of its own.
func (p *netPool) enterEmpty() error {
	if p == nil {
		return unix.Unshare(unix.CLONE_NEWNET)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.empty >= 0 {
		return unix.Setns(p.empty, unix.CLONE_NEWNET)
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return err
	}
	fd, err := p.openOwn("ns/net")
	if err != nil {
		return err
	}
	p.empty = fd
	return nil
}

// enterFresh moves the calling thread into a network namespace no call has used, with its
// loopback up: one the pool kept, or a new one. On failure it returns the failed step.
func (p *netPool) enterFresh() (*netns, string, error) {
	if p != nil {
		p.mu.Lock()
		var n *netns
		if k := len(p.fresh); k > 0 {
			n, p.fresh = p.fresh[k-1], p.fresh[:k-1]
		}
		p.mu.Unlock()
		if n != nil {
			if err := unix.Setns(n.ns, unix.CLONE_NEWNET); err != nil {
				n.close()
				return nil, "network: namespace", err
			}
			return n, "", nil
		}
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, "unshare", err
	}
	if err := loopbackUp(); err != nil {
		return nil, "network: lo up", err
	}
	if p == nil {
		return nil, "", nil
	}
	n := &netns{ns: -1, protocols: -1, sockstat: -1, sockstat6: -1, flowlabel: -1}
	for _, f := range []struct {
		fd   *int
		name string
		ipv6 bool // absent when the kernel has no IPv6 (ipv6.disable=1): nothing of it to check
	}{{&n.ns, "ns/net", false}, {&n.protocols, "net/protocols", false}, {&n.sockstat, "net/sockstat", false},
		{&n.sockstat6, "net/sockstat6", true}, {&n.flowlabel, "net/ip6_flowlabel", true}} {
		fd, err := p.openOwn(f.name)
		if err != nil && !(f.ipv6 && errors.Is(err, unix.ENOENT)) {
			n.close()
			return nil, "network: namespace", err
		}
		*f.fd = fd
	}
	// (Not checked clean here: "sockets: used" still counts loopbackUp's socket for a moment.)
	// The thread's /proc is its PID 1's procfs by now, not a read-only one of the host's; a
	// namespace's net sysctls are its owner's (root, or the zygote's user namespace's).
	n.reusable = writeSysctl("net/ipv4/tcp_no_metrics_save", "1") == nil
	return n, "", nil
}

// writeSysctl writes value to the sysctl name (under /proc/sys) of the calling thread's namespaces
// and checks it reads back. It opens the file through a detached clone of the thread's /proc, no
// mount of its mount namespace: every process another thread clones meanwhile (a call's PID 1, a
// program until its exec) holds a copy of the zygote's descriptors for a moment, and a file open
// for writing on a mount of the namespace would keep the call's remount of everything read-only
// from happening (EBUSY, buildNamespaces).
func writeSysctl(name, value string) error {
	proc, err := unix.OpenTree(unix.AT_FDCWD, "/proc", unix.OPEN_TREE_CLONE|openTreeCloexec)
	if err != nil {
		return fmt.Errorf("clone /proc: %w", err)
	}
	defer unix.Close(proc)
	fd, err := unix.Openat(proc, "sys/"+name, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, err := unix.Pwrite(fd, []byte(value), 0); err != nil {
		return err
	}
	buf := make([]byte, 16)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return err
	}
	if got := string(bytes.TrimSpace(buf[:n])); got != value {
		return fmt.Errorf("%s reads %q after %q was written", name, got, value)
	}
	return nil
}

// openOwn opens the calling thread's file name under /proc/self/task/TID (the thread's /proc may
// be a sandbox's procfs by now).
func (p *netPool) openOwn(name string) (int, error) {
	path := "task/" + strconv.Itoa(unix.Gettid()) + "/" + name
	fd, err := unix.Openat(p.proc, path, unix.O_RDONLY|unix.O_CLOEXEC, 0) // ns/net is a link of procfs's own
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	return fd, nil
}

// reuse moves the calling thread, in *n (a fresh namespace, which goes back to the pool's fresh
// ones), into a namespace a call of key left clean, if the pool has one. key "" reuses none.
func (p *netPool) reuse(n **netns, key string) error {
	if p == nil || *n == nil || key == "" {
		return nil
	}
	p.mu.Lock()
	var u *netns
	for i := len(p.used) - 1; i >= 0; i-- {
		if p.used[i].key == key {
			u = p.used[i]
			p.used = append(p.used[:i], p.used[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	if u == nil {
		return nil
	}
	if err := unix.Setns(u.ns, unix.CLONE_NEWNET); err != nil {
		u.close()
		return err
	}
	p.giveBack(*n)
	*n = u
	return nil
}

// giveBack keeps n, which its thread no longer needs (the call it served has ended, with
// everything of its sandbox), if it may be used again: fresh, or used with a key and clean, and
// the pool has room. Else it closes n.
func (p *netPool) giveBack(n *netns) {
	if n == nil {
		return
	}
	keep := p != nil && (!n.used || n.reusable && n.key != "" && n.clean())
	if !keep {
		n.close()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !n.used {
		if len(p.fresh) < maxFreshNets {
			p.fresh = append(p.fresh, n)
			return
		}
		n.close()
		return
	}
	same := 0
	for _, u := range p.used {
		if u.key == n.key {
			same++
		}
	}
	if same >= maxUsedNetsPerKey {
		n.close()
		return
	}
	if len(p.used) >= maxUsedNets {
		p.used[0].close()
		p.used = p.used[1:]
	}
	p.used = append(p.used, n)
}

// networkKey is the key of the network namespaces p may run in again (netns.key): its NetworkKey
// and its identity; "" when p has no NetworkKey.
func networkKey(p isolation.Plan) string {
	if p.NetworkKey == "" {
		return ""
	}
	return fmt.Sprintf("%q %d %d %v", p.NetworkKey, p.UID, p.GID, p.Groups)
}
