package nsinit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/egress/addr"
	"golang.org/x/sys/unix"
)

// egressFD is the descriptor of the init's end of the listener socket pair (Cmd.ExtraFiles[2]).
const egressFD = 5

// listenersMsg is the one byte of payload that carries the listeners (SCM_RIGHTS needs a payload).
const listenersMsg = 'L'

// listenSpec is one socket the init creates for an Egress sandbox.
type listenSpec struct {
	typ  int     // unix.SOCK_STREAM (listening) or unix.SOCK_DGRAM
	addr [4]byte // IPv4 address
	port int
}

func (s listenSpec) String() string {
	proto := "tcp"
	if s.typ == unix.SOCK_DGRAM {
		proto = "udp"
	}
	return fmt.Sprintf("%s %d.%d.%d.%d:%d", proto, s.addr[0], s.addr[1], s.addr[2], s.addr[3], s.port)
}

// listenSpecs returns the sockets of an Egress sandbox, in the order the init sends them: the HTTP
// proxy, the SOCKS5 server, the DNS stub, then the capture ports.
func listenSpecs() []listenSpec {
	lo := [4]byte{127, 0, 0, 1}
	specs := []listenSpec{
		{unix.SOCK_STREAM, lo, addr.HTTPProxyPort},
		{unix.SOCK_STREAM, lo, addr.SOCKSPort},
		{unix.SOCK_DGRAM, lo, addr.DNSPort},
	}
	for _, p := range addr.CapturePorts() {
		specs = append(specs, listenSpec{unix.SOCK_STREAM, [4]byte{}, p})
	}
	return specs
}

// egressConnectPorts are the TCP ports an Egress sandbox's program may connect to (Landlock): the
// proxies and the capture ports. In the sandbox's network namespace only the init's listeners,
// served by the host, are behind them.
func egressConnectPorts() []int {
	return append([]int{addr.HTTPProxyPort, addr.SOCKSPort}, addr.CapturePorts()...)
}

// egressFile is a file an Egress sandbox sees in place of the host's.
type egressFile struct {
	name    string // in the init's private tmpfs
	path    string // in the sandbox
	content string
}

// egressFiles are the files the init generates for an Egress sandbox.
var egressFiles = []egressFile{
	{"resolv.conf", "/etc/resolv.conf", "nameserver 127.0.0.1\n"},
	{"hosts", "/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + sandboxHostname + "\n"},
}

// --- host side ---

// egressConn is the host's end of the listener socket pair.
type egressConn struct {
	mu   sync.Mutex
	f    *os.File // nil once used or closed
	used bool
	// end is f, never cleared and read without mu (which receive holds while it waits): expire
	// sets its deadline, which does nothing once it is closed.
	end *os.File
}

// newEgressPair creates the listener socket pair: the host's end and the init's (or the zygote's).
// The host's end is non-blocking, so that its wait is in the runtime's poller and a deadline
// (expire) can end it.
func newEgressPair() (*egressConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("egress socket pair: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		closeAll(fds[:])
		return nil, nil, fmt.Errorf("egress socket pair: %w", err)
	}
	host := os.NewFile(uintptr(fds[0]), "egress-host")
	return &egressConn{f: host, end: host}, os.NewFile(uintptr(fds[1]), "egress-init"), nil
}

// expire ends a wait for the listeners (receive) at t: the sandbox's PID 1 has exited, or the
// plan's deadline passed, and the zygote thread that would send them may be stuck (see
// endWithPID1, zygote.take). Listeners sent before t are received however late.
func (e *egressConn) expire(t time.Time) {
	if e != nil {
		_ = e.end.SetReadDeadline(t)
	}
}

// bound ends the wait for the listeners of a sandbox of plan p by p's deadline (p.Timeout from now,
// and a second), when it has one: a sandbox that hangs in the kernel before it sends them (a
// zygote's thread, or an init, on a file system that never answers) would keep the host waiting,
// and the runner watches the deadline only once it has the listeners.
func (e *egressConn) bound(p isolation.Plan) {
	if p.Timeout > 0 {
		e.expire(time.Now().Add(p.Timeout + pid1Drain))
	}
}

// close releases the host's end, if Listeners has not.
func (e *egressConn) close() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f != nil {
		e.f.Close()
		e.f = nil
	}
}

