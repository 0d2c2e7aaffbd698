package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clihost/clihost/sandboxprobe"

	"github.com/spf13/cobra"
)

// TestStatusBundleExit: status BUNDLE exits 0 when the bundle is ready, 3 when it is not (its
// --json says ready), and status without BUNDLE exits 0 whatever the bundles' state.
func TestStatusBundleExit(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"version":"dev","sandbox":{"state":"ok"},"bundles":{"loaded":2}}`)
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		all := map[string]string{
			"jq": `{"key":"jq","install":"ok","setup":"none","auth":"none","ready":true}`,
			"gh": `{"key":"gh","install":"ok","setup":"done","auth":"missing","ready":false,"reason":"not logged in: run clihostctl login gh"}`,
		}
		if b := r.URL.Query().Get("bundle"); b != "" {
			reply(w, 200, "["+all[b]+"]")
			return
		}
		reply(w, 200, "["+all["gh"]+","+all["jq"]+"]")
	})
	sock := fakeDaemon(t, mux)
	ios, out, _ := testStreams("")
	ios.SetTTY(false, true, true)
	if code := ctl(ios, nil, "--socket", sock, "status"); code != 0 || !strings.Contains(out.String(), "\x1b[31mfalse\x1b[0m\n") || !strings.Contains(out.String(), "\x1b[32mtrue\x1b[0m\n") {
		t.Errorf("status on a terminal: exit %d %q, want READY coloured", code, out)
	}
	for _, tc := range []struct {
		args  []string
		code  int
		ready string
	}{
		{[]string{"status", "jq"}, 0, ""},
		{[]string{"status", "gh"}, 3, ""},
		{[]string{"status", "gh", "--json"}, 3, "false"},
		{[]string{"status", "jq", "--json"}, 0, "true"},
		{[]string{"status"}, 0, ""},
	} {
		ios, out, errOut := testStreams("")
		if code := ctl(ios, nil, append([]string{"--socket", sock}, tc.args...)...); code != tc.code {
			t.Errorf("%q: exit %d, want %d (stderr %q)", tc.args, code, tc.code, errOut)
		}
		if tc.ready != "" {
			var st struct {
				Bundles []map[string]any `json:"bundles"`
			}
			if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st.Bundles) != 1 || st.Bundles[0]["ready"] != (tc.ready == "true") {
				t.Errorf("%q: %s (%v), want ready %s", tc.args, out, err, tc.ready)
			}
		}
	}
}

// TestUsageErrorNamesSubcommandHelp: a usage mistake points at the help of the command it was made
// with, not the root's.
func TestUsageErrorNamesSubcommandHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		help string
	}{
		{[]string{"call", "jq"}, "Run 'clihostctl call --help' for usage."},
		{[]string{"lint", "--no-such-flag"}, "Run 'clihostctl lint --help' for usage."},
		{[]string{"token", "create"}, "Run 'clihostctl token create --help' for usage."},
		{[]string{"status", "a", "b"}, "Run 'clihostctl status --help' for usage."},
		{[]string{"lint", "--format"}, "Run 'clihostctl lint --help' for usage."},
		{[]string{"stauts"}, "Run 'clihostctl --help' for usage."},
	} {
		code, _, errOut := runCtl(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.help) {
			t.Errorf("%q: exit %d stderr %q, want 2 and %q", tc.args, code, errOut, tc.help)
		}
	}
}

// TestAuditFlags: -n, --since, --bundle and --follow reach the daemon as its query (--follow
// alone asks for the last 10 lines, not the history), and bad values are usage errors.
func TestAuditFlags(t *testing.T) {
	var asked []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/audit", func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.RawQuery)
		w.Write([]byte(`{"type":"cli.invoked","cli_id":"gh","tool_id":"pr-list","ok":false,"error_code":"timeout","duration_ms":12,"ts":"2026-11-26T07:00:00Z"}` + "\n"))
	})
	sock := fakeDaemon(t, mux)
	for _, tc := range []struct {
		args  []string
		query string
	}{
		{[]string{"audit"}, ""},
		{[]string{"audit", "-n", "5", "--bundle", "gh"}, "bundle=gh&n=5"},
		{[]string{"audit", "--follow"}, "follow=1&n=10"},
		{[]string{"audit", "-f", "-n", "0"}, "follow=1&n=0"},
		{[]string{"audit", "-f", "--rotated"}, "follow=1&rotated=1"},
		{[]string{"audit", "--since", "2026-11-26T06:00:00Z"}, "since=2026-11-26T06%3A00%3A00Z"},
	} {
		asked = nil
		ios, out, errOut := testStreams("")
		if code := ctl(ios, nil, append([]string{"--socket", sock}, tc.args...)...); code != 0 || len(asked) != 1 || asked[0] != tc.query {
			t.Errorf("%q: exit %d asked %q, want %q (stderr %q)", tc.args, code, asked, tc.query, errOut)
		}
		if !strings.HasPrefix(out.String(), `{"type":"cli.invoked"`) {
			t.Errorf("%q piped: %q, want the JSON line", tc.args, out)
		}
	}
	asked = nil
	ios, _, _ := testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "audit", "--since", "90m"); code != 0 || len(asked) != 1 || !strings.HasPrefix(asked[0], "since=") {
		t.Errorf("--since 90m: exit %d asked %q", code, asked)
	}
	for _, bad := range [][]string{{"--since", "yesterday"}, {"--since", "-5m"}, {"-n", "-2"}, {"--rotated", "-n", "3"}} {
		if code, _, errOut := runCtl(t, append([]string{"--socket", sock, "audit"}, bad...)...); code != 2 {
			t.Errorf("%q: exit %d stderr %q, want a usage error", bad, code, errOut)
		}
	}
}

// TestAuditTerminal: on a terminal the audit prints one short line an entry, coloured unless
// NO_COLOR is set; --json keeps the JSON lines there.
func TestAuditTerminal(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/audit", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"type":"cli.invoked","cli_id":"gh","tool_id":"pr-list","ok":false,"error_code":"timeout","duration_ms":12,"ts":"2026-11-26T07:00:00Z"}` + "\n"))
	})
	sock := fakeDaemon(t, mux)
	for _, tc := range []struct {
		noColor bool
		args    []string
		want    string
	}{
		{false, nil, "\x1b[2m2026-11-26T07:00:00Z\x1b[0m  invoked  \x1b[1mgh\x1b[0m  pr-list  \x1b[31mfailed timeout\x1b[0m  12ms\n"},
		{true, nil, "2026-11-26T07:00:00Z  invoked  gh  pr-list  failed timeout  12ms\n"},
		{false, []string{"--json"}, `{"type":"cli.invoked"`},
	} {
		ios, out, _ := testStreams("")
		ios.SetTTY(false, true, true)
		ios.noColor = tc.noColor
		if code := ctl(ios, nil, append([]string{"--socket", sock, "audit", "-n", "1"}, tc.args...)...); code != 0 || !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("NO_COLOR %v %q: exit %d %q, want %q", tc.noColor, tc.args, code, out, tc.want)
		}
	}
}

