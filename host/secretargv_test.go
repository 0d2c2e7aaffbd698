package host

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/setup"
)

// TestSecretInArgvIsReadByOtherUsers is the attack of issue 12 §7: a bundle puts ${secrets.tok} in
// argv, a call runs sleep with it, and a process of another uid (nobody, through setpriv) reads
// the secret from /proc/PID/cmdline while the call runs (this host's /proc has no hidepid). Lint
// flags the template (secret-in-argv, a warning: the bundle still loads); before, it said nothing.
func TestSecretInArgvIsReadByOtherUsers(t *testing.T) {
	fixture.Need(t, "setpriv")
	const secret = "3600.424242"
	files := fixture.Sleep(600000)
	files["sleep/CLI.md"] = strings.Replace(files["sleep/CLI.md"], "commands:\n",
		"setup:\n  - { id: tok, kind: prompt, type: secret, prompt: \"Token\", persist: { secret_slug: tok } }\ncommands:\n", 1)
	files["sleep/tools/nap/TOOL.md"] = strings.Replace(files["sleep/tools/nap/TOOL.md"], `argv: ["${input.s}"]`, `argv: ["${secrets.tok}"]`, 1)
	files["sleep/tools/nap/TOOL.md"] = strings.Replace(files["sleep/tools/nap/TOOL.md"], "required: [s]", "required: []", 1)
	engine := setupEngine(t)
	reg := fixture.Load(t, fixture.Write(t, files)) // not writeBundle: the bundle has a warning
	h := New(reg, Options{Setup: engine})
	b := bundle(t, h, "sleep")

	var flagged bool
	for _, f := range b.Findings {
		flagged = flagged || f.Rule == "secret-in-argv" && strings.Contains(f.Message, "${secrets.tok}") && strings.Contains(f.Hint, "runner.stdin")
	}
	if !flagged {
		t.Errorf("lint does not flag ${secrets.tok} in argv: %v", b.Findings)
	}

	ws := fixture.Workspace(t)
	scope := lifecycle.Scope{Bundle: b.Key(), Workspace: ws, User: "alice"}
	bin, _ := h.resolve(b)
	lenv := lifecycle.Env{BinPath: bin, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"}}
	if _, err := engine.Run(context.Background(), b, scope, lenv, nil, setup.RunOptions{Values: map[string]string{"tok": secret}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Envelope, 1)
	go func() {
		done <- h.Call(ctx, b, "nap", map[string]any{}, Caller{Workspace: ws, User: "alice"}, CallOptions{})
	}()
	defer func() { cancel(); <-done }()

	pid := ""
	for deadline := time.Now().Add(10 * time.Second); pid == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pid = findCmdline("sleep\x00" + secret)
	}
	if pid == "" {
		t.Fatal("the call's sleep never appeared in /proc")
	}
	var out bytes.Buffer
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat", "/proc/"+pid+"/cmdline")
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("nobody cannot read /proc/%s/cmdline (hidepid?): %v", pid, err)
	}
	if !strings.Contains(out.String(), secret) {
		t.Fatalf("nobody read %q, not the secret", out.String())
	}
}

// findCmdline is the pid of a process whose command line starts with prefix, or "".
func findCmdline(prefix string) string {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.HasPrefix(string(data), prefix) {
			return e.Name()
		}
	}
	return ""
}
