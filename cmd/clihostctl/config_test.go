package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ctlConfig writes a private clihostctl configuration file and names it in $CLIHOSTCTL_CONFIG.
func ctlConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "clihostctl.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(configEnv, p)
	return p
}

// TestCtlConfigFile: a global key (bundles) and a command's key (serve-mcp: listen) reach the
// command; a flag overrides the file; another command's section is checked, not applied.
func TestCtlConfigFile(t *testing.T) {
	t.Setenv("CLIHOST_BUNDLES", "")
	tree, err := filepath.Abs("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	ctlConfig(t, "bundles: ["+tree+"]\nserve-mcp:\n  listen: 0.0.0.0:0\ntoken:\n  create:\n    json: true\n")
	// mini (a bundle with lint errors) is found only in the tree the file names.
	if code, _, errOut := runCtl(t, "tools", "mini"); !strings.Contains(errOut, filepath.Join(tree, ".cli", "mini")) {
		t.Errorf("tools mini with bundles from the file: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCtl(t, "serve-mcp"); code != 2 || !strings.Contains(errOut, "--listen 0.0.0.0:0 is not a loopback address") {
		t.Errorf("serve-mcp with listen from the file: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCtl(t, "serve-mcp", "--listen", "192.0.2.1:0"); code != 2 || !strings.Contains(errOut, "--listen 192.0.2.1:0") {
		t.Errorf("the flag does not override the file: exit %d, %s", code, errOut)
	}
}

// TestCtlConfigRefused: an unknown key (global, or in a command's section, even another
// command's) stops clihostctl with exit code 2 and the nearest key; so does a file others may
// write; a missing default file is none.
func TestCtlConfigRefused(t *testing.T) {
	for text, want := range map[string]string{
		"bundels: [x]\n":                     `unknown key "bundels"; did you mean "bundles"?`,
		"serve-mcp:\n  lisen: x\n":           `3:3` + "",
		"serve-mpc:\n  listen: x\n":          `did you mean "serve-mcp"?`,
		"token:\n  create:\n    jsn: true\n": `did you mean "json"?`,
		"socket: [a, b]\n":                   "socket: takes one value, not a list",
	} {
		ctlConfig(t, text)
		if text == "serve-mcp:\n  lisen: x\n" {
			want = `clihostctl.yaml:2:3: unknown key "lisen"; did you mean "listen"?`
		}
		code, _, errOut := runCtl(t, "tools", "mini")
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("%q: exit %d, %s; want 2 and %q", text, code, errOut, want)
		}
	}
	p := ctlConfig(t, "bundles: [x]\n")
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCtl(t, "tools", "mini"); code != 2 || !strings.Contains(errOut, "writable by group or others") {
		t.Errorf("a world-writable file: exit %d, %s", code, errOut)
	}
	t.Setenv(configEnv, filepath.Join(t.TempDir(), "none.yaml"))
	if code, _, errOut := runCtl(t, "tools", "mini"); code != 2 || !strings.Contains(errOut, "no such file") {
		t.Errorf("a missing named file: exit %d, %s", code, errOut)
	}
	os.Unsetenv(configEnv)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CLIHOST_BUNDLES", "")
	if code, _, errOut := runCtl(t, "tools", "jq"); code != 0 {
		t.Errorf("no file at the default path: exit %d, %s", code, errOut)
	}
}

// TestCtlConfigErrorPointsAtTheFile: a refused configuration file is not a mistake in the
// command line, so the message does not send the user to the command's --help (which says
// nothing of the file) nor say it configures the daemon: it names how to read no file instead.
func TestCtlConfigErrorPointsAtTheFile(t *testing.T) {
	p := ctlConfig(t, "sockt: /x\n")
	code, _, errOut := runCtl(t, "version")
	if code != 2 || strings.Contains(errOut, "--help") || !strings.Contains(errOut, p) || !strings.Contains(errOut, configEnv+`=""`) {
		t.Errorf("unknown key: exit %d, %q; want 2, the file and how to read none, no --help", code, errOut)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCtl(t, "status")
	if code != 2 || strings.Contains(errOut, "--help") || strings.Contains(errOut, "daemon") {
		t.Errorf("world-writable file: exit %d, %q; want 2, no --help, not 'configures the daemon'", code, errOut)
	}
}
