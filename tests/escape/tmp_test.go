package escape

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPrivateTmp is issue 10 §5: the sandbox's private /tmp and /dev/shm are writable whatever
// the grants and the deny list hold (programs such as hugo keep caches there), and they are never
// the host's. The rw bundle writes its workspace, which lies under /tmp and has mandatory masks
// there (.git/hooks, .git/config) and an fs.deny; the ro bundle writes nothing but denies paths in
// its workspace under /tmp; the rw bundle also runs in a workspace outside /tmp; the state bundle
// (no write grant, no deny under /tmp) is the control.
// Each creates, writes, reads back, renames and removes files and a directory in /tmp and
// /dev/shm; afterwards the host's /tmp and /dev/shm hold none of them.
func TestPrivateTmp(t *testing.T) {
	s := newSuite(t)
	var table []probeCase
	for i, b := range []struct {
		bundle string
		ws     func(*suite) string
	}{{"state", emptyWS}, {"rw", rwWS}, {"rw", outWS}, {"ro", roWS}} {
		for _, dir := range []string{"/tmp", "/dev/shm"} {
			name := "clihost-escape-scratch-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
			table = append(table, probeCase{
				name: strconv.Itoa(i) + "-" + b.bundle + dir, bundle: b.bundle, ws: b.ws, probe: "scratch", args: lit(dir, name),
				want: want{result: "allowed", step: "remove-top"},
				after: func(t *testing.T, _ *suite) {
					for _, p := range []string{filepath.Join(dir, name), filepath.Join(dir, name+".file")} {
						absent(t, p)
					}
				},
			})
			// A file left in place: the host's own directory never gets it.
			table = append(table, probeCase{
				name: strconv.Itoa(i) + "-" + b.bundle + dir + "/left", bundle: b.bundle, ws: b.ws, probe: "write", args: lit(filepath.Join(dir, name+".left")),
				want:  allowed(""),
				after: func(t *testing.T, _ *suite) { absent(t, filepath.Join(dir, name+".left")) },
			})
		}
	}
	s.run(t, table)
}
