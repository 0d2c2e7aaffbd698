package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// docsFile is the operator's guide whose systemd section TestSystemdUnit follows.
const docsFile = "../../docs/operations.md"

// nspawn is a container booted with systemd as its PID 1 (systemd-nspawn --boot).
type nspawn struct {
	name   string
	cmd    *exec.Cmd
	out    *fixture.Buffer // nspawn's console output (written by exec's copying goroutines)
	leader int             // the container's PID 1, as the host sees it
	exited chan struct{}
}

// bootContainer boots this host's own systemd in a volatile container: / is a fresh tmpfs (a new
// /etc, /var, /srv), /usr is the host's, read-only. The binaries built for this run are bound
// over /usr/local/bin, where the unit's ExecStart expects them, and the repository's deploy folder
// at /mnt/clihost-deploy. The container has a network namespace of its own (loopback only), so the
// unit's default MCP port cannot collide with anything on the host. It is torn down when t ends.
func bootContainer(t *testing.T, extra ...string) *nspawn {
	t.Helper()
	// systemd-nspawn's container now and then dies during boot on this kind of host (once in
	// about ten CI runs, an empty console): one more boot, never more.
	for attempt := 1; ; attempt++ {
		m := bootOnce(t, extra)
		if m.waitBooted(t) {
			return m
		}
		if attempt == 2 {
			t.Fatalf("the container exited before systemd finished booting, twice:\n%s", m.out)
		}
		t.Logf("the container exited before systemd finished booting; booting again:\n%s", m.out)
	}
}

// bootOnce starts one container, with nspawn's extra options, and waits for its leader.
func bootOnce(t *testing.T, extra []string) *nspawn {
	t.Helper()
	deployDir, err := filepath.Abs("../../deploy")
	if err != nil {
		t.Fatal(err)
	}
	m := &nspawn{name: "clihost-ut-" + strconv.Itoa(os.Getpid()), out: &fixture.Buffer{}, exited: make(chan struct{})}
	args := append([]string{"--directory=/", "--volatile=yes", "--machine=" + m.name,
		"--register=no", "--keep-unit", "--private-network", "--console=pipe",
		"--bind-ro=" + bin.dir + ":/usr/local/bin", "--bind-ro=" + deployDir + ":/mnt/clihost-deploy"}, extra...)
	m.cmd = exec.Command("systemd-nspawn", append(args,
		// The volatile /etc has neither Debian's alternatives, which libraries in /usr resolve
		// through (ffmpeg's libblas.so.3), nor useradd's defaults: the host's, as a real host has them.
		"--bind-ro=/etc/alternatives", "--bind-ro=/etc/login.defs",
		// systemd-nspawn's own syscall allow-list (systemd 252) predates Landlock and answers it
		// with EPERM; a host booted by systemd has no such list. Only the container needs this.
		"--system-call-filter=landlock_create_ruleset landlock_add_rule landlock_restrict_self",
		// Nothing to wait for on a loopback-only network: systemd-networkd-wait-online (which the
		// unit's Wants=network-online.target pulls in) would time out after 2 minutes.
		"--boot", "systemd.firstboot=off", "systemd.mask=systemd-firstboot.service",
		"systemd.mask=systemd-networkd-wait-online.service")...)
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	// Its own process group, for teardown; and if this test process dies before teardown, nspawn
	// gets SIGTERM, which halts the container (the runtime keeps the starting thread alive).
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	haltStale(t)
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("systemd-nspawn: %v", err)
	}
	go func() { _ = m.cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() { m.teardown(t) })
	m.leader = m.waitLeader(t)
	return m
}

