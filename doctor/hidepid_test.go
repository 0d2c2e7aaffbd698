package doctor

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestHidepidFromMountinfo reads real mountinfo lines: /proc with hidepid=invisible (or 2, 1,
// noaccess, ptraceable) is OK; without it, or with hidepid=0, a warning with the fix; the last proc
// mount on /proc decides; other proc mounts do not count.
func TestHidepidFromMountinfo(t *testing.T) {
	const plain = "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
	const hidden = "22 27 0:21 / /proc rw,relatime shared:12 - proc proc rw,hidepid=invisible\n"
	const other = "90 27 0:51 / /sandbox/proc rw - proc proc rw,hidepid=2\n"
	for _, c := range []struct {
		text string
		want Status
	}{
		{plain, Warn},
		{hidden, OK},
		{strings.Replace(hidden, "invisible", "2", 1), OK},
		{strings.Replace(hidden, "invisible", "noaccess", 1), OK},
		{strings.Replace(hidden, "invisible", "0", 1), Warn},
		{strings.Replace(hidden, "invisible", "off", 1), Warn},
		{hidden + plain, Warn},
		{plain + other, Warn},
		{"", Warn},
	} {
		got := hidepidFromMountinfo(c.text)
		if got.Status != c.want || got.Name != "proc hidepid" || (c.want == Warn && !strings.Contains(got.Fix, "hidepid=invisible")) {
			t.Errorf("%q: %+v, want %s", c.text, got, c.want)
		}
	}
}

// TestHidepidCheckMatchesWhatNobodySees: doctor's check on this host agrees with what another uid
// can do: when nobody reads the command line of a root process, the check warns, and when nobody
// cannot, it is OK.
func TestHidepidCheckMatchesWhatNobodySees(t *testing.T) {
	fixture.Need(t, "setpriv")
	var out bytes.Buffer
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat", "/proc/1/cmdline")
	cmd.Stdout = &out
	readable := cmd.Run() == nil && out.Len() > 0
	c := hidepidCheck()
	if readable != (c.Status == Warn) {
		t.Fatalf("nobody reads /proc/1/cmdline: %v; doctor says %+v", readable, c)
	}
}
