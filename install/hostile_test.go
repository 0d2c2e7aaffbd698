package install_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/manifest"
)

// hostileServer answers every request with head (status line and headers) and then the first cut
// bytes of body, and closes the connection: a body shorter than it announced, or a chunked body
// cut off before its last chunk.
func hostileServer(t *testing.T, head string, body []byte, cut int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for line, err := r.ReadString('\n'); err == nil && line != "\r\n"; line, err = r.ReadString('\n') {
				}
				conn.Write([]byte(head))
				conn.Write(body[:cut])
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/bin"
}

// TestHostileServerLeavesThePreviousBinary installs a binary, then answers the next install of it
// with bodies that end early, cut around the first chunk (256 KiB) and the full ones (2 MiB):
// shorter than the Content-Length announced, or a chunked body that never ends, each once with a
// checksum and once without one (where only the length tells). Every such install fails, and the
// previous binary is still in place, the same file and whole; nothing else is left in the state
// directory and no descriptor on the binary's path survives.
func TestHostileServerLeavesThePreviousBinary(t *testing.T) {
	t.Parallel()
	o := options(t)
	s := newServer(t)
	old := versioned("1.0.0", 1<<20)
	res, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "download", URL: s.serve("/v1", old), VerifySHA256: sum(old)}), o)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(res.BinPath)
	if err != nil {
		t.Fatal(err)
	}
	next := versioned("2.0.0", 5<<20)
	const first, full = 256 << 10, 2 << 20
	for _, cut := range []int{0, 1, first - 1, first, first + 1, first + full, first + full + 4096, len(next) - 1} {
		for _, chunked := range []bool{false, true} {
			for _, verified := range []bool{false, true} {
				head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(next))
				body := next
				if chunked {
					// one chunk announcing the whole binary, cut short (no terminating chunk)
					head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
					body = append(fmt.Appendf(nil, "%x\r\n", len(next)), next...)
				}
				e := manifest.InstallMethod{Method: "download", URL: hostileServer(t, head, body, min(cut, len(body)-1))}
				if verified {
					e.VerifySHA256 = sum(next)
				}
				name := fmt.Sprintf("cut at %d, chunked %t, verified %t", cut, chunked, verified)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				got, err := install.Install(ctx, bundle(e), o)
				cancel()
				if err == nil {
					t.Fatalf("%s: installed %s", name, got.BinPath)
				}
				if strings.Contains(err.Error(), "no data received") {
					t.Fatalf("%s: the cut was taken for a stall: %v", name, err)
				}
				after, serr := os.Stat(res.BinPath)
				if serr != nil || !os.SameFile(before, after) || after.Size() != int64(len(old)) {
					t.Fatalf("%s: the previous binary is not in place: %v (err %v)", name, after, serr)
				}
				if out := runBin(t, res.BinPath); out != "clihosttesttool 1.0.0" {
					t.Fatalf("%s: the binary prints %q", name, out)
				}
				if names := binRootNames(t, o.StateDir); !slices.Equal(names, []string{key}) {
					t.Fatalf("%s: %s/bin holds %v", name, o.StateDir, names)
				}
				if entries, _ := os.ReadDir(install.BinDir(o.StateDir, key)); len(entries) != 1 {
					t.Fatalf("%s: the bin directory holds %d entries", name, len(entries))
				}
			}
		}
	}
	assertReleased(t, res.BinPath)
}
