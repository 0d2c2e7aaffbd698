package host

import (
	"testing"

	"github.com/clihost/clihost/internal/mountinfo"
)

// TestOnFSBindMount: a folder under a bind mount is found on the file system and folder the mount
// shows, with mountinfo's escapes undone; the topmost mount of a point wins.
func TestOnFSBindMount(t *testing.T) {
	mounts := []mountEntry{
		{dev: "8:1", root: "/", point: "/"},
		{dev: "0:40", root: "/", point: "/tmp"},
		{dev: "8:1", root: "/var/lib/clihost", point: mountinfo.Unescape(`/home/a\040b/proj/state`)},
	}
	for p, want := range map[string][2]string{
		"/var/lib/clihost/bin":         {"8:1", "/var/lib/clihost/bin"},
		"/home/a b/proj/state/bin":     {"8:1", "/var/lib/clihost/bin"},
		"/home/a b/proj":               {"8:1", "/home/a b/proj"},
		"/tmp/x":                       {"0:40", "/x"},
		"/home/a b/proj/state-not/bin": {"8:1", "/home/a b/proj/state-not/bin"},
	} {
		if dev, rel := onFS(mounts, p); dev != want[0] || rel != want[1] {
			t.Errorf("onFS(%q) = %q %q, want %q %q", p, dev, rel, want[0], want[1])
		}
	}
}
