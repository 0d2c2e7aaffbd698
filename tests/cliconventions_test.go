package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// TestInstallProgressFromDaemon: a root clihostd runs a package manager (a stub apt-get first on
// its PATH, printing as apt does and taking seconds); clihostctl install, piped, shows the
// attempt with its elapsed time and the manager's last line, not only "installing … (attempt 1)",
// and the failure still ends with the manager's last lines.
func TestInstallProgressFromDaemon(t *testing.T) {
	fixture.NeedRoot(t)
	root := t.TempDir()
	stubs := filepath.Join(root, "stubs")
	writeFile(t, filepath.Join(stubs, "apt-get"), "#!/bin/sh\necho 'Reading package lists...'\nsleep 2.5\necho 'E: Unable to locate package clihost-progress-probe' >&2\nexit 100\n")
	if err := os.Chmod(filepath.Join(stubs, "apt-get"), 0o755); err != nil {
		t.Fatal(err)
	}
	bundleWith(t, root, "progress", "clihost-progress-probe", `(\d+\.\d+\.\d+)`, `{ method: apt, package: clihost-progress-probe }`)
	d := startDaemonWith(t, filepath.Join(root, "state"), fixture.Workspace(t), func(c *exec.Cmd) {
		c.Env = append(c.Env, "PATH="+stubs+":"+systemPath) // the later PATH wins
	}, "--bundles", filepath.Join(root, "bundles"), "--no-catalog")
	r := d.ctl(t, "install", "progress")
	if r.code != 1 || !strings.Contains(r.stderr, "installing clihost-progress-probe (attempt 1)\n") ||
		!strings.Contains(r.stderr, "installing clihost-progress-probe (attempt 1) 1s: Reading package lists...\n") ||
		!strings.Contains(r.stderr, "Unable to locate package clihost-progress-probe") || strings.Contains(r.stderr, "\r") {
		t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestAuditTailFromDaemon: clihostctl audit -n and --bundle against a real clihostd read its
// audit log's last lines, in order, as JSON lines when piped.
func TestAuditTailFromDaemon(t *testing.T) {
	state := t.TempDir()
	lines := []string{
		`{"type":"cli.invoked","cli_id":"gh","tool_id":"pr-list","ok":true,"ts":"2026-11-26T07:00:00Z"}`,
		`{"type":"cli.invoked","cli_id":"jq","tool_id":"eval","ok":true,"ts":"2026-11-26T07:01:00Z"}`,
		`{"type":"cli.invoked","cli_id":"gh","tool_id":"pr-view","ok":false,"ts":"2026-11-26T07:02:00Z"}`,
	}
	d := startDaemon(t, state, "--no-catalog")
	f, err := os.OpenFile(filepath.Join(state, "audit.jsonl"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"audit", "-n", "2"}, lines[1:]},
		{[]string{"audit", "-n", "5", "--bundle", "gh"}, []string{lines[0], lines[2]}},
		{[]string{"audit", "--since", "2026-11-26T07:01:30Z"}, lines[2:]},
	} {
		r := d.ctl(t, tc.args...)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if json.Valid([]byte(l)) && !strings.Contains(l, `"cli_id":"`) {
				continue // the daemon's own lines (none expected)
			}
			got = append(got, l)
		}
		if r.code != 0 || strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%q: exit %d\n%s\nwant\n%s\n%s", tc.args, r.code, r.stdout, strings.Join(tc.want, "\n"), r.stderr)
		}
	}
}

// TestStopWithAuditFollower: an operator's clihostctl audit -f is not a call in flight: SIGTERM
// (systemctl stop) ends its stream at once and the daemon stops without waiting its drain
// timeout; it waited the whole --drain-timeout for a follower that would never end by itself.
func TestStopWithAuditFollower(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--no-catalog", "--drain-timeout", "20s")
	follow := exec.Command(bin.ctl, "--socket", d.socket, "audit", "-f")
	var out bytes.Buffer
	follow.Stdout, follow.Stderr = &out, &out
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer follow.Process.Kill()
	time.Sleep(500 * time.Millisecond) // the follower is connected and waiting for lines
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "clihostd stopped")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("clihostd took %v to stop with only an audit follower connected (drain timeout 20s)", took)
	}
	if err := follow.Wait(); err != nil {
		t.Errorf("the follower did not end cleanly: %v\n%s", err, out.String())
	}
}