// TestColorFlag: --color always colours piped output, --color never a terminal's, a bad value is
// a usage error, and the flag completes to its words.
func TestColorFlag(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/audit", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"type":"cli.invoked","cli_id":"gh","ok":true,"ts":"2026-11-26T07:00:00Z"}` + "\n"))
	})
	sock := fakeDaemon(t, mux)
	for _, tc := range []struct {
		tty    bool
		color  string
		escape bool
	}{{true, "never", false}, {true, "auto", true}, {true, "always", true}} {
		ios, out, _ := testStreams("")
		ios.SetTTY(false, tc.tty, tc.tty)
		if code := ctl(ios, nil, "--socket", sock, "--color", tc.color, "audit", "-n", "1"); code != 0 || strings.Contains(out.String(), "\x1b[") != tc.escape {
			t.Errorf("tty %v --color %s: exit %d %q, colour %v", tc.tty, tc.color, code, out, tc.escape)
		}
	}
	ios, _, _ := testStreams("")
	ios.color = colorAlways
	if !ios.ColorEnabled() {
		t.Error("--color always: a pipe gets no colour")
	}
	if code, _, errOut := runCtl(t, "--color", "sometimes", "version"); code != 2 || !strings.Contains(errOut, "want auto, always or never") {
		t.Errorf("--color sometimes: exit %d %q", code, errOut)
	}
	if cands, _ := complete(t, "--color", ""); !has(cands, "auto", "always", "never") {
		t.Errorf("--color completes to %q", cands)
	}
}