// haltStale halts containers an earlier run of this test left behind (its process was killed
// before its teardown): nspawn processes whose machine name, clihost-ut-PID, names a test process
// that no longer runs.
func haltStale(t *testing.T) {
	t.Helper()
	out, _ := exec.Command("pgrep", "-f", "^systemd-nspawn .*--machine=clihost-ut-").Output()
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + f + "/cmdline")
		if err != nil {
			continue
		}
		_, rest, _ := strings.Cut(string(cmdline), "--machine=clihost-ut-")
		name, _, _ := strings.Cut(rest, "\x00")
		owner, err := strconv.Atoi(name)
		if err == nil && syscall.Kill(owner, 0) == syscall.ESRCH {
			t.Logf("halting container clihost-ut-%d (nspawn pid %d) left by a killed run", owner, pid)
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

// waitLeader waits (at most 30s) for the container's PID 1: nspawn's child once it has exec'd
// systemd. Before that, nspawn's one child can be its outer child, which exits once it has started
// the container's init (a leader taken then was gone when the boot was waited for: once in a few CI
// runs, "nsenter: stat of /proc/N/ns/user failed").
func (m *nspawn) waitLeader(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-m.exited:
			t.Fatalf("systemd-nspawn exited before the container started:\n%s", m.out)
		default:
		}
		out, _ := exec.Command("pgrep", "-x", "-P", strconv.Itoa(m.cmd.Process.Pid), "systemd").Output()
		if f := strings.Fields(string(out)); len(f) == 1 {
			if pid, err := strconv.Atoi(f[0]); err == nil {
				return pid
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("systemd-nspawn started no container in 30s:\n%s", m.out)
	return 0
}

// waitBooted waits (at most 90s) until the container's systemd has finished booting; false when the
// container exited first.
func (m *nspawn) waitBooted(t *testing.T) bool {
	t.Helper()
	var last result
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-m.exited:
			return false
		default:
		}
		if syscall.Kill(m.leader, 0) == syscall.ESRCH {
			// nspawn runs on, but the process taken for the container's PID 1 is gone (seen once
			// in CI: every nsenter then failed for 90s): take its PID 1 again.
			t.Logf("the container's leader %d is gone; looking for it again", m.leader)
			m.leader = m.waitLeader(t)
		}
		last = m.run(t, "", "systemctl", "is-system-running")
		switch strings.TrimSpace(last.stdout) {
		case "running":
			return true
		case "degraded":
			t.Logf("the container booted degraded; failed units:\n%s", m.run(t, "", "systemctl", "--failed", "--no-legend").stdout)
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the container's systemd did not finish booting in 90s: %v\nconsole:\n%s", last, m.out)
	return false
}

// run runs argv inside the container as root (nsenter into all of the leader's namespaces), with
// stdin, and returns how it ended.
func (m *nspawn) run(t *testing.T, stdin string, argv ...string) result {
	t.Helper()
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(m.leader), "-a", "--"}, argv...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	cmd.Stdin = strings.NewReader(stdin)
	o, err := fixture.Run(cmd)
	if err != nil {
		t.Fatalf("nsenter %s: %v", strings.Join(argv, " "), err)
	}
	return result{o.Code, o.Stdout, o.Stderr}
}

// must is run, failing t unless argv exits 0.
func (m *nspawn) must(t *testing.T, stdin string, argv ...string) result {
	t.Helper()
	r := m.run(t, stdin, argv...)
	if r.code != 0 {
		t.Fatalf("in the container: %s: %v", strings.Join(argv, " "), r)
	}
	return r
}

// as runs argv inside the container as the named user, with the user's primary and supplementary
// groups and a login's environment (asUser's setpriv; the volatile /etc has no PAM configuration,
// which runuser and su need).
func (m *nspawn) as(t *testing.T, user, stdin string, argv ...string) result {
	t.Helper()
	return m.run(t, stdin, append([]string{"sh", "-c", asUserScript, user}, argv...)...)
}

// asUserScript runs "$@" as the user $0 (setpriv takes a group's number only).
const asUserScript = `exec setpriv --reuid="$0" --regid="$(id -g "$0")" --init-groups --reset-env -- "$@"`

// journal is the unit's journal.
func (m *nspawn) journal(t *testing.T) string {
	t.Helper()
	return m.run(t, "", "journalctl", "-u", "clihostd", "--no-pager", "-o", "cat").stdout
}

// waitJournal polls the unit's journal (at most 60s) until it holds want.
func (m *nspawn) waitJournal(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(m.journal(t), want) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("the unit's journal never said %q:\n%s", want, m.journal(t))
}

// waitStatus polls `clihostctl status --json` as user (at most 60s) until it lists the bundle key.
func (m *nspawn) waitStatus(t *testing.T, user, key string) {
	t.Helper()
	var last []string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st, err := parseStatus(m.as(t, user, "", "clihostctl", "status", "--json").stdout)
		if last = keys(st.bundles); err == nil && slices.Contains(last, key) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("clihostctl status as %s never listed %s (last: %v):\n%s", user, key, last, m.journal(t))
}

// waitState polls `systemctl is-active clihostd` (at most 60s) until it leaves the transitional
// states, and returns what it settled on.
func (m *nspawn) waitState(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	state := ""
	for time.Now().Before(deadline) {
		state = strings.TrimSpace(m.run(t, "", "systemctl", "is-active", "clihostd").stdout)
		if state != "activating" && state != "reloading" && state != "deactivating" {
			return state
		}
		time.Sleep(200 * time.Millisecond)
	}
	return state
}

// teardown halts the container (nspawn's SIGTERM is a clean poweroff), waits for nspawn to exit
// (at most 30s), then kills the container's PID 1 (which ends its PID namespace) and nspawn's
// process group, and fails t if any of them survives.
func (m *nspawn) teardown(t *testing.T) {
	start := time.Now()
	defer func() { t.Logf("the container was torn down in %v", time.Since(start).Round(time.Millisecond)) }()
	pgid := m.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("systemd-nspawn did not stop in 30s after SIGTERM; killing it")
		if m.leader > 0 {
			_ = syscall.Kill(m.leader, syscall.SIGKILL)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-m.exited
	}
	var left string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := exec.Command("pgrep", "-f", "machine="+m.name).Output()
		left = strings.TrimSpace(string(out))
		if left == "" && (m.leader == 0 || syscall.Kill(m.leader, 0) != nil) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("the container %s left processes behind: pgrep: %q, leader %d", m.name, left, m.leader)
}

// docsCommands are the shell commands of docs/operations.md's systemd section (its first sh block),
// without comments.
func docsCommands(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	inSection, inBlock := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			if inSection && len(cmds) > 0 {
				return cmds
			}
			inSection = line == "## systemd"
		case inSection && !inBlock && line == "```sh":
			inBlock = true
		case inSection && inBlock && line == "```":
			return cmds
		case inSection && inBlock:
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" {
				cmds = append(cmds, line)
			}
		}
	}
	t.Fatalf("%s: no sh block in the systemd section", docsFile)
	return nil
}