// Listeners returns the egress sockets the init created inside the sandbox's network namespace
// (Plan.Egress), for the host to serve (egress.Serve): the HTTP proxy on 127.0.0.1:3128, the
// SOCKS5 server on 127.0.0.1:1080, the DNS stub on UDP 127.0.0.1:53 and the transparent capture
// on 0.0.0.0:80, :443 and :22 (addr.CapturePorts order), all as the sandbox sees them. The
// caller owns them (egress.Serve closes them when it returns).
//
// Call it once, after Start. It blocks until the init has sent the sockets, which it does before
// the program starts, or has exited (building the sandbox failed: the error says so, and Failure
// after Wait names the step). It does not wait for CloseChildEnds: it closes the init's end of the
// socket pair itself. It fails when the plan has no Egress, before Start, and on a second call.
func (c *Cmd) Listeners() (*addr.Listeners, error) {
	if c.egress == nil {
		return nil, errors.New("nsinit: Listeners: the plan has no Egress")
	}
	if c.Process == nil {
		return nil, errors.New("nsinit: Listeners: the sandbox has not been started")
	}
	if len(c.childEnds) > 2 {
		c.childEnds[2].Close() // so that the init's exit reads as end of file (a pooled init's is closed already)
	}
	fds, err := c.egress.receive()
	if err != nil {
		return nil, fmt.Errorf("nsinit: Listeners: %w", err)
	}
	l, err := listenersFromFDs(fds)
	if err != nil {
		return nil, fmt.Errorf("nsinit: Listeners: %w", err)
	}
	return l, nil
}

// receive reads the init's one message and returns the descriptors it carries.
func (e *egressConn) receive() ([]int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.used {
		return nil, errors.New("the listeners were already received")
	}
	e.used = true
	if e.f == nil {
		return nil, errors.New("the socket pair is closed")
	}
	defer func() {
		e.f.Close()
		e.f = nil
	}()
	rc, err := e.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var (
		buf             [8]byte
		oob             = make([]byte, unix.CmsgSpace(4*(len(listenSpecs())+1)))
		n, oobn, flags  int
		recvErr, ctlErr error
	)
	recv := func(fd uintptr) bool {
		for {
			n, oobn, flags, _, recvErr = unix.Recvmsg(int(fd), buf[:], oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
			if recvErr != unix.EINTR {
				return recvErr != unix.EAGAIN
			}
		}
	}
	// The socket is non-blocking: the runtime's poller waits until it is readable (or expire's
	// deadline passes).
	ctlErr = rc.Read(recv)
	if errors.Is(ctlErr, os.ErrDeadlineExceeded) {
		// A deadline that passed before this call fails the read without looking: listeners sent
		// before PID 1 exited are still there, and are the host's however late it asks (as an
		// init's are).
		if ctlErr = rc.Control(func(fd uintptr) { recv(fd) }); ctlErr == nil && recvErr == unix.EAGAIN {
			return nil, errors.New("the sandbox was not built: it sent no listeners before it ended or its deadline passed (Failure after Wait tells why)")
		}
	}
	if ctlErr != nil {
		return nil, ctlErr
	}
	if recvErr != nil {
		return nil, fmt.Errorf("receive: %w", recvErr)
	}
	fds, err := unixRights(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("receive: control message: %w", err)
	}
	switch {
	case n == 0 && len(fds) == 0:
		return nil, errors.New("the sandbox was not built: its socket closed before sending its listeners (Failure after Wait tells why)")
	case flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 || n != 1 || buf[0] != listenersMsg:
		closeAll(fds)
		return nil, fmt.Errorf("receive: unexpected message (%d bytes, %d descriptors, flags %#x)", n, len(fds), flags)
	}
	return fds, nil
}

// listenersFromFDs checks that fds are exactly the sockets of listenSpecs, in any order, and
// wraps them. It takes ownership of fds: they are closed on every path (the listeners hold dups).
func listenersFromFDs(fds []int) (*addr.Listeners, error) {
	files := make([]*os.File, len(fds)) // closed once, through the File (no finalizer closes them again)
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "egress listener")
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	specs := listenSpecs()
	if len(fds) != len(specs) {
		return nil, fmt.Errorf("received %d sockets, want %d", len(fds), len(specs))
	}
	bySpec := make([]*os.File, len(specs))
	for k, fd := range fds {
		s, err := describeSocket(fd)
		if err != nil {
			return nil, err
		}
		i := slices.Index(specs, s)
		if i < 0 || bySpec[i] != nil {
			return nil, fmt.Errorf("unexpected socket %s", s)
		}
		bySpec[i] = files[k]
	}
	l := &addr.Listeners{}
	for i, f := range bySpec {
		var err error
		if specs[i].typ == unix.SOCK_DGRAM {
			l.DNS, err = net.FilePacketConn(f)
		} else {
			var ln net.Listener
			ln, err = net.FileListener(f)
			switch i {
			case 0:
				l.HTTP = ln
			case 1:
				l.SOCKS = ln
			default:
				l.Transparent = append(l.Transparent, ln)
			}
		}
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("%s: %w", specs[i], err)
		}
	}
	return l, nil
}

