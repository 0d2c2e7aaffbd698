package setup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/store"
)

// fakecli is the fixture CLI. Every run appends its argv, one [word] per argument, as a line to
// $FAKE_DIR/log; the first argument picks what it does.
const fakecli = `#!/bin/sh
for a in "$@"; do printf '[%s]' "$a" >> "$FAKE_DIR/log"; done
echo >> "$FAKE_DIR/log"
case "$1" in
exit) exit "$2" ;;
flag) test -f "$FAKE_DIR/$2" ;;
touch) : > "$FAKE_DIR/$2" ;;
options) printf 'eu\tEurope\nus\tUnited States\n\nap\n' ;;
print) printf '%s\n' "$2" ;;
fail) printf 'boom: %s\n' "$2" >&2; exit 3 ;;
fail-env) printf 'boom: %s\n' "$(printenv "$2")" >&2; exit 3 ;;
env) printf '%s=%s\n' "$2" "$(printenv "$2")" >> "$FAKE_DIR/log" ;;
tty) if test -t 0; then echo tty; else echo notty; fi ;;
sleep) sleep "$2" ;;
esac
`

type fixture struct {
	t    *testing.T
	dir  string
	st   *store.Store
	e    *Engine
	env  lifecycle.Env
	b    *manifest.Bundle
	s    lifecycle.Scope
	ctx  context.Context
	keyf string
}

func newFixture(t *testing.T, steps ...manifest.SetupStep) *fixture {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakecli")
	if err := os.WriteFile(bin, []byte(fakecli), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, ctx: context.Background(), keyf: filepath.Join(dir, "secrets.key")}
	f.open()
	f.env = lifecycle.Env{BinPath: bin, Dir: dir, Env: []string{"PATH=/usr/bin:/bin", "FAKE_DIR=" + dir}}
	f.b = &manifest.Bundle{CLI: &manifest.CLI{ID: "fake", Version: "1.4.0", Bin: "fakecli", Setup: steps}}
	f.s = lifecycle.Scope{Bundle: "fake@1", Workspace: "/work/ws", User: "alice"}
	return f
}