// TestInstallProgress: a package manager's install shows the attempt, its elapsed time and the
// manager's last line: redrawn in place on a terminal (cut to one line, its escapes made plain),
// one line every few seconds when piped.
func TestInstallProgress(t *testing.T) {
	evs := []string{
		`{"phase":"checking","message":"checking gh"}`,
		`{"phase":"installing","message":"installing gh (attempt 1)"}`,
		`{"phase":"running","message":"installing gh (attempt 1)","elapsed_ms":1000,"output":"Reading package lists..."}`,
		`{"phase":"running","message":"installing gh (attempt 1)","elapsed_ms":2000,"output":"Unpacking gh (2.45.0) ...\u001b]0;pwned\u0007` + strings.Repeat("y", 100) + `"}`,
		`{"phase":"done","message":"installed gh 2.45.0 with apt","method":"apt"}`,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/install", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, e := range evs {
			w.Write([]byte(e + "\n"))
		}
	})
	sock := fakeDaemon(t, mux)
	ios, out, errOut := testStreams("")
	ios.SetTTY(false, false, true)
	if code := ctl(ios, nil, "--socket", sock, "install", "gh"); code != 0 {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	got := errOut.String()
	for _, want := range []string{"\r\x1b[Kinstalling gh (attempt 1) 1s: Reading package lists...", "\r\x1b[Kinstalling gh (attempt 1) 2s: Unpacking gh (2.45.0) ...\\x1b]0;pwned\\x07yyy"} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal stderr %q lacks %q", got, want)
		}
	}
	for _, l := range strings.Split(got, "\r\x1b[K")[1:] {
		if first, _, _ := strings.Cut(l, "\n"); len([]rune(first)) > statusWidth {
			t.Errorf("status line of %d columns: %q", len([]rune(first)), first)
		}
	}
	if strings.Contains(got, "\x1b]0;") || !strings.Contains(out.String(), "installed gh 2.45.0 with apt") {
		t.Errorf("stderr %q stdout %q", got, out)
	}

	ios, _, errOut = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "install", "gh"); code != 0 {
		t.Fatalf("piped: exit %d", code)
	}
	if got := errOut.String(); strings.Contains(got, "\r") || strings.Contains(got, "(attempt 1) 2s") || !strings.Contains(got, "installing gh (attempt 1)\ninstalling gh (attempt 1) 1s: Reading package lists...\n") {
		t.Errorf("piped stderr %q: want the attempt, then one running line (the next within 5s is skipped)", got)
	}
}

// TestManPages: man DIR writes a page for every command of the tree, from the same text as
// --help, and the same pages twice (no generation date in them).
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCtl(t, "man", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	root := newRootCmd(newGlobalOptions(systemStreams()))
	walk(root, func(cmd *cobra.Command) {
		if cmd.Hidden || !cmd.IsAvailableCommand() && cmd != root {
			return
		}
		name := strings.ReplaceAll(cmd.CommandPath(), " ", "-") + ".1"
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !strings.HasPrefix(string(data), ".nh\n.TH \"CLIHOSTCTL\" \"1\"") {
			t.Errorf("%s: %v %.40q", name, err, data)
		}
	})
	page, _ := os.ReadFile(filepath.Join(dir, "clihostctl-audit.1"))
	if !strings.Contains(string(page), "since") || !strings.Contains(string(page), "clihostctl-status(1)") && !strings.Contains(string(page), "clihostctl(1)") {
		t.Errorf("the audit page lacks its flags or its SEE ALSO:\n%s", page)
	}
	again := t.TempDir()
	runCtl(t, "man", again)
	a, _ := os.ReadFile(filepath.Join(dir, "clihostctl.1"))
	b, _ := os.ReadFile(filepath.Join(again, "clihostctl.1"))
	if string(a) != string(b) {
		t.Error("two runs wrote different pages")
	}
}