// describeSocket returns what the socket fd is, as a listenSpec: an IPv4 TCP socket must be
// listening.
func describeSocket(fd int) (listenSpec, error) {
	var s listenSpec
	dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return s, fmt.Errorf("received descriptor %d: %w", fd, err)
	}
	if s.typ, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil {
		return s, fmt.Errorf("received descriptor %d: %w", fd, err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return s, fmt.Errorf("received descriptor %d: %w", fd, err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if dom != unix.AF_INET || !ok {
		return s, fmt.Errorf("received descriptor %d: not an IPv4 socket", fd)
	}
	s.addr, s.port = in4.Addr, in4.Port
	if s.typ == unix.SOCK_STREAM {
		if on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || on != 1 {
			return s, fmt.Errorf("received socket %s is not listening", s)
		}
	}
	return s, nil
}

// --- init side ---

// sendListeners creates the egress sockets in the calling thread's (the sandbox's) network
// namespace, sends them to the host over the socket pair at pair (an init's egressFD, a zygote
// call's descriptor) and closes the copies made here and pair, so that the program never holds
// them.
func sendListeners(pair int) error {
	defer unix.Close(pair)
	if typ, err := unix.GetsockoptInt(pair, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_SEQPACKET {
		return fmt.Errorf("fd %d is not the egress socket pair (type %d, %v)", pair, typ, err)
	}
	var fds []int
	defer func() { closeAll(fds) }()
	for _, s := range listenSpecs() {
		fd, err := listenSocket(s)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		fds = append(fds, fd)
	}
	if err := unix.Sendmsg(pair, []byte{listenersMsg}, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL); err != nil {
		return fmt.Errorf("send to the host: %w", err)
	}
	return nil
}

// listenSocket creates the socket s describes, bound (and listening, for TCP).
func listenSocket(s listenSpec) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, s.typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: s.port, Addr: s.addr}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind: %w", err)
	}
	if s.typ == unix.SOCK_STREAM {
		if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("listen: %w", err)
		}
	}
	return fd, nil
}

// mountEgressFiles mounts the generated files, read-only, over the host's. A path that is a
// symbolic link (/etc/resolv.conf -> /run/systemd/resolve/stub-resolv.conf) is covered itself, so
// it reads as our file whether or not its target exists, and so is its target when that is an
// existing regular file (a program that reads the target directly sees ours too). A path missing
// on the host is left alone: without resolv.conf, resolvers ask 127.0.0.1 anyway.
func mountEgressFiles(files []egressFile) error {
	mfd, err := detachedTmpfs("size", "16k", "mode", "0755")
	if err != nil {
		return err
	}
	defer closeDetached(mfd)
	for _, ef := range files {
		if err := writeAt(mfd, ef.name, ef.content); err != nil {
			return fmt.Errorf("generate %s: %w", ef.path, err)
		}
		info, err := os.Lstat(ef.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		targets := []string{ef.path}
		if info.Mode()&os.ModeSymlink != 0 {
			// Resolved before anything is mounted over the link.
			if r, err := filepath.EvalSymlinks(ef.path); err == nil && !within(r, "/proc") && !within(r, "/dev") {
				if st, err := os.Stat(r); err == nil && st.Mode().IsRegular() {
					targets = append(targets, r)
				}
			}
		} else if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file or a symbolic link", ef.path)
		}
		for _, t := range targets {
			if err := mountMask(mfd, ef.name, t, nil); err != nil {
				return fmt.Errorf("%s over %s: %w", ef.name, t, err)
			}
		}
	}
	return nil
}

// writeAt creates the file name with content, mode 0644, in the directory dirfd.
func writeAt(dirfd int, name, content string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o644); err != nil { // regardless of the umask
		return err
	}
	for b := []byte(content); len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