// containerCommand is a line of the docs' systemd block as the test runs it in the container
// (false: not run): the build is the test's own (TestMain built the binaries, which are bound over
// /usr/local/bin), deploy/ is /mnt/clihost-deploy, and sudo, which a volatile /etc has no
// sudoers for, is root's own nsenter, or asUserScript for sudo -u.
func containerCommand(line string) (string, bool) {
	if strings.Contains(line, "go build") || strings.Contains(line, " build/clihostd") {
		return "", false
	}
	line = strings.ReplaceAll(line, " deploy/clihostd.service", " /mnt/clihost-deploy/clihostd.service")
	if rest, ok := strings.CutPrefix(line, "sudo -u "); ok {
		user, cmd, _ := strings.Cut(rest, " ")
		return "sh -c '" + asUserScript + "' " + user + " " + cmd, true
	}
	return strings.ReplaceAll(line, "sudo ", ""), true
}

// TestSystemdUnit deploys deploy/clihostd.service under real systemd, as docs/operations.md's
// systemd section says, in a container booted with systemd-nspawn: the unit's own sandboxing
// (ProtectSystem=strict, ProtectHome=, PrivateTmp=, PrivateDevices=, ReadWritePaths=,
// RestrictAddressFamilies=, SystemCallArchitectures=, the other seccomp-based Protect*= and
// Restrict*= settings), Delegate=, Type=notify and the watchdog are systemd's own here. A member of
// group clihost calls jq through the control socket in the unit's workspace; status shows the
// sandbox probe working and the catalog served; doctor is healthy; an MCP client calls jq over
// HTTP with the token; systemctl reload loads an operator's bundle; the watchdog is fed; and
// systemctl stop ends it cleanly.
func TestSystemdUnit(t *testing.T) {
	need(t)
	fixture.Need(t, "systemd-nspawn", "nsenter", "pgrep", "curl", "jq")
	m := bootContainer(t)
	const ws = "/srv/clihost/workspace"

	// The docs' commands, in order; alice is created first so that usermod -aG can add her.
	m.must(t, "", "useradd", "--create-home", "--shell", "/bin/sh", "alice")
	var status, doctor, token result
	for _, line := range docsCommands(t) {
		c, ok := containerCommand(line)
		if !ok {
			continue
		}
		start := time.Now()
		r := m.run(t, "", "sh", "-c", c)
		t.Logf("$ %s\n%s%s(exit %d, %v)", c, r.stdout, r.stderr, r.code, time.Since(start).Round(time.Millisecond))
		switch {
		case strings.Contains(c, "clihostctl status"):
			status = r
		case strings.Contains(c, "clihostctl doctor"):
			doctor = r
		case strings.Contains(c, "clihostctl token"):
			token = r
		case r.code != 0:
			t.Fatalf("docs/operations.md's systemd step %q failed in the container: %v\njournal:\n%s", line, r, m.journal(t))
		}
	}
	if state := m.waitState(t); state != "active" {
		t.Fatalf("clihostd.service is %q after systemctl enable --now, want active (Type=notify: READY=1 sent)\n%s\njournal:\n%s",
			state, m.run(t, "", "systemctl", "status", "--no-pager", "clihostd").stdout, m.journal(t))
	}
	m.waitJournal(t, "clihostd ready")
	if j := m.journal(t); !strings.Contains(j, "kernel sandbox works") {
		t.Errorf("the unit's start log does not say the kernel sandbox works:\n%s", j)
	}
	if status.code != 0 {
		t.Errorf("sudo -u clihost clihostctl status: %v", status)
	}

	t.Run("member calls jq through the socket", func(t *testing.T) {
		if r := m.as(t, "alice", sampleJSON, "sh", "-c", "umask 007 && cat > "+ws+"/data.json"); r.code != 0 {
			t.Fatalf("alice (group clihost) writes data.json in %s: %v", ws, r)
		}
		r := m.as(t, "alice", "", "clihostctl", "status", "--json")
		st, err := parseStatus(r.stdout)
		if err != nil || r.code != 0 {
			t.Fatalf("clihostctl status --json as alice (group clihost): %v: %v", err, r)
		}
		if working, text := sandboxReported(st); !working {
			t.Errorf("status as alice: the sandbox probe says %q; under the shipped unit it must work", text)
		}
		if len(st.bundles) < builtinCatalog || !slices.Contains(keys(st.bundles), "jq@1") {
			t.Errorf("status as alice: bundles %v; want the built-in catalog (%d, jq@1 among them)", keys(st.bundles), builtinCatalog)
		}
		r = m.as(t, "alice", "", "clihostctl", "call", "jq", "filter", "--input", jqInput, "--workspace", ws)
		var e envelope
		if err := jsonUnmarshal(r.stdout, &e); err != nil || !e.OK {
			t.Fatalf("jq through /run/clihost/clihostd.sock as alice in %s: %v\njournal:\n%s", ws, r, m.journal(t))
		}
		checkJQ(t, "the systemd unit", e)
	})

	t.Run("doctor", func(t *testing.T) {
		if doctor.code != 0 || strings.Contains(doctor.stdout, "FAIL") {
			t.Errorf("sudo clihostctl doctor under the unit is not healthy: %v", doctor)
		}
		for _, want := range []string{"ok    sandbox probe", "ok    systemd unit: clihostd.service is active"} {
			if !strings.Contains(doctor.stdout, want) {
				t.Errorf("clihostctl doctor does not say %q:\n%s", want, doctor.stdout)
			}
		}
	})

	t.Run("MCP over HTTP with the token", func(t *testing.T) {
		tok := strings.TrimSpace(token.stdout)
		if token.code != 0 || tok == "" {
			t.Fatalf("sudo clihostctl token: %v", token)
		}
		req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"filter","arguments":` + jqInput + `}}`
		r := m.run(t, req, "curl", "-sS", "--fail-with-body", "-H", "Authorization: Bearer "+tok,
			"-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream",
			"--data-binary", "@-", "http://127.0.0.1:8931/mcp/jq")
		if r.code != 0 || !strings.Contains(r.stdout, jqWant) || strings.Contains(r.stdout, `"isError":true`) {
			t.Errorf("MCP tools/call jq filter over HTTP: %v", r)
		}
		r = m.run(t, req, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Content-Type: application/json",
			"-H", "Accept: application/json, text/event-stream", "--data-binary", "@-", "http://127.0.0.1:8931/mcp/jq")
		if strings.TrimSpace(r.stdout) != "401" {
			t.Errorf("MCP over HTTP without the token answered %q, want 401", r.stdout)
		}
		// The unit's daemon is not root: its zygote runs in a user namespace of its own and must
		// have built the sandboxes of these calls (the fast path is the default deployment's).
		r = m.run(t, "", "curl", "-sS", "--fail-with-body", "-H", "Authorization: Bearer "+tok, "http://127.0.0.1:8931/metrics")
		if r.code != 0 || !zygoteServed(r.stdout) {
			t.Errorf("the unit's zygote built no sandbox, or is not up: %v\njournal:\n%s", r, m.journal(t))
		}
		// TimerSlackNSec=250us reaches the daemon, which may not set it itself as clihost.
		pid := strings.TrimSpace(m.must(t, "", "systemctl", "show", "-p", "MainPID", "--value", "clihostd").stdout)
		if got := strings.TrimSpace(m.must(t, "", "cat", "/proc/"+pid+"/timerslack_ns").stdout); got != "250000" {
			t.Errorf("the unit's clihostd runs with a timer slack of %s ns, want 250000 (TimerSlackNSec=250us)", got)
		}
	})

	// The operator puts a bundle in /etc/clihost/bundles and reloads: mark writes a file in the
	// workspace, which ProtectSystem=strict leaves writable only through ReadWritePaths=.
	t.Run("reload loads the operator's bundle", func(t *testing.T) {
		for p, c := range markBundle() {
			m.must(t, c, "sh", "-c", `mkdir -p "$(dirname "$0")" && cat > "$0"`, "/etc/clihost/bundles/"+p)
		}
		m.must(t, "", "systemctl", "reload", "clihostd")
		m.waitJournal(t, "reloading bundles (SIGHUP)")
		if state := m.waitState(t); state != "active" {
			t.Errorf("clihostd.service is %q after systemctl reload, want active", state)
		}
		m.waitStatus(t, "alice", "mark@1")
		r := m.as(t, "alice", "", "clihostctl", "call", "mark", "file", "--input", `{"name": "shared-mark"}`, "--workspace", ws)
		var e envelope
		if err := jsonUnmarshal(r.stdout, &e); err != nil || !e.OK {
			t.Fatalf("the operator's bundle mark after the reload, as alice in %s: %v", ws, r)
		}
		// The daemon's user made it, group-shared in the 2770 workspace whatever UMask=0077.
		if got := strings.TrimSpace(m.must(t, "", "stat", "-c", "%U:%G %a", ws+"/shared-mark").stdout); got != "clihost:clihost 660" {
			t.Errorf("the file mark wrote in %s is %q, want clihost:clihost 660", ws, got)
		}
	})

	// WatchdogSec=30s: the daemon pings at half of it; systemd records each ping's time.
	t.Run("watchdog", func(t *testing.T) {
		show := func(p string) string {
			return strings.TrimSpace(m.run(t, "", "systemctl", "show", "-p", p, "--value", "clihostd").stdout)
		}
		if got := show("WatchdogUSec"); got != "30s" {
			t.Fatalf("clihostd.service's WatchdogUSec is %q, want 30s (WatchdogSec=30s)", got)
		}
		first := show("WatchdogTimestampMonotonic")
		deadline := time.Now().Add(40 * time.Second)
		for time.Now().Before(deadline) {
			if show("WatchdogTimestampMonotonic") != first {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Errorf("systemd recorded no WATCHDOG=1 from clihostd in 40s (WatchdogSec=30s; the daemon pings every 15s)")
	})

	t.Run("stop", func(t *testing.T) {
		if n := strings.TrimSpace(m.run(t, "", "systemctl", "show", "-p", "NRestarts", "--value", "clihostd").stdout); n != "0" {
			t.Errorf("clihostd.service restarted %s times (watchdog or a crash):\n%s", n, m.journal(t))
		}
		m.must(t, "", "systemctl", "stop", "clihostd")
		if state := m.waitState(t); state != "inactive" {
			t.Errorf("clihostd.service is %q after systemctl stop, want inactive (a clean exit)", state)
		}
		m.waitJournal(t, `level=INFO msg="clihostd stopped"`)
		if res := strings.TrimSpace(m.run(t, "", "systemctl", "show", "-p", "Result", "--value", "clihostd").stdout); res != "success" {
			t.Errorf("clihostd.service's Result after stop is %q, want success", res)
		}
	})
	if t.Failed() {
		t.Logf("journal of clihostd.service:\n%s", m.journal(t))
	}
}

// jsonUnmarshal decodes a call's envelope from clihostctl's stdout.
func jsonUnmarshal(s string, e *envelope) error {
	if err := json.Unmarshal([]byte(s), e); err != nil {
		return fmt.Errorf("not an envelope: %w", err)
	}
	return nil
}