// noJSON are the commands that print no data of their own, or print it only as JSON or through
// --format, so they need no --json: why each is exempt.
var noJSON = map[string]string{
	"clihostctl call":            "its result envelope is always JSON",
	"clihostctl output parse":    "--format; its answer is always JSON",
	"clihostctl output classify": "always JSON",
	"clihostctl mcp":             "an MCP server on stdio",
	"clihostctl mcp-self":        "an MCP server on stdio",
	"clihostctl serve-mcp":       "an MCP server over HTTP",
	"clihostctl man":             "writes files",
	"clihostctl new":             "writes a bundle folder",
	"clihostctl import cobra":    "writes a bundle (its --json is section 4's import work)",
}

// TestEveryDataCommandHasJSON: each runnable command that prints data has --json, unless noJSON
// says why not (completion scripts and help print no data).
func TestEveryDataCommandHasJSON(t *testing.T) {
	root := newRootCmd(newGlobalOptions(systemStreams()))
	root.InitDefaultCompletionCmd()
	walk(root, func(cmd *cobra.Command) {
		path := cmd.CommandPath()
		if !cmd.Runnable() || cmd.Annotations[groupAnnotation] != "" || strings.HasPrefix(path, "clihostctl completion") || strings.HasPrefix(path, "clihostctl help") {
			return
		}
		if _, ok := noJSON[path]; ok {
			return
		}
		if cmd.Flags().Lookup("json") == nil {
			t.Errorf("%s has no --json", path)
		}
	})
}

// TestTokenRevokeJSON: token revoke --json prints what it revoked.
func TestTokenRevokeJSON(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tokens", func(w http.ResponseWriter, r *http.Request) { reply(w, 200, `{"name":"ci"}`) })
	sock := fakeDaemon(t, mux)
	ios, out, errOut := testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "token", "revoke", "ci", "--json"); code != 0 || strings.TrimSpace(out.String()) != `{"revoked":"ci"}` {
		t.Errorf("exit %d stdout %q stderr %q", code, out, errOut)
	}
}

// TestAuditTerminalHostileFields: what a sandboxed CLI put in an audit line (a host name, a
// reason) reaches the terminal with its escapes made visible, never as escapes.
func TestAuditTerminalHostileFields(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/audit", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"type":"cli.egress","cli_id":"gh\u001b]0;x\u0007","host":"evil\u001b[2J\u001b[H.example","allowed":false,"reason":"not\rallowed\u009b","ts":"2026-11-26T07:00:00Z"}` + "\n" +
			"not json \x1b[31m\n"))
	})
	sock := fakeDaemon(t, mux)
	ios, out, _ := testStreams("")
	ios.SetTTY(false, true, true)
	ios.noColor = true
	if code := ctl(ios, nil, "--socket", sock, "audit", "-n", "2"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := out.String()
	if strings.ContainsAny(got, "\x1b\r\x07\u009b") || !strings.Contains(got, `evil\x1b[2J\x1b[H.example`) || !strings.Contains(got, `not json \x1b[31m`) {
		t.Errorf("terminal output %q", got)
	}
}

