package setup

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// loopbackPeerUID is the user owning the client end of a loopback TCP connection accepted at
// local from remote, found in /proc/net/tcp and /proc/net/tcp6 (the table of this network
// namespace: the client end of a loopback connection is a socket of this machine).
func loopbackPeerUID(local, remote string) (int, error) {
	l, err := netip.ParseAddrPort(local)
	if err != nil {
		return 0, fmt.Errorf("local address %q: %w", local, err)
	}
	r, err := netip.ParseAddrPort(remote)
	if err != nil {
		return 0, fmt.Errorf("remote address %q: %w", remote, err)
	}
	// The client's socket has the remote address as its own and the local one as its peer.
	for _, table := range []struct {
		path string
		v6   bool
	}{{"/proc/self/net/tcp", false}, {"/proc/self/net/tcp6", true}} {
		if !table.v6 && !(r.Addr().Unmap().Is4() && l.Addr().Unmap().Is4()) {
			continue
		}
		uid, found, err := findSocketUID(table.path, procAddr(r, table.v6), procAddr(l, table.v6))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
		if found {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("no socket %s -> %s in /proc/net/tcp", remote, local)
}

// findSocketUID reads a /proc/net/tcp table for the socket from src to dst and returns its uid.
func findSocketUID(path, src, dst string) (int, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid …
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[1] != src || fields[2] != dst {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			return 0, false, fmt.Errorf("%s: uid %q: %w", path, fields[7], err)
		}
		return uid, true, nil
	}
	return 0, false, sc.Err()
}

// procAddr is ap as /proc/net/tcp (v6: tcp6) writes it: the address's 32-bit words each in the
// kernel's little-endian byte order, in hex, a colon and the port in hex.
func procAddr(ap netip.AddrPort, v6 bool) string {
	var b []byte
	if v6 {
		a := ap.Addr().As16()
		b = a[:]
	} else {
		a := ap.Addr().Unmap().As4()
		b = a[:]
	}
	w := make([]byte, len(b))
	for i := 0; i < len(b); i += 4 {
		w[i], w[i+1], w[i+2], w[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return strings.ToUpper(hex.EncodeToString(w)) + fmt.Sprintf(":%04X", ap.Port())
}

// peerAllowed reports whether the connection from remote to local belongs to one of uids; an
// empty uids allows any.
func peerAllowed(uids []int, local net.Addr, remote string) bool {
	if len(uids) == 0 {
		return true
	}
	if local == nil {
		return false
	}
	uid, err := loopbackPeerUID(local.String(), remote)
	if err != nil {
		return false
	}
	for _, u := range uids {
		if u == uid {
			return true
		}
	}
	return false
}
