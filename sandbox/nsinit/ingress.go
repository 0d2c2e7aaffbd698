package nsinit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ingressFD is the descriptor of the init's end of the ingress socket pair (Cmd.ExtraFiles[3]).
const ingressFD = 6

// The one-byte replies of the init to a dial request.
const (
	ingressConnected = 'C' // with the connected socket attached
	ingressRefused   = 'E' // followed by the errno, big endian
)

// --- init side ---

// serveIngressDials answers the host's dial requests on fd (ingressFD) until the host closes its
// end: each request is a port (two bytes, big endian), and the init connects to 127.0.0.1:port in
// the sandbox's network namespace — where only the program listens — and sends the connected
// socket back. Ports outside the plan's Ingress are refused. It runs after the init is confined;
// Landlock lets it (and the program) connect to the ingress ports only.
func serveIngressDials(fd int, ports []int) {
	defer unix.Close(fd)
	buf := make([]byte, 2)
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if err != nil || n == 0 {
			return
		}
		port := int(binary.BigEndian.Uint16(buf))
		sock, errno := dialLoopback(port, ports)
		if errno != nil {
			var e unix.Errno
			if !errors.As(errno, &e) {
				e = unix.EPERM
			}
			msg := []byte{ingressRefused, 0, 0}
			binary.BigEndian.PutUint16(msg[1:], uint16(e))
			_, _ = unix.Write(fd, msg)
			continue
		}
		_ = unix.Sendmsg(fd, []byte{ingressConnected}, unix.UnixRights(sock), nil, 0)
		unix.Close(sock)
	}
}

// dialLoopback connects a new TCP socket to 127.0.0.1:port when port is one of ports.
func dialLoopback(port int, ports []int) (int, error) {
	if !slices.Contains(ports, port) {
		return -1, unix.EPERM
	}
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(sock, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(sock)
		return -1, err
	}
	return sock, nil
}

// --- host side ---

// ingressConn is the host's end of the ingress socket pair.
type ingressConn struct {
	mu sync.Mutex
	f  *os.File
}

// newIngressPair creates the ingress socket pair: the host's end and the init's.
func newIngressPair() (*ingressConn, *os.File, error) {
	host, child, err := socketPair("ingress")
	if err != nil {
		return nil, nil, err
	}
	return &ingressConn{f: host}, child, nil
}

// socketPair creates a SOCK_SEQPACKET socket pair between the host and the init, named after what
// it carries: the host's end and the init's.
func socketPair(what string) (host, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s socket pair: %w", what, err)
	}
	return os.NewFile(uintptr(fds[0]), what+"-host"), os.NewFile(uintptr(fds[1]), what+"-init"), nil
}

// unixRights returns the descriptors the SCM_RIGHTS control messages in oob carry. On error it
// closes those it had already taken.
func unixRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		r, err := unix.ParseUnixRights(&m)
		if err != nil {
			closeAll(fds)
			return nil, err
		}
		fds = append(fds, r...)
	}
	return fds, nil
}

// dial asks the init for a connection to port inside the sandbox.
func (c *ingressConn) dial(port int) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil, net.ErrClosed
	}
	raw, err := c.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	req := make([]byte, 2)
	binary.BigEndian.PutUint16(req, uint16(port))
	var reply [3]byte
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var opErr error
	err = raw.Control(func(fd uintptr) {
		if _, opErr = unix.Write(int(fd), req); opErr != nil {
			return
		}
		n, oobn, _, _, opErr = unix.Recvmsg(int(fd), reply[:], oob, unix.MSG_CMSG_CLOEXEC)
	})
	switch {
	case err != nil:
		return nil, err
	case opErr != nil:
		return nil, opErr
	case n == 0:
		return nil, io.EOF // the init is gone
	case reply[0] == ingressRefused && n == 3:
		return nil, unix.Errno(binary.BigEndian.Uint16(reply[1:]))
	case reply[0] != ingressConnected:
		return nil, fmt.Errorf("unexpected reply %q", reply[:n])
	}
	fds, err := unixRights(oob[:oobn])
	if err != nil || len(fds) != 1 {
		closeAll(fds)
		return nil, fmt.Errorf("no socket in the reply: %v", err)
	}
	f := os.NewFile(uintptr(fds[0]), "ingress")
	defer f.Close()
	return net.FileConn(f)
}

// close releases the host's end; the init's dial loop then ends.
func (c *ingressConn) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		c.f.Close()
		c.f = nil
	}
}

// reusePort listens with SO_REUSEPORT: the port may be held, bound and not listening, by this
// user's process that allocated it (clihostctl's login callback), so that no other user can take
// it first; the kernel lets only the same user bind beside it.
var reusePort = net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
		return err
	}
	return serr
}}

// ServeIngress exposes the plan's Ingress ports (Plan.Ingress): it listens on the host's
// 127.0.0.1 at each of them and forwards every connection into the sandbox's network namespace, to
// the same port on its loopback, where the program listens (an OAuth login's callback server). Call
// it after Start; stop closes the listeners and waits for the connections to end. A port already
// in use on the host is an error: the sandbox then cannot offer what the bundle declares.
func (c *Cmd) ServeIngress() (stop func(), err error) {
	if c.ingress == nil {
		return func() {}, nil
	}
	var lns []net.Listener
	var wg sync.WaitGroup
	stop = func() {
		for _, l := range lns {
			l.Close()
		}
		c.ingress.close()
		wg.Wait()
	}
	for _, port := range c.ingressPorts {
		l, err := reusePort.Listen(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			stop()
			return func() {}, fmt.Errorf("nsinit: ingress: %w", err)
		}
		lns = append(lns, l)
		wg.Go(func() {
			for {
				in, err := l.Accept()
				if err != nil {
					return
				}
				wg.Go(func() { c.forward(in, port) })
			}
		})
	}
	return stop, nil
}

// forward copies between a host connection and a new connection to port inside the sandbox.
func (c *Cmd) forward(in net.Conn, port int) {
	defer in.Close()
	out, err := c.ingress.dial(port)
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, in)
		if tc, ok := out.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(in, out)
	if tc, ok := in.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	<-done
}