// TestVersionNamesDaemon: version prints clihostctl's line, then the running daemon's version
// (also in --json); without a daemon only clihostctl's; --version only clihostctl's.
func TestVersionNamesDaemon(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"version":"v1.2.0 (a1b2c3d4e5f6)","sandbox":{"state":"ok"}}`)
	})
	sock := fakeDaemon(t, mux)
	code, out, _ := runCtl(t, "--socket", sock, "version")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "clihostctl dev") || lines[1] != "clihostd v1.2.0 (a1b2c3d4e5f6)" {
		t.Errorf("version: exit %d %q", code, out)
	}
	var v map[string]any
	if code, out, _ := runCtl(t, "--socket", sock, "version", "--json"); code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["daemon"] != "v1.2.0 (a1b2c3d4e5f6)" || v["version"] != "dev" {
		t.Errorf("version --json: exit %d %s", code, out)
	}
	none := filepath.Join(t.TempDir(), "none.sock")
	if code, out, _ := runCtl(t, "--socket", none, "version"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("version without a daemon: exit %d %q", code, out)
	}
	if code, out, _ := runCtl(t, "--socket", sock, "--version"); code != 0 || !strings.HasPrefix(out, "clihostctl dev") || strings.Count(out, "\n") != 1 {
		t.Errorf("--version: exit %d %q", code, out)
	}
}

// TestStatusUnknownBundleExit4: status BUNDLE for a bundle the daemon does not serve exits 4, as
// systemctl status does for a unit it does not know, so that a script waiting for a bundle (exit
// 3) or for the daemon (exit 1) stops at a mistyped name; the message still names the loaded ones.
func TestStatusUnknownBundleExit4(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"version":"dev","sandbox":{"state":"ok"},"bundles":{"loaded":1}}`)
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 404, `{"error":"no bundle \"jqq\"; loaded: jq@1","hint":"clihostctl status lists the loaded bundles"}`)
	})
	sock := fakeDaemon(t, mux)
	for _, args := range [][]string{{"status", "jqq"}, {"status", "jqq", "--json"}} {
		ios, _, errOut := testStreams("")
		if code := ctl(ios, nil, append([]string{"--socket", sock}, args...)...); code != 4 || !strings.Contains(errOut.String(), `no bundle "jqq"; loaded: jq@1`) {
			t.Errorf("%q: exit %d, %q; want 4 and the loaded bundles", args, code, errOut)
		}
	}
}

// TestAuditLinesDefaultExplained: audit --help shows -n's default, -1, so it says what -1 means
// (all, as kubectl logs --tail=-1), and -n -2's refusal does not claim -1 is refused.
func TestAuditLinesDefaultExplained(t *testing.T) {
	_, out, _ := runCtl(t, "audit", "--help")
	if !strings.Contains(out, "-1: all") {
		t.Errorf("audit --help does not say what -n -1 means:\n%s", out)
	}
	if code, _, errOut := runCtl(t, "audit", "-n", "-2"); code != 2 || !strings.Contains(errOut, "-1 for all") {
		t.Errorf("audit -n -2: exit %d, %q", code, errOut)
	}
}

// TestLimitsLineSaysNotEnforced: a limit the host cannot enforce (no usable cgroup for an
// unprivileged daemon) reads "NOT enforced" in status, not "memory 1 GiB (none)", which looks
// like a limit in force; a limit set to none stays "none".
func TestLimitsLineSaysNotEnforced(t *testing.T) {
	got := limitsLine([]sandboxprobe.LimitMechanism{
		{Limit: "memory", Value: "1 GiB", Mechanism: "none"},
		{Limit: "cpu", Value: "none", Mechanism: "none"},
		{Limit: "nofile", Value: "1024", Mechanism: "rlimit"},
	})
	if want := "limits: memory 1 GiB (NOT enforced on this host), cpu none, nofile 1024 (rlimit)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestJSONAndFormatAgree: lint and test take both spellings of JSON output a gh or kubectl user
// tries (--json, --format json), and refuse --json with another --format as a usage error instead
// of silently printing one of them (test --json --format tap printed JSON).
func TestJSONAndFormatAgree(t *testing.T) {
	tree := copyTree(t)
	bundle := filepath.Join(tree, ".cli", "mini") // a bundle with a lint error: exit 1 either way
	code, viaFormat, _ := runCtl(t, "lint", "--format", "json", bundle)
	if code != 1 || !json.Valid([]byte(viaFormat)) {
		t.Fatalf("lint --format json: exit %d %q", code, viaFormat)
	}
	if code, viaJSON, errOut := runCtl(t, "lint", "--json", bundle); code != 1 || viaJSON != viaFormat {
		t.Errorf("lint --json: exit %d %q %s; want what --format json prints", code, viaJSON, errOut)
	}
	for _, args := range [][]string{{"lint", "--json", "--format", "sarif", bundle}, {"test", "--json", "--format", "tap", bundle}} {
		if code, _, errOut := runCtl(t, args...); code != 2 || !strings.Contains(errOut, "--json") {
			t.Errorf("%q: exit %d, %q; want a usage error naming --json", args, code, errOut)
		}
	}
	if code, _, errOut := runCtl(t, "test", "--format", "json", filepath.Join(tree, "nosuch")); code == 2 && strings.Contains(errOut, "unknown --format") {
		t.Errorf("test --format json refused: %s", errOut)
	}
}

// TestCallLimitsRunHere: call's --limit-* and --approvals flags hold only calls run in this
// process, so giving one runs the call here (as --audit does) instead of sending it to the daemon,
// which silently ignored them (a call "limited" to 16 MiB ran under the daemon's 1 GiB).
func TestCallLimitsRunHere(t *testing.T) {
	t.Setenv("CLIHOST_AUDIT", filepath.Join(t.TempDir(), "audit.jsonl"))
	var sent atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/call", func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		reply(w, 200, `{"ok":true,"value":"daemon","ms":1}`)
	})
	sock := fakeDaemon(t, mux)
	ws := t.TempDir()
	for _, flag := range [][]string{{"--limit-memory", "16MiB"}, {"--limit-pids", "8"}, {"--approvals", filepath.Join(t.TempDir(), "none.yaml")}} {
		args := append([]string{"--socket", sock, "call", "jq", "eval", "--workspace", ws, "--input", `{"filter": ".", "json": "1"}`}, flag...)
		_, out, _ := runCtl(t, args...)
		if sent.Load() != 0 || strings.Contains(out, `"daemon"`) {
			t.Errorf("call %s was sent to the daemon, which ignores it: %s", flag[0], out)
		}
	}
	if _, out, _ := runCtl(t, "--socket", sock, "call", "jq", "eval", "--workspace", ws, "--input", `{"filter": ".", "json": "1"}`); sent.Load() != 1 {
		t.Errorf("a call without them did not go to the daemon: %s", out)
	}
}