// open opens the store in the fixture's state directory.
func (f *fixture) open() {
	f.t.Helper()
	st, err := store.Open(filepath.Join(f.dir, "state"), store.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	x, err := store.OpenSecrets(st, f.keyf)
	if err != nil {
		f.t.Fatal(err)
	}
	f.st = st
	f.e = &Engine{Store: st, Secrets: x}
	f.t.Cleanup(func() { _ = st.Close() })
}

func (f *fixture) run(ans Answerer, o RunOptions) ([]StepStatus, error) {
	return f.e.Run(f.ctx, f.b, f.s, f.env, ans, o)
}

// log returns the fixture CLI's invocations, one per line.
func (f *fixture) log() []string {
	raw, err := os.ReadFile(filepath.Join(f.dir, "log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

func stepErr(t *testing.T, err error, code errcode.Code, id string) *StepError {
	t.Helper()
	se, ok := err.(*StepError)
	if !ok || se.Code != code || se.StepID != id {
		t.Fatalf("error = %v, want %s for step %q", err, code, id)
	}
	return se
}

func done(status []StepStatus) []string {
	var out []string
	for _, s := range status {
		if s.Done {
			out = append(out, s.ID)
		}
	}
	return out
}

// answerer is a scripted Answerer.
type answerer struct {
	mu      sync.Mutex
	answers map[string]string
	asked   map[string][]Choice
	visit   func(ctx context.Context, step manifest.SetupStep, u string) error
}

func (a *answerer) Ask(_ context.Context, step manifest.SetupStep, choices []Choice) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.asked == nil {
		a.asked = map[string][]Choice{}
	}
	a.asked[step.ID] = choices
	v, ok := a.answers[step.ID]
	if !ok {
		return "", errors.New("the person closed the prompt")
	}
	return v, nil
}

func (a *answerer) Visit(ctx context.Context, step manifest.SetupStep, u string) error {
	return a.visit(ctx, step, u)
}

var client = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}

// get requests u and returns the status code (0 after reporting an error). It may run on any
// goroutine: Visit runs on one of the engine's.
func get(t *testing.T, u string, header ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Error(err)
		return 0
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestCmdStepsLedgerForceOnly(t *testing.T) {
	f := newFixture(t,
		manifest.SetupStep{ID: "one", Kind: manifest.StepCmd, Cmd: "fakecli print one", Description: "first"},
		manifest.SetupStep{ID: "two", Kind: manifest.StepCmd, Cmd: "fakecli print 'two words'"},
	)
	pending, err := f.e.Pending(f.b, f.s)
	if err != nil || len(pending) != 2 {
		t.Fatalf("Pending before = %v, %v", pending, err)
	}
	status, err := f.run(nil, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := done(status); !slices.Equal(got, []string{"one", "two"}) || status[0].Description != "first" || status[0].DoneAt.IsZero() {
		t.Fatalf("status = %+v", status)
	}
	if got := f.log(); !slices.Equal(got, []string{"[print][one]", "[print][two words]"}) {
		t.Fatalf("log = %q", got)
	}
	// The ledger makes a second run a no-op.
	if _, err := f.run(nil, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.log()); n != 2 {
		t.Fatalf("second Run ran %d commands", n-2)
	}
	if pending, _ := f.e.Pending(f.b, f.s); len(pending) != 0 {
		t.Fatalf("Pending after = %v", pending)
	}
	if _, err := f.run(nil, RunOptions{Only: []string{"two"}}); err != nil {
		t.Fatal(err)
	}
	if got := f.log(); len(got) != 3 || got[2] != "[print][two words]" {
		t.Fatalf("Only: log = %q", got)
	}
	if _, err := f.run(nil, RunOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.log()); n != 5 {
		t.Fatalf("Force ran %d commands, want 2", n-3)
	}
	if _, err := f.run(nil, RunOptions{Only: []string{"three"}}); err == nil || !strings.Contains(err.Error(), `no setup step "three"`) {
		t.Fatalf("unknown Only step: %v", err)
	}
	if _, err := f.run(nil, RunOptions{Values: map[string]string{"nope": "x"}}); err == nil {
		t.Fatal("an answer for an unknown step was accepted")
	}
	// The ledger is per scope: another user starts from nothing.
	other := f.s
	other.User = "bob"
	if pending, _ := f.e.Pending(f.b, other); len(pending) != 2 {
		t.Fatalf("bob's pending = %v", pending)
	}
	if _, err := f.e.Status(f.b, lifecycle.Scope{Bundle: "other@1"}); err == nil {
		t.Fatal("a scope of another bundle was accepted")
	}
}

func TestSkipIf(t *testing.T) {
	f := newFixture(t,
		manifest.SetupStep{ID: "daemon", Kind: manifest.StepCmd, Cmd: "fakecli touch daemon",
			SkipIf: &manifest.SkipIf{Cmd: "fakecli flag daemon"}},
		manifest.SetupStep{ID: "odd", Kind: manifest.StepCmd, Cmd: "fakecli print odd",
			SkipIf: &manifest.SkipIf{Cmd: "fakecli exit 7", ExitCode: 7}},
	)
	status, err := f.run(nil, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if status[0].Skipped || !status[0].Done || !status[1].Skipped || !status[1].Done {
		t.Fatalf("status = %+v", status)
	}
	want := []string{"[flag][daemon]", "[touch][daemon]", "[exit][7]"}
	if got := f.log(); !slices.Equal(got, want) {
		t.Fatalf("log = %q, want %q", got, want)
	}
	// Forced, skip_if now finds the daemon and the step is skipped.
	status, err = f.run(nil, RunOptions{Force: true, Only: []string{"daemon"}})
	if err != nil || !status[0].Skipped {
		t.Fatalf("forced: %+v %v", status, err)
	}
	if got := f.log(); !slices.Equal(got[3:], []string{"[flag][daemon]"}) {
		t.Fatalf("forced log = %q", got[3:])
	}
}

func TestFailureStopsPipeline(t *testing.T) {
	f := newFixture(t,
		manifest.SetupStep{ID: "token", Kind: manifest.StepPrompt, Prompt: "Token", Type: "secret"},
		manifest.SetupStep{ID: "ok", Kind: manifest.StepCmd, Cmd: "fakecli print ok"},
		manifest.SetupStep{ID: "bad", Kind: manifest.StepCmd, Cmd: "fakecli fail ${input.token}"},
		manifest.SetupStep{ID: "later", Kind: manifest.StepCmd, Cmd: "fakecli print later"},
	)
	const secret = "tok-Sup3rSecret"
	status, err := f.run(nil, RunOptions{Values: map[string]string{"token": secret}})
	se := stepErr(t, err, errcode.SetupFailed, "bad")
	if !strings.Contains(se.Message, "exited 3") || !strings.Contains(se.Message, "boom: [redacted]") || strings.Contains(err.Error(), secret) {
		t.Fatalf("message = %q", se.Message)
	}
	if !strings.Contains(se.Message, "${input.token}") {
		t.Fatalf("the message should quote the command as written: %q", se.Message)
	}
	if got := done(status); !slices.Equal(got, []string{"token", "ok"}) {
		t.Fatalf("done = %v", got)
	}
	for _, l := range f.log() {
		if strings.Contains(l, "later") {
			t.Fatal("a step after the failure ran")
		}
	}
	// The failing command's argv did get the whole value.
	if got := f.log(); got[len(got)-1] != "[fail]["+secret+"]" {
		t.Fatalf("log = %q", got)
	}
}

func TestTimeoutAndNonBinCommands(t *testing.T) {
	f := newFixture(t, manifest.SetupStep{ID: "slow", Kind: manifest.StepCmd, Cmd: "fakecli sleep 5", TimeoutMS: 200})
	_, err := f.run(nil, RunOptions{})
	if se := stepErr(t, err, errcode.SetupFailed, "slow"); !strings.Contains(se.Message, "did not finish within 200ms") {
		t.Fatalf("message = %q", se.Message)
	}
	f.b.CLI.Setup = []manifest.SetupStep{{ID: "shell", Kind: manifest.StepCmd, Cmd: "sh -c 'echo hi'"}}
	_, err = f.run(nil, RunOptions{})
	if se := stepErr(t, err, errcode.SetupFailed, "shell"); !strings.Contains(se.Message, "not the bundle's bin") {
		t.Fatalf("message = %q", se.Message)
	}
	f.b.CLI.Setup = []manifest.SetupStep{{ID: "pipe", Kind: manifest.StepCmd, Cmd: "fakecli print x | cat"}}
	if _, err = f.run(nil, RunOptions{}); err == nil {
		t.Fatal("a pipeline was accepted")
	}
}

func TestHeadlessSetupRequired(t *testing.T) {
	f := newFixture(t,
		manifest.SetupStep{ID: "install", Kind: manifest.StepCmd, Cmd: "fakecli print installed"},
		manifest.SetupStep{ID: "url", Kind: manifest.StepPrompt, Prompt: "Gateway URL"},
		manifest.SetupStep{ID: "pick", Kind: manifest.StepExternal, URL: "https://example.com/pick"},
		manifest.SetupStep{ID: "probe", Kind: manifest.StepCmd, Cmd: "fakecli print probe"},
	)
	status, err := f.run(nil, RunOptions{})
	se := stepErr(t, err, errcode.SetupRequired, "url")
	if !slices.Equal(se.Pending, []string{"url", "pick", "probe"}) || !strings.Contains(se.Hint, "clihostctl setup fake") ||
		!strings.Contains(se.Message, "url, pick, probe") {
		t.Fatalf("setup_required = %+v", se)
	}
	if got := done(status); !slices.Equal(got, []string{"install"}) {
		t.Fatalf("done = %v", got)
	}
	// Answers given up front complete it headlessly, external included.
	status, err = f.run(nil, RunOptions{Values: map[string]string{"url": "wss://gw.example", "pick": "chan-42"}})
	if err != nil || len(done(status)) != 4 {
		t.Fatalf("with values: %+v %v", status, err)
	}
	if got := f.log(); !slices.Equal(got, []string{"[print][installed]", "[print][probe]"}) {
		t.Fatalf("log = %q", got)
	}
}

func TestPrompts(t *testing.T) {
	f := newFixture(t,
		manifest.SetupStep{ID: "gateway", Kind: manifest.StepPrompt, Prompt: "Gateway", Default: "wss://default.example",
			Persist: &manifest.Persist{Env: "GATEWAY_URL"}},
		manifest.SetupStep{ID: "telemetry", Kind: manifest.StepPrompt, Prompt: "Telemetry?", Type: "boolean"},
		manifest.SetupStep{ID: "model", Kind: manifest.StepPrompt, Prompt: "Model", Type: "select",
			Options: &manifest.PromptOptions{Static: []string{"small", "large"}}},
		manifest.SetupStep{ID: "region", Kind: manifest.StepPrompt, Prompt: "Region", Type: "select",
			Options: &manifest.PromptOptions{Cmd: "fakecli options"},
			Persist: &manifest.Persist{Cmd: `fakecli config set region "${value}"`}},
		manifest.SetupStep{ID: "name", Kind: manifest.StepPrompt, Prompt: "Display name",
			Persist: &manifest.Persist{Cmd: "fakecli config set name ${value}"}},
		manifest.SetupStep{ID: "check", Kind: manifest.StepCmd, Cmd: "fakecli env GATEWAY_URL"},
		manifest.SetupStep{ID: "use", Kind: manifest.StepCmd, Cmd: "fakecli use ${input.model} ${input.telemetry}"},
	)
	ans := &answerer{answers: map[string]string{"gateway": "", "telemetry": "Yes", "model": "large", "region": "us", "name": `Ada "the" Lovelace; rm -rf /`}}
	if _, err := f.run(ans, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := ans.asked["region"]; !slices.Equal(got, []Choice{{"eu", "Europe"}, {"us", "United States"}, {"ap", "ap"}}) {
		t.Fatalf("region choices = %+v", got)
	}
	if got := ans.asked["model"]; !slices.Equal(got, []Choice{{"small", "small"}, {"large", "large"}}) {
		t.Fatalf("model choices = %+v", got)
	}
	want := []string{
		"[options]",
		"[config][set][region][us]",
		`[config][set][name][Ada "the" Lovelace; rm -rf /]`,
		"[env][GATEWAY_URL]", "GATEWAY_URL=wss://default.example",
		"[use][large][true]",
	}
	if got := f.log(); !slices.Equal(got, want) {
		t.Fatalf("log = %q\nwant %q", got, want)
	}
	env, err := f.e.PersistedEnv(f.b, f.s)
	if err != nil || env["GATEWAY_URL"] != "wss://default.example" || len(env) != 1 {
		t.Fatalf("PersistedEnv = %v, %v", env, err)
	}

	// Wrong answers fail the step without echoing the answer.
	for _, tc := range []struct{ step, answer, msg string }{
		{"model", "huge", "not one of the options"},
		{"telemetry", "maybe", "not a yes/no value"},
	} {
		_, err := f.run(nil, RunOptions{Only: []string{tc.step}, Values: map[string]string{tc.step: tc.answer}})
		if se := stepErr(t, err, errcode.SetupFailed, tc.step); !strings.Contains(se.Message, tc.msg) || strings.Contains(err.Error(), tc.answer) {
			t.Fatalf("%s: %v", tc.step, err)
		}
	}
	// An Answerer that gives up fails the step.
	_, err = f.run(&answerer{}, RunOptions{Only: []string{"name"}})
	if se := stepErr(t, err, errcode.SetupFailed, "name"); !strings.Contains(se.Message, "closed the prompt") {
		t.Fatalf("message = %q", se.Message)
	}
}

func TestPersistSecretsNeverPlaintext(t *testing.T) {
	f := newFixture(t,
		manifest.SetupStep{ID: "gateway-token", Kind: manifest.StepPrompt, Prompt: "Token", Type: "secret",
			Persist: &manifest.Persist{SecretSlug: "openclaw/gateway-token"}},
		manifest.SetupStep{ID: "api-key", Kind: manifest.StepPrompt, Prompt: "API key", Type: "secret",
			Persist: &manifest.Persist{Env: "FAKE_API_KEY"}},
		manifest.SetupStep{ID: "login", Kind: manifest.StepCmd, Cmd: "fakecli login ${secrets.openclaw/gateway-token}"},
		manifest.SetupStep{ID: "leak", Kind: manifest.StepCmd, Cmd: "fakecli fail-env FAKE_API_KEY"},
	)
	const tok, key = "gwtok-7f3a9c1e5d", "apikey-0b8e2d4f6a"
	status, err := f.run(nil, RunOptions{Values: map[string]string{"gateway-token": tok, "api-key": key}})
	// A later command that prints the persisted secret env value to stderr: redacted in the error.
	if se := stepErr(t, err, errcode.SetupFailed, "leak"); !strings.Contains(se.Message, "boom: [redacted]") || strings.Contains(err.Error(), key) {
		t.Fatalf("message = %q", se.Message)
	}
	if got, ok, err := f.e.Secret(f.s, "openclaw/gateway-token"); got != tok || !ok || err != nil {
		t.Fatalf("Secret = %q %v %v", got, ok, err)
	}
	if env, _ := f.e.PersistedEnv(f.b, f.s); env["FAKE_API_KEY"] != key {
		t.Fatalf("PersistedEnv = %v", env)
	}
	if got := f.log(); !slices.Equal(got, []string{"[login][" + tok + "]", "[fail-env][FAKE_API_KEY]"}) {
		t.Fatalf("log = %q", got)
	}
	js, _ := json.Marshal(status)
	if bytes.Contains(js, []byte(tok)) || bytes.Contains(js, []byte(key)) {
		t.Fatal("a secret is in StepStatus")
	}
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(f.dir, "state", store.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{tok, key} {
		if bytes.Contains(db, []byte(v)) {
			t.Fatalf("%q is in the database file in plaintext", v)
		}
	}
	if !bytes.Contains(db, []byte("gateway-token")) {
		t.Fatal("sanity: the ledger should name the step")
	}
	// Reset forgets the ledger and the values setup stored.
	f.open()
	if err := f.e.Reset(f.b, f.s); err != nil {
		t.Fatal(err)
	}
	if p, _ := f.e.Pending(f.b, f.s); len(p) != 4 {
		t.Fatalf("Pending after Reset = %d steps", len(p))
	}
	if _, ok, _ := f.e.Secret(f.s, "openclaw/gateway-token"); ok {
		t.Fatal("Reset kept the secret slug")
	}
	if env, _ := f.e.PersistedEnv(f.b, f.s); len(env) != 0 {
		t.Fatalf("Reset kept env %v", env)
	}
	if names, _ := f.e.Secrets.Names(f.s.Key()); len(names) != 0 {
		t.Fatalf("Reset left %v", names)
	}
}

func TestPlaceholders(t *testing.T) {
	f := newFixture(t, manifest.SetupStep{ID: "name", Kind: manifest.StepPrompt, Prompt: "Name",
		Persist: &manifest.Persist{Cmd: "fakecli set 'x' ${value} \"${ value }\" --"}})
	if _, err := f.run(nil, RunOptions{Values: map[string]string{"name": "a b 'c' $HOME `id`"}}); err != nil {
		t.Fatal(err)
	}
	if got := f.log(); !slices.Equal(got, []string{"[set][x][a b 'c' $HOME `id`][a b 'c' $HOME `id`][--]"}) {
		t.Fatalf("log = %q", got)
	}
	for _, tc := range []struct{ cmd, msg string }{
		{"fakecli set --name=${value}", "must be a whole word"},
		{"${value} set", "first word"},
		{"fakecli ${nope}", "unknown placeholder"},
		{"fakecli ${input.missing}", `no setup step "missing"`},
		{"fakecli ${secrets.none}", `no secret "none"`},
		{"fakecli $HOME", "needs a shell"},
	} {
		f.b.CLI.Setup[0].Persist.Cmd = tc.cmd
		_, err := f.run(nil, RunOptions{Force: true, Values: map[string]string{"name": "v"}})
		if se := stepErr(t, err, errcode.SetupFailed, "name"); !strings.Contains(se.Message, tc.msg) {
			t.Errorf("%s: message = %q, want %q", tc.cmd, se.Message, tc.msg)
		}
	}
	f.b.CLI.Setup = append(f.b.CLI.Setup, manifest.SetupStep{ID: "cmd", Kind: manifest.StepCmd, Cmd: "fakecli ${value}"})
	_, err := f.run(nil, RunOptions{Only: []string{"cmd"}})
	if se := stepErr(t, err, errcode.SetupFailed, "cmd"); !strings.Contains(se.Message, "only in persist.cmd") {
		t.Fatalf("message = %q", se.Message)
	}
}

func TestInteractiveCmdGetsTTY(t *testing.T) {
	f := newFixture(t,
		manifest.SetupStep{ID: "term", Kind: manifest.StepCmd, Cmd: "fakecli tty", Interactive: true, Persist: &manifest.Persist{Env: "TERM_KIND"}},
		manifest.SetupStep{ID: "pipe", Kind: manifest.StepCmd, Cmd: "fakecli tty", Persist: &manifest.Persist{Env: "PIPE_KIND"}},
	)
	if _, err := f.run(nil, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	env, err := f.e.PersistedEnv(f.b, f.s)
	if err != nil || env["TERM_KIND"] != "tty" || env["PIPE_KIND"] != "notty" {
		t.Fatalf("PersistedEnv = %v %v", env, err)
	}
	f.b.CLI.Setup = []manifest.SetupStep{{ID: "evil", Kind: manifest.StepCmd, Cmd: "fakecli print /x", Persist: &manifest.Persist{Env: "LD_PRELOAD"}}}
	_, err = f.run(nil, RunOptions{})
	if se := stepErr(t, err, errcode.SetupFailed, "evil"); !strings.Contains(se.Message, "LD_PRELOAD") {
		t.Fatalf("message = %q", se.Message)
	}
}

// callbackOf extracts the callback URL a Visit received ("" after reporting an error).
func callbackOf(t *testing.T, visit string) string {
	t.Helper()
	u, err := url.Parse(visit)
	if err != nil {
		t.Error(err)
		return ""
	}
	if u.Host != "example.com" {
		return visit // no step url: the callback itself
	}
	for _, p := range []string{"cb", "redirect_uri"} {
		if v := u.Query().Get(p); v != "" {
			return v
		}
	}
	t.Errorf("no callback URL in %s", visit)
	return ""
}

func TestExternalCallback(t *testing.T) {
	f := newFixture(t,
		manifest.SetupStep{ID: "channel", Kind: manifest.StepExternal, URL: "https://example.com/pick?app=1&cb=${callback_url}",
			Callback: &manifest.Callback{Param: "channel"}, Persist: &manifest.Persist{Env: "CHANNEL"}},
		manifest.SetupStep{ID: "workspace", Kind: manifest.StepExternal, URL: "https://example.com/ws?app=1"},
	)
	var visited []string
	ans := &answerer{visit: func(_ context.Context, step manifest.SetupStep, u string) error {
		visited = append(visited, u)
		cb := callbackOf(t, u)
		if !strings.HasPrefix(cb, "http://127.0.0.1:") {
			t.Errorf("callback %s is not on loopback", cb)
		}
		if code := get(t, cb+"x?channel=1"); code != http.StatusNotFound {
			t.Errorf("wrong token: %d", code)
		}
		param := map[string]string{"channel": "channel", "workspace": "code"}[step.ID]
		if code := get(t, cb+"?"+param+"=val-"+step.ID); code != http.StatusOK {
			t.Errorf("delivery: %d", code)
		}
		return nil
	}}
	if _, err := f.run(ans, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(visited) != 2 || !strings.HasPrefix(visited[0], "https://example.com/pick?app=1&cb=http%3A%2F%2F127.0.0.1%3A") ||
		!strings.Contains(visited[1], "redirect_uri=http%3A%2F%2F127.0.0.1%3A") {
		t.Fatalf("visited %q", visited)
	}
	if env, _ := f.e.PersistedEnv(f.b, f.s); env["CHANNEL"] != "val-channel" {
		t.Fatalf("PersistedEnv = %v", env)
	}
	if v, ok, _ := f.e.getSecret(f.s, prefixInput+"workspace"); v != "val-workspace" || !ok {
		t.Fatalf("input/workspace = %q %v", v, ok)
	}
}

func TestCallbackTimeoutAndVisitFailure(t *testing.T) {
	f := newFixture(t, manifest.SetupStep{ID: "wait", Kind: manifest.StepExternal, URL: "https://example.com/x",
		Callback: &manifest.Callback{TimeoutMS: 300}})
	var cb string
	ans := &answerer{visit: func(_ context.Context, _ manifest.SetupStep, u string) error {
		cb = callbackOf(t, u)
		return nil
	}}
	_, err := f.run(ans, RunOptions{})
	if se := stepErr(t, err, errcode.SetupFailed, "wait"); !strings.Contains(se.Message, "no callback arrived within 300ms") {
		t.Fatalf("message = %q", se.Message)
	}
	if _, err := client.Get(cb + "?code=late"); err == nil {
		t.Fatal("the callback server is still up after the step ended")
	}
	ans.visit = func(context.Context, manifest.SetupStep, string) error { return errors.New("no browser") }
	_, err = f.run(ans, RunOptions{})
	if se := stepErr(t, err, errcode.SetupFailed, "wait"); !strings.Contains(se.Message, "no browser") {
		t.Fatalf("message = %q", se.Message)
	}
	// A Visit that blocks until the engine is done still lets the callback through.
	delivered := make(chan int, 1)
	ans.visit = func(ctx context.Context, _ manifest.SetupStep, u string) error {
		go func() { delivered <- get(t, callbackOf(t, u)+"?code=ok") }()
		<-ctx.Done()
		return ctx.Err()
	}
	if _, err := f.run(ans, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := <-delivered; code != http.StatusOK {
		t.Fatalf("the accepted request got %d: the server closed before answering it", code)
	}
	// The flow's own error fails the step.
	f.b.CLI.Setup[0].ID = "denied"
	ans.visit = func(_ context.Context, _ manifest.SetupStep, u string) error {
		get(t, callbackOf(t, u)+"?error=access_denied")
		return nil
	}
	_, err = f.run(ans, RunOptions{})
	if se := stepErr(t, err, errcode.SetupFailed, "denied"); !strings.Contains(se.Message, `"access_denied"`) {
		t.Fatalf("message = %q", se.Message)
	}
	// A cancelled context ends the wait.
	f.b.CLI.Setup[0].Callback.TimeoutMS = 0
	ctx, cancel := context.WithCancel(context.Background())
	f.ctx = ctx
	ans.visit = func(context.Context, manifest.SetupStep, string) error { cancel(); return nil }
	_, err = f.run(ans, RunOptions{})
	if se := stepErr(t, err, errcode.SetupFailed, "denied"); !strings.Contains(se.Message, "cancelled") {
		t.Fatalf("message = %q", se.Message)
	}
}

func TestCallbackServer(t *testing.T) {
	cb, err := startCallback("", "code", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.close()
	port := cb.port
	for _, tc := range []struct {
		name   string
		url    string
		header []string
		want   int
	}{
		{"wrong token", strings.TrimSuffix(cb.url, cb.url[len(cb.url)-4:]) + "AAAA?code=x", nil, http.StatusNotFound},
		{"no token", "http://127.0.0.1:" + port + "/callback/?code=x", nil, http.StatusNotFound},
		{"foreign Host", cb.url + "?code=x", []string{"Host", "evil.example:" + port}, http.StatusForbidden},
		{"Host on another port", cb.url + "?code=x", []string{"Host", "127.0.0.1:1"}, http.StatusForbidden},
		{"foreign Origin", cb.url + "?code=x", []string{"Origin", "https://evil.example"}, http.StatusForbidden},
		{"null Origin", cb.url + "?code=x", []string{"Origin", "null"}, http.StatusForbidden},
		{"missing param", cb.url + "?other=x", nil, http.StatusBadRequest},
		{"localhost Host and own Origin", cb.url + "?code=the-code", []string{"Host", "localhost:" + port, "Origin", "http://127.0.0.1:" + port}, http.StatusOK},
		{"second use", cb.url + "?code=again", nil, http.StatusGone},
	} {
		if got := get(t, tc.url, tc.header...); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	resp, err := client.Post(cb.url+"?code=x", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
	select {
	case r := <-cb.result:
		if r.value != "the-code" || r.err != nil {
			t.Fatalf("result = %+v", r)
		}
	default:
		t.Fatal("no result")
	}
	select {
	case r := <-cb.result:
		t.Fatalf("a second result: %+v", r)
	default:
	}
	if _, err := startCallback("192.0.2.1", "code", nil); err == nil {
		t.Fatal("a non-loopback callback host was accepted")
	}
}

func TestVisitURL(t *testing.T) {
	const cb = "http://127.0.0.1:5/callback/T"
	for _, tc := range []struct{ in, want string }{
		{"", cb},
		{"https://example.com/a?x=1&r=${callback_url}", "https://example.com/a?x=1&r=http%3A%2F%2F127.0.0.1%3A5%2Fcallback%2FT"},
		{"https://example.com/a?x=1", "https://example.com/a?redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcallback%2FT&x=1"},
	} {
		if got, err := visitURL(tc.in, cb); got != tc.want || err != nil {
			t.Errorf("visitURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"file:///etc/passwd", "javascript:alert(1)", "/relative"} {
		if _, err := visitURL(bad, cb); err == nil {
			t.Errorf("visitURL(%q) accepted", bad)
		}
	}
}

func TestOAuth(t *testing.T) {
	f := newFixture(t, manifest.SetupStep{ID: "github", Kind: manifest.StepOAuth, SecretSlug: "github/token",
		OAuth: &manifest.OAuthFlow{ClientID: "c", AuthorizationURL: "https://auth.example/authorize", TokenURL: "https://auth.example/token"}})
	if _, err := f.run(nil, RunOptions{Values: map[string]string{"github": "gho_abc123"}}); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := f.e.Secret(f.s, "github/token"); v != "gho_abc123" || !ok || err != nil {
		t.Fatalf("Secret = %q %v %v", v, ok, err)
	}
	// Headless: a value given up front; without one, setup_required.
	other := f.s
	other.User = "bob"
	if _, err := f.e.Run(f.ctx, f.b, other, f.env, nil, RunOptions{}); err == nil {
		t.Fatal("headless oauth did not stop")
	} else {
		stepErr(t, err, errcode.SetupRequired, "github")
	}
	if _, err := f.e.Run(f.ctx, f.b, other, f.env, nil, RunOptions{Values: map[string]string{"github": "gho_bob"}}); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := f.e.Secret(other, "github/token"); v != "gho_bob" {
		t.Fatalf("bob's token = %q", v)
	}
	f.b.CLI.Setup[0].SecretSlug = ""
	_, err := f.run(nil, RunOptions{Force: true, Values: map[string]string{"github": "x"}})
	stepErr(t, err, errcode.SetupFailed, "github")
}

func TestLedgerWrittenPerStep(t *testing.T) {
	f := newFixture(t,
		manifest.SetupStep{ID: "a", Kind: manifest.StepCmd, Cmd: "fakecli print a"},
		manifest.SetupStep{ID: "b", Kind: manifest.StepCmd, Cmd: "fakecli print b"},
		manifest.SetupStep{ID: "c", Kind: manifest.StepCmd, Cmd: "fakecli print c"},
	)
	if _, err := f.run(nil, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := f.st.Get(store.BucketSetup, f.s.Key(), nil)
	if err != nil || !ok || rec.Version != 3 {
		t.Fatalf("ledger record: version %d ok %v err %v; want one version per completed step", rec.Version, ok, err)
	}
}
