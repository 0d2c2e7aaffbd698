package egress

// Egress throughput: one 64 MiB HTTP transfer with a loopback server per iteration, directly
// (the baseline) and through each proxy with the loopback range admitted, downloads (GET) and
// uploads (POST). b.SetBytes makes `go test` report MB/s; a proxy's cost is its MB/s over the
// direct one's:
//
//	go test ./sandbox/egress -run '^$' -bench Egress -count 6
//
// BenchmarkEgressRelay, a bare io.Copy relay, is the floor: on a small machine the server,
// the proxy and the client share the CPUs, and the extra hop alone costs about half the
// direct throughput (2 vCPUs), whatever the proxy does.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
)

const (
	benchSize  = 64 << 20 // bytes downloaded per iteration
	benchChunk = 1 << 20  // the server's write size
	benchHost  = "bench.example.test"
)

// benchServer listens on 127.0.0.1 and returns its port. A GET is answered with benchSize
// bytes; a POST's body is read to the end and answered 204 when it was benchSize bytes long.
func benchServer(b *testing.B) int {
	b.Helper()
	chunk := make([]byte, benchChunk)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, r.Body, make([]byte, 256<<10))
			if err != nil || n != benchSize {
				http.Error(w, fmt.Sprintf("read %d bytes: %v", n, err), http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(benchSize))
		for n := 0; n < benchSize; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	b.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// benchPolicy allows benchHost on port, resolves it to 127.0.0.1 without DNS and admits the
// loopback range, as the package's tests do.
func benchPolicy(port int) *Policy {
	return &Policy{
		Allow:     []string{benchHost},
		Ports:     []int{port},
		AdmitNets: []netip.Prefix{loopNet},
		Resolver: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{loopback}, nil
		},
	}
}

// download sends GET / over c, reads the whole body through buf and checks its length. br
// reads c (it may hold bytes already read).
func download(b *testing.B, c net.Conn, br *bufio.Reader, buf []byte) {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+benchHost+"\r\nConnection: close\r\n\r\n"); err != nil {
		b.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		b.Fatal(err)
	}
	// A bare Writer hides io.Discard's ReadFrom, so the copy really uses buf.
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, resp.Body, buf)
	resp.Body.Close()
	if err != nil || n != benchSize {
		b.Fatalf("downloaded %d bytes of %d: %v", n, benchSize, err)
	}
}

// upload POSTs benchSize bytes over c, written buf at a time, and checks the 204.
func upload(b *testing.B, c net.Conn, br *bufio.Reader, buf []byte) {
	hdr := "POST / HTTP/1.1\r\nHost: " + benchHost + "\r\nContent-Length: " + strconv.Itoa(benchSize) + "\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(c, hdr); err != nil {
		b.Fatal(err)
	}
	for n := 0; n < benchSize; n += len(buf) {
		if _, err := c.Write(buf[:min(len(buf), benchSize-n)]); err != nil {
			b.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b.Fatalf("upload: %s", resp.Status)
	}
}

// benchTransfer runs one transfer per iteration (download or upload) over the connection
// open returns.
func benchTransfer(b *testing.B, transfer func(*testing.B, net.Conn, *bufio.Reader, []byte), open func() (net.Conn, *bufio.Reader)) {
	buf := make([]byte, 256<<10)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		c, br := open()
		transfer(b, c, br, buf)
		c.Close()
	}
}

// directConn connects to the server itself: the baseline.
func directConn(b *testing.B, port int) func() (net.Conn, *bufio.Reader) {
	return directConnTo(b, "127.0.0.1:"+strconv.Itoa(port))
}

// connectConn opens a tunnel to the server through a ServeHTTPProxy: CONNECT benchHost:port
// (checked, resolved by the stub, admitted).
func connectConn(b *testing.B, port int) func() (net.Conn, *bufio.Reader) {
	proxy := serve(b, benchPolicy(port).ServeHTTPProxy)
	target := net.JoinHostPort(benchHost, strconv.Itoa(port))
	return func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("CONNECT %s: %v %v", target, resp, err)
		}
		return c, br
	}
}

// socksConn opens a tunnel to the server through a ServeSOCKS5: a no-auth CONNECT to
// benchHost (ATYP 3, as socks5h:// clients send it).
func socksConn(b *testing.B, port int) func() (net.Conn, *bufio.Reader) {
	proxy := serve(b, benchPolicy(port).ServeSOCKS5)
	req := append([]byte{5, 1, 0, 3, byte(len(benchHost))}, benchHost...)
	req = append(req, byte(port>>8), byte(port))
	return func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReader(c)
		var method [2]byte
		var rep [10]byte
		if _, err := c.Write([]byte{5, 1, 0}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(br, method[:]); err != nil || method != [2]byte{5, 0} {
			b.Fatalf("SOCKS5 method reply %v: %v", method, err)
		}
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(br, rep[:]); err != nil || rep[1] != 0 {
			b.Fatalf("SOCKS5 reply %v: %v", rep, err)
		}
		return c, br
	}
}

// relayConn connects through a bare TCP relay: the proxies' accept loop and splice, with
// nothing checked in between (dial the server, io.Copy each way). It is the floor for any
// user-space proxy on this machine, the cost of the extra hop itself, against which the
// proxies' own overhead shows.
func relayConn(b *testing.B, port int) func() (net.Conn, *bufio.Reader) {
	up := "127.0.0.1:" + strconv.Itoa(port)
	var p Policy // no Serve session: nothing tracked, nothing logged
	relay := serve(b, func(ctx context.Context, ln net.Listener) error {
		return p.acceptLoop(ctx, ln, "relay", func(c net.Conn) {
			s, err := net.Dial("tcp", up)
			if err != nil {
				c.Close()
				return
			}
			splice(ctx, c, nil, s, 0)
		})
	})
	return directConnTo(b, relay)
}

// directConnTo connects to addr.
func directConnTo(b *testing.B, addr string) func() (net.Conn, *bufio.Reader) {
	return func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		return c, bufio.NewReader(c)
	}
}

// BenchmarkEgressDirect downloads from the server directly: the baseline.
func BenchmarkEgressDirect(b *testing.B) {
	benchTransfer(b, download, directConn(b, benchServer(b)))
}

// BenchmarkEgressHTTPConnect downloads through ServeHTTPProxy (CONNECT, then the GET inside
// the tunnel).
func BenchmarkEgressHTTPConnect(b *testing.B) {
	benchTransfer(b, download, connectConn(b, benchServer(b)))
}

// BenchmarkEgressSOCKS5 downloads through ServeSOCKS5.
func BenchmarkEgressSOCKS5(b *testing.B) {
	benchTransfer(b, download, socksConn(b, benchServer(b)))
}

// BenchmarkEgressRelay downloads through a bare io.Copy relay (relayConn): the hop's own cost.
func BenchmarkEgressRelay(b *testing.B) {
	benchTransfer(b, download, relayConn(b, benchServer(b)))
}

// BenchmarkEgressUploadDirect, BenchmarkEgressUploadHTTPConnect and BenchmarkEgressUploadSOCKS5
// are the same three paths in the other direction: a benchSize POST body, client to server.
func BenchmarkEgressUploadDirect(b *testing.B) {
	benchTransfer(b, upload, directConn(b, benchServer(b)))
}

func BenchmarkEgressUploadHTTPConnect(b *testing.B) {
	benchTransfer(b, upload, connectConn(b, benchServer(b)))
}

func BenchmarkEgressUploadSOCKS5(b *testing.B) {
	benchTransfer(b, upload, socksConn(b, benchServer(b)))
}