// TestNoDaemonHint: a command that needs the daemon says how to start one or reach it, not only
// that none runs at a socket path (as kubectl's "did you specify the right host or port?").
func TestNoDaemonHint(t *testing.T) {
	for _, cmd := range []string{"status", "token", "open"} {
		code, _, errOut := runCtl(t, "--socket", filepath.Join(t.TempDir(), "none.sock"), cmd)
		if code != 1 || !strings.Contains(errOut, "no clihostd is running") || !strings.Contains(errOut, "systemctl start clihostd") || !strings.Contains(errOut, "CLIHOST_SOCKET") {
			t.Errorf("%s without a daemon: exit %d, %q; want 1 and how to start or reach one", cmd, code, errOut)
		}
	}
}

// TestMistypedSubcommandOfAGroup: a mistyped subcommand of a command that only groups others
// (state, import, secret, completion tcsh) is a usage error naming it, as one of the root's is;
// cobra printed the group's help and exited 0, so `clihostctl state bakup x` "succeeded".
func TestMistypedSubcommandOfAGroup(t *testing.T) {
	for _, args := range [][]string{{"state", "bakup", "x"}, {"completion", "tcsh"}, {"import", "cobar"}} {
		code, _, errOut := runCtl(t, args...)
		if code != 2 || !strings.Contains(errOut, "unknown command \""+args[1]+"\"") || !strings.Contains(errOut, "Run 'clihostctl "+args[0]+" --help' for usage.") {
			t.Errorf("%q: exit %d, %q; want 2, unknown command and the group's --help", args, code, errOut)
		}
	}
	if _, _, errOut := runCtl(t, "state", "bakup"); !strings.Contains(errOut, "did you mean backup?") {
		t.Errorf("state bakup: %q, want the suggestion", errOut)
	}
	if code, out, _ := runCtl(t, "state"); code != 0 || !strings.Contains(out, "Available Commands:") {
		t.Errorf("state alone: exit %d, %q; want its help and 0", code, out)
	}
	if code, out, _ := runCtl(t, "completion", "bash"); code != 0 || !strings.Contains(out, "bash completion") {
		t.Errorf("completion bash: exit %d", code)
	}
}

// TestMissingArgumentNamed: a command given too few or too many arguments names the ones it takes
// (from its usage line), not only how many: "clihostctl man takes 1 argument(s) (DIR), got 0".
func TestMissingArgumentNamed(t *testing.T) {
	if code, _, errOut := runCtl(t, "man"); code != 2 || !strings.Contains(errOut, "takes 1 argument(s) (DIR), got 0") {
		t.Errorf("man: exit %d, %q", code, errOut)
	}
}
