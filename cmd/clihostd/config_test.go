package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/config"
)

var update = flag.Bool("update", false, "rewrite docs/operations.md's table of configuration keys")

// writeConfig writes a private configuration file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "clihostd.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigFile: every key reaches the engine's configuration; a flag overrides the file; a
// list given as flags replaces the file's.
func TestConfigFile(t *testing.T) {
	p := writeConfig(t, "http: 127.0.0.1:9999\negress-max-conns: 9\naudit-max-size: 1MiB\nbundles: [/x, /y]\nlimit-pids: 77\nsandbox: \"off\"\nlog-format: json\ndrain-timeout: 3s\n")
	o, code := parse([]string{"--config", p, "--egress-max-conns", "4", "--bundles", "/z"}, &bytes.Buffer{})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	c := o.cfg
	if c.HTTPAddr != "127.0.0.1:9999" || c.EgressMaxConns != 4 || c.AuditMaxSize != 1<<20 || strings.Join(c.Bundles, ",") != "/z" ||
		c.Limits.Pids != 77 || !c.SandboxOff || o.logFormat != "json" || c.DrainTimeout.Seconds() != 3 {
		t.Errorf("config %+v, log format %q", c, o.logFormat)
	}
}

// TestConfigRefused: an unknown key (with the nearest one), a bad value, a file others may write,
// a missing named file and a command-line-only flag as a key stop the daemon with exit code 2; a
// missing default file does not.
func TestConfigRefused(t *testing.T) {
	open := writeConfig(t, "http: 127.0.0.1:1\n")
	if err := os.Chmod(open, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{writeConfig(t, "htp: 127.0.0.1:1\n"), `unknown key "htp"; did you mean "http"?`},
		{writeConfig(t, "egress-max-conns: 0\n"), "--egress-max-conns 0"},
		{writeConfig(t, "egress-max-conns: lots\n"), `egress-max-conns "lots"`},
		{writeConfig(t, "check: true\n"), `unknown key "check"`},
		{writeConfig(t, "log-format: xml\n"), `--log-format "xml"`},
		{open, "writable by group or others"},
		{filepath.Join(t.TempDir(), "none.yaml"), "no such file"},
	} {
		var stderr bytes.Buffer
		if code := run([]string{"--config", c.path}, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d, %q; want 2 and %q", c.path, code, stderr.String(), c.want)
		}
	}
	if _, code := parse([]string{"--config", ""}, &bytes.Buffer{}); code != 0 {
		t.Errorf("--config \"\": exit %d", code)
	}
}

// TestPrintConfigReadsBack: --print-config prints a file that, read back, gives the same
// configuration.
func TestPrintConfigReadsBack(t *testing.T) {
	args := []string{"--config", "", "--http", "127.0.0.1:0", "--bundles", "/a b", "--audit-keep", "0", "--limit-memory", "none", "--group", "", "--sandbox-pool", "3"}
	o, code := parse(args, &bytes.Buffer{})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var out bytes.Buffer
	if err := config.Print(&out, o.keys); err != nil {
		t.Fatal(err)
	}
	p := writeConfig(t, out.String())
	back, code := parse([]string{"--config", p}, &bytes.Buffer{})
	if code != 0 {
		t.Fatalf("read back: exit %d\n%s", code, out.String())
	}
	back.cfg.Approvals, o.cfg.Approvals = "", ""
	if a, b := printed(t, back), printed(t, o); a != b {
		t.Errorf("read back differs:\n%s\nwant\n%s", a, b)
	}
	for _, only := range commandLineOnly {
		if strings.Contains(out.String(), "\n"+only+":") {
			t.Errorf("--print-config prints the command-line-only %s", only)
		}
	}
}

func printed(t *testing.T, o options) string {
	var b bytes.Buffer
	if err := config.Print(&b, o.keys); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestConfigKeysDocumented: docs/operations.md's table of the configuration file's keys is the
// flag set's (go test ./cmd/clihostd -run TestConfigKeysDocumented -update rewrites it).
func TestConfigKeysDocumented(t *testing.T) {
	o, code := parse([]string{"--config", ""}, &bytes.Buffer{})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for i := range o.keys.Keys { // defaults that depend on the machine or the user
		switch o.keys.Keys[i].Name {
		case "approvals":
			o.keys.Keys[i].Default = "/etc/clihost/approvals.yaml"
		case "sandbox-pool":
			o.keys.Keys[i].Default = "2 per CPU, at most 8"
		}
	}
	want := config.Markdown(o.keys)
	const doc, begin, end = "../../docs/operations.md", "<!-- clihostd keys: begin (TestConfigKeysDocumented) -->\n", "<!-- clihostd keys: end -->"
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q block", doc, begin, end)
	}
	if got := text[i+len(begin) : j]; got != want {
		if *update {
			if err := os.WriteFile(doc, []byte(text[:i+len(begin)]+want+text[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's table of keys is not the flag set's; rerun with -update:\n%s", doc, want)
	}
}

// TestConfigFileLogged: the daemon's log says which configuration file it read and which keys
// it took from it, so that an operator who finds the sandbox off (or a listener, an agent user)
// and no such flag in the unit knows where it came from.
func TestConfigFileLogged(t *testing.T) {
	p := writeConfig(t, "sandbox: \"off\"\nno-catalog: true\nhttp: 127.0.0.1:0\n")
	var stderr bytes.Buffer
	run([]string{"--config", p, "--check", "--log-format", "json", "--state", t.TempDir(), "--http", "127.0.0.1:1"}, &stderr)
	var line string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, p) {
			line = l
		}
	}
	if !strings.Contains(line, `"keys":"no-catalog,sandbox"`) {
		t.Fatalf("no log line names %s and the keys it set (not http, given as a flag):\n%s", p, stderr.String())
	}
}
