package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/buildinfo"
)

// TestFlagsRefused: the flags that must be positive, or one of a few words, are refused with exit
// code 2 before anything starts.
func TestFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--egress-max-conns", "0"}, {"--egress-max-conns", "-5"}, {"--egress-max-conns", "many"},
		{"--audit-max-size", "0"}, {"--audit-max-size", "lots"}, {"--audit-keep", "-1"},
		{"--drain-timeout", "-1s"}, {"--sandbox", "maybe"},
	} {
		var stderr bytes.Buffer
		if code := run(args, &stderr); code != 2 {
			t.Errorf("clihostd %s: exit %d, want 2 (%s)", strings.Join(args, " "), code, stderr.String())
		}
	}
}

// TestFlagsReachConfig: the flags the command turns into the engine's configuration arrive there.
func TestFlagsReachConfig(t *testing.T) {
	o, code := parse([]string{"--egress-max-conns", "7", "--audit-max-size", "64KiB", "--sandbox", "off",
		"--bundles", "/a", "--bundles", "/b", "--egress-admit", "10.0.0.0/8"}, &bytes.Buffer{})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	c := o.cfg
	if c.EgressMaxConns != 7 || c.AuditMaxSize != 64<<10 || !c.SandboxOff || strings.Join(c.Bundles, ",") != "/a,/b" ||
		strings.Join(c.EgressAdmit, ",") != "10.0.0.0/8" || c.Version != buildinfo.Read(version).Short() {
		t.Errorf("config %+v", c)
	}
}

// TestProfiles: --cpuprofile and --memprofile are off unless given; each profile goes to a new
// file only (an existing file, a link an attacker planted included, is never written through) and
// is complete when the returned function runs.
func TestProfiles(t *testing.T) {
	for _, p := range []struct {
		flag  string
		path  func(options) string
		start func(string) (func(), error)
	}{
		{"--cpuprofile", func(o options) string { return o.cpuProfile }, startCPUProfile},
		{"--memprofile", func(o options) string { return o.memProfile }, startMemProfile},
	} {
		if o, _ := parse(nil, &bytes.Buffer{}); p.path(o) != "" {
			t.Fatalf("%s on by default: %q", p.flag, p.path(o))
		}
		path := filepath.Join(t.TempDir(), "profile.pprof")
		if o, code := parse([]string{p.flag, path}, &bytes.Buffer{}); code != 0 || p.path(o) != path {
			t.Fatalf("%s: exit %d, path %q", p.flag, code, p.path(o))
		}
		finish, err := p.start(path)
		if err != nil {
			t.Fatal(err)
		}
		finish()
		if fi, err := os.Stat(path); err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: profile: %v %v", p.flag, fi, err)
		}
		if _, err := p.start(path); err == nil {
			t.Fatalf("%s: an existing file was overwritten", p.flag)
		}
	}
}

// TestUnknownGroupRefusedAtOnce: --group naming a group this host lacks (the unit's clihost, on a
// host installed by hand) is a usage error before the sandbox probe and the bundles, and says how
// to create the group; it was exit 1 after start-up with only "unknown group".
func TestUnknownGroupRefusedAtOnce(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--config", "", "--group", "no-such-group-atk10"}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "groupadd --system no-such-group-atk10") {
		t.Errorf("exit %d, %s; want 2 and how to create the group", code, stderr.String())
	}
}

// TestJSONLogFailureIsOnlyJSON: with --log-format json every line clihostd writes to stderr once
// the logger exists is a JSON object (a journal or log shipper parses each), so a failed start is
// logged once, not followed by the plain "clihostd: …" line text mode ends with.
func TestJSONLogFailureIsOnlyJSON(t *testing.T) {
	var stderr bytes.Buffer
	state := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(state, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", "", "--log-format", "json", "--http", "127.0.0.1:0", "--state", filepath.Join(state, "x"), "--socket", filepath.Join(t.TempDir(), "s.sock")}
	if code := run(args, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("not JSON: %q", line)
		}
	}
	if !strings.Contains(stderr.String(), `"msg":"clihostd could not start"`) {
		t.Errorf("the failure is not logged: %s", stderr.String())
	}
}

// TestHelpExitsZero: clihostd -h and --help print the flags and exit 0 (on stdout, so they page
// and grep), as every other command an operator uses does; they exited 2 like a mistake.
func TestHelpExitsZero(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		var stderr bytes.Buffer
		if code := run([]string{arg}, &stderr); code != 0 || stderr.Len() != 0 {
			t.Errorf("clihostd %s: exit %d, stderr %q; want 0 and the help on stdout", arg, code, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"--bogus"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "flag provided but not defined: -bogus") {
		t.Errorf("clihostd --bogus: exit %d, %q", code, stderr.String())
	}
}
