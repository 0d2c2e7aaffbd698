package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// doctorBin is clihostctl built beside the clihost-sandbox helper, as an install has them, in a
// folder of TestMain's (removed with it).
var doctorBin = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(filepath.Dir(bin.ctl), "doctor")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/clihostctl", "../cmd/clihost-sandbox")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{err, string(out)}
	}
	return filepath.Join(dir, "clihostctl"), nil
})

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// doctorCheck is one check of doctor --json.
type doctorCheck struct{ Name, Status, Message, Fix string }

// doctor runs clihostctl doctor against socket, with no systemd unit to check, and returns its
// exit code, its JSON checks and its text output.
func doctor(t *testing.T, socket string, extra ...string) (int, []doctorCheck, string) {
	t.Helper()
	ctl, err := doctorBin()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--socket", socket, "doctor", "--unit", filepath.Join(t.TempDir(), "clihostd.service")}, extra...)
	js := runBin(t, ctl, "", append(args, "--json")...)
	var r struct{ Checks []doctorCheck }
	if err := json.Unmarshal([]byte(js.stdout), &r); err != nil {
		t.Fatalf("doctor --json: exit %d %v\n%s%s", js.code, err, js.stdout, js.stderr)
	}
	text := runBin(t, ctl, "", args...)
	if text.code != js.code {
		t.Fatalf("doctor exits %d, doctor --json %d", text.code, js.code)
	}
	return js.code, r.Checks, text.stdout
}

// find returns the checks named name.
func find(checks []doctorCheck, name string) []doctorCheck {
	var out []doctorCheck
	for _, c := range checks {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// TestDoctorHealthyDaemon: a root daemon serving one installed bundle on this host passes every
// check, exits 0 even with --strict, and prints one "ok" line per check — except `proc hidepid`,
// which reflects this host's /proc: it warns (and --strict exits 1) exactly when another uid
// (nobody) can read a root process's command line here.
func TestDoctorHealthyDaemon(t *testing.T) {
	needRoot(t)
	fixture.Need(t, "setpriv")
	state := t.TempDir()
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, state, "--no-catalog", "--bundles", fixture.Write(t, fixture.True()))
	code, checks, text := doctor(t, d.socket, "--strict")
	for _, c := range checks {
		if c.Status != "ok" && c.Name != "proc hidepid" {
			t.Errorf("%s: %s %s (fix: %s)", c.Name, c.Status, c.Message, c.Fix)
		}
	}
	var cmdline bytes.Buffer
	nobody := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat", "/proc/1/cmdline")
	nobody.Stdout = &cmdline
	exposed := nobody.Run() == nil && cmdline.Len() > 0
	wantCode, wantEnd := 0, "\nhealthy\n"
	if exposed {
		wantCode, wantEnd = 1, "\nhealthy, with warnings\n"
	}
	if h := find(checks, "proc hidepid"); len(h) != 1 || (h[0].Status == "warn") != exposed || (exposed && !strings.Contains(h[0].Fix, "hidepid=invisible")) {
		t.Errorf("proc hidepid: %+v, but nobody reads /proc/1/cmdline: %v", h, exposed)
	}
	if code != wantCode || len(find(checks, "sandbox probe")) != 1 || len(find(checks, "bundle true@1")) != 1 || len(find(checks, "token file")) != 1 {
		t.Fatalf("exit %d, want %d\n%s", code, wantCode, text)
	}
	if !strings.Contains(text, "ok    sandbox probe: clihostd started a sandboxed process as uid 65534 (nobody), from a root daemon, in "+d.ws+"\n") ||
		!strings.HasSuffix(text, wantEnd) {
		t.Fatalf("text:\n%s", text)
	}
}

// TestDoctorZeroBundlesWarns: a daemon that serves nothing is a warning (exit 0), with --strict a
// failure (exit 1).
func TestDoctorZeroBundlesWarns(t *testing.T) {
	needRoot(t)
	empty := t.TempDir()
	d := startDaemon(t, t.TempDir(), "--no-catalog", "--bundles", empty)
	code, checks, text := doctor(t, d.socket)
	var warned bool
	for _, c := range find(checks, "bundles") {
		warned = warned || c.Status == "warn" && strings.HasPrefix(c.Message, "no bundles loaded (searched: "+empty+")")
	}
	if code != 0 || !warned || !strings.Contains(text, "warn  bundles: no bundles loaded") || !strings.HasSuffix(text, "healthy, with warnings\n") {
		t.Fatalf("exit %d %+v\n%s", code, checks, text)
	}
	if code, _, _ := doctor(t, d.socket, "--strict"); code != 1 {
		t.Fatalf("--strict with a warning: exit %d", code)
	}
}

// TestDoctorWithoutDaemon: no daemon still checks the host, and fails saying how to start it.
func TestDoctorWithoutDaemon(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "none.sock")
	code, checks, text := doctor(t, socket)
	dc := find(checks, "daemon")
	if code != 1 || len(dc) != 1 || dc[0].Status != "fail" || dc[0].Message != "clihostd is not running (no answer on "+socket+")" ||
		!strings.HasPrefix(dc[0].Fix, "start it: systemctl start clihostd") || len(find(checks, "landlock")) != 1 {
		t.Fatalf("exit %d %+v\n%s", code, checks, text)
	}
	if !strings.Contains(text, "FAIL  daemon: clihostd is not running") || !strings.Contains(text, "      fix: start it: systemctl start clihostd") {
		t.Fatalf("text:\n%s", text)
	}
}

// TestDoctorTokenReadableByOthers: a token file made 0644 under a running daemon fails doctor.
func TestDoctorTokenReadableByOthers(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--no-catalog", "--bundles", fixture.Write(t, fixture.True()))
	tok := filepath.Join(d.state, "token")
	if err := os.Chmod(tok, 0o644); err != nil {
		t.Fatal(err)
	}
	code, checks, text := doctor(t, d.socket)
	tc := find(checks, "token file")
	if code != 1 || len(tc) != 1 || tc[0].Status != "fail" || tc[0].Message != tok+" has mode 0644, want 0600: others may read what it holds" ||
		!strings.HasPrefix(tc[0].Fix, "chmod 600 "+tok) {
		t.Fatalf("exit %d %+v\n%s", code, tc, text)
	}
}
