package main

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The commands run in-process here (gh's way): IOStreams over buffers that say which of them is
// a terminal, a fake Prompter where a person would answer, and a fake daemon on a unix socket
// answering the control API with fixed JSON.

// fakePrompter answers Confirm with its answers in turn and records the questions.
type fakePrompter struct {
	answers []bool
	asked   []string
}

func (p *fakePrompter) Confirm(q string) (bool, error) {
	p.asked = append(p.asked, q)
	yes := len(p.answers) > 0 && p.answers[0]
	if len(p.answers) > 0 {
		p.answers = p.answers[1:]
	}
	return yes, nil
}

func (p *fakePrompter) Input(q string) (string, error) {
	p.asked = append(p.asked, q)
	return "", nil
}

func (p *fakePrompter) Password(q string) (string, error) { return p.Input(q) }

// ctl runs clihostctl in-process with args on ios, asking p (nil: a Prompter over ios).
func ctl(ios *IOStreams, p Prompter, args ...string) int {
	g := newGlobalOptions(ios)
	if p != nil {
		g.prompter = p
	}
	return run(args, g)
}

// fakeDaemon serves mux on a new unix socket and returns its path.
func fakeDaemon(t *testing.T, mux *http.ServeMux) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "clihostd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// reply writes body (JSON) with status.
func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// approvalDaemon is a daemon whose call of gh "pr merge" waits for approval ap-1 until it is
// answered; then the same call runs (approved) or fails with approval_denied.
type approvalDaemon struct {
	mu      sync.Mutex
	calls   int
	answers []bool // what POST /v1/approvals received, in order
}

func (d *approvalDaemon) mux(t *testing.T) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/call", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Bundle, Tool string
			Input        map[string]any
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Bundle != "gh" || req.Tool != "pr merge" || req.Input["number"] != 1.0 {
			t.Errorf("call request %+v (%v), want gh \"pr merge\" {number: 1}", req, err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.calls++
		switch {
		case len(d.answers) == 0:
			reply(w, 200, `{"ok":false,"error":{"code":"approval_required","message":"gh pr merge waits for an approval",`+
				`"hint":"clihostctl approve ap-1","approval":{"id":"ap-1","question":"Merge pull request 1?"}},"ms":1}`)
		case d.answers[0]:
			reply(w, 200, `{"ok":true,"value":"merged","exit_code":0,"ms":5}`)
		default:
			reply(w, 200, `{"ok":false,"error":{"code":"approval_denied","message":"denied at the terminal"},"ms":1}`)
		}
	})
	mux.HandleFunc("POST /v1/approvals", func(w http.ResponseWriter, r *http.Request) {
		var a struct {
			ID      string `json:"id"`
			Approve bool   `json:"approve"`
		}
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil || a.ID != "ap-1" {
			reply(w, 404, `{"error":"approval \"`+a.ID+`\": unknown"}`)
			return
		}
		d.mu.Lock()
		d.answers = append(d.answers, a.Approve)
		d.mu.Unlock()
		answer := "denied"
		if a.Approve {
			answer = "approved"
		}
		reply(w, 200, `{"id":"ap-1","bundle":"gh","tool_path":"pr merge","input":"{\"number\":1}","workspace":"/srv/ws","answer":"`+answer+`","deadline":"2030-01-01T00:00:00Z"}`)
	})
	return mux
}

// TestCallAsksForApproval: a call that waits for an approval is put to the person when stdin and
// stderr are terminals: y approves it (the daemon gets the answer, and the repeated call runs),
// anything else denies it; without a terminal nobody is asked and the envelope says how an
// operator approves it.
func TestCallAsksForApproval(t *testing.T) {
	callArgs := func(sock string) []string {
		return []string{"--socket", sock, "call", "gh", "pr merge", "--input", `{"number": 1}`, "--workspace", t.TempDir()}
	}
	for _, tc := range []struct {
		name        string
		tty, answer bool
		wantCode    int
		wantCalls   int
		wantAnswers []bool
		wantOut     string
	}{
		{"y", true, true, 0, 2, []bool{true}, `"value": "merged"`},
		{"n", true, false, 1, 2, []bool{false}, `"code": "approval_denied"`},
		{"no terminal", false, true, 1, 1, nil, `"code": "approval_required"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &approvalDaemon{}
			ios, out, errOut := testStreams("")
			ios.SetTTY(tc.tty, tc.tty, tc.tty)
			p := &fakePrompter{answers: []bool{tc.answer}}
			code := ctl(ios, p, callArgs(fakeDaemon(t, d.mux(t)))...)
			if code != tc.wantCode || !strings.Contains(out.String(), tc.wantOut) {
				t.Fatalf("exit %d stdout %q stderr %q, want exit %d and %s", code, out, errOut, tc.wantCode, tc.wantOut)
			}
			if d.calls != tc.wantCalls || !slices.Equal(d.answers, tc.wantAnswers) {
				t.Errorf("the daemon got %d calls and answers %v, want %d and %v", d.calls, d.answers, tc.wantCalls, tc.wantAnswers)
			}
			asked := 0
			if tc.tty {
				asked = 1
				if !strings.Contains(errOut.String(), "gh pr merge waits for an approval\nMerge pull request 1?\n") {
					t.Errorf("stderr %q lacks the message and the question", errOut)
				}
			}
			if len(p.asked) != asked || asked == 1 && p.asked[0] != "Approve?" {
				t.Errorf("asked %q, want %d question(s) Approve?", p.asked, asked)
			}
		})
	}

	// The real Prompter over the streams: the question on stderr, the answer read from stdin.
	d := &approvalDaemon{}
	ios, out, errOut := testStreams("y\n")
	ios.SetTTY(true, false, true)
	if code := ctl(ios, nil, callArgs(fakeDaemon(t, d.mux(t)))...); code != 0 || !strings.HasSuffix(errOut.String(), "Approve? [y/N] ") ||
		!slices.Equal(d.answers, []bool{true}) {
		t.Fatalf("exit %d stdout %q stderr %q answers %v: want the question asked on stderr and y read from stdin", code, out, errOut, d.answers)
	}
}

// TestApprove lists the pending calls and answers one, in-process.
func TestApprove(t *testing.T) {
	d := &approvalDaemon{}
	mux := d.mux(t)
	mux.HandleFunc("GET /v1/approvals", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `[{"id":"ap-1","bundle":"gh","tool_path":"pr merge","input":"{\"number\":1}","via":"mcp","user":"alice","deadline":"2030-01-01T00:00:00Z"}]`)
	})
	sock := fakeDaemon(t, mux)

	ios, out, errOut := testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "approve"); code != 0 || !strings.Contains(out.String(), "ID") ||
		!strings.Contains(out.String(), "ap-1") || !strings.Contains(out.String(), "alice") {
		t.Fatalf("list: exit %d stdout %q stderr %q", code, out, errOut)
	}
	ios, out, _ = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "approve", "ap-1"); code != 0 ||
		!strings.HasPrefix(out.String(), `approved gh pr merge with {"number":1} in /srv/ws; the caller repeats the same call before `) {
		t.Fatalf("approve: exit %d stdout %q", code, out)
	}
	ios, out, _ = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "approve", "--deny", "--json", "ap-1"); code != 0 || !strings.Contains(out.String(), `"answer":"denied"`) {
		t.Fatalf("deny: exit %d stdout %q", code, out)
	}
	if !slices.Equal(d.answers, []bool{true, false}) {
		t.Errorf("the daemon got answers %v, want approve then deny", d.answers)
	}
	ios, _, errOut = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "approve", "--deny"); code != 2 || !strings.Contains(errOut.String(), "--deny needs the ID") {
		t.Errorf("--deny without ID: exit %d stderr %q, want a usage error", code, errOut)
	}
	ios, _, errOut = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "approve", "ap-other"); code != 1 || !strings.Contains(errOut.String(), `approval "ap-other": unknown`) {
		t.Errorf("unknown id: exit %d stderr %q, want the daemon's refusal", code, errOut)
	}
}

// TestStatus prints the daemon's sandbox line, its bundles and each bundle's state, in-process.
func TestStatus(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"version":"dev","sandbox":{"state":"unavailable","error":"no user namespaces","hint":"enable them"},`+
			`"bundles":{"loaded":1,"sources":["/b"],"warnings":["/c is empty"]}}`)
	})
	var asked string
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.Query().Get("bundle")
		reply(w, 200, `[{"key":"jq","install":"missing","setup":"none","auth":"none","ready":false,"reason":"not installed: run clihostctl install jq"}]`)
	})
	sock := fakeDaemon(t, mux)
	ios, out, errOut := testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "status", "jq"); code != 3 {
		t.Fatalf("exit %d stderr %q, want 3 (jq is not ready)", code, errOut)
	}
	want := []string{"WARNING: kernel sandbox unavailable: no user namespaces\n  every call is refused; enable them\n",
		"bundles: 1 loaded (sources: /b)\n", "WARNING: /c is empty\n", "BUNDLE", "jq      missing  -        none   none  false\n", "jq: not installed: run clihostctl install jq\n"}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("stdout %q lacks %q", out, w)
		}
	}
	if asked != "jq" {
		t.Errorf("the daemon was asked for bundle %q, want jq", asked)
	}
	ios, out, _ = testStreams("")
	var st struct {
		Daemon  map[string]any   `json:"daemon"`
		Bundles []map[string]any `json:"bundles"`
	}
	if code := ctl(ios, nil, "--socket", sock, "status", "--json"); code != 0 || json.Unmarshal(out.Bytes(), &st) != nil || len(st.Bundles) != 1 || st.Daemon["version"] != "dev" {
		t.Fatalf("--json: exit %d stdout %q", code, out)
	}
	ios, _, errOut = testStreams("")
	if code := ctl(ios, nil, "--socket", filepath.Join(t.TempDir(), "none.sock"), "status"); code != 1 || !strings.Contains(errOut.String(), "no clihostd is running") {
		t.Errorf("no daemon: exit %d stderr %q", code, errOut)
	}
}

// TestToken prints, makes, lists and revokes tokens, in-process.
func TestToken(t *testing.T) {
	mux := http.NewServeMux()
	info := `{"name":"%s","token":"tok-%s","mcp_url":"http://127.0.0.1:8931/mcp/{bundle}","token_file":"/s/%s"}`
	mux.HandleFunc("GET /v1/token", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, strings.ReplaceAll(info, "%s", "default"))
	})
	var changes []string
	mux.HandleFunc("POST /v1/tokens", func(w http.ResponseWriter, r *http.Request) {
		var c struct {
			Name   string `json:"name"`
			Revoke bool   `json:"revoke"`
		}
		_ = json.NewDecoder(r.Body).Decode(&c)
		changes = append(changes, c.Name+map[bool]string{true: " revoked", false: " made"}[c.Revoke])
		reply(w, 200, strings.ReplaceAll(info, "%s", c.Name))
	})
	mux.HandleFunc("GET /v1/tokens", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `[{"name":"ci-bot","created":"2026-01-02T03:04:05Z","file":"/s/tokens/ci-bot"}]`)
	})
	sock := fakeDaemon(t, mux)
	ios, out, errOut := testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "token"); code != 0 || out.String() != "tok-default\n" ||
		!strings.Contains(errOut.String(), "MCP endpoints: http://127.0.0.1:8931/mcp/{bundle}") {
		t.Fatalf("token: exit %d stdout %q stderr %q", code, out, errOut)
	}
	ios, out, _ = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "token", "create", "ci-bot"); code != 0 || out.String() != "tok-ci-bot\n" {
		t.Fatalf("create: exit %d stdout %q", code, out)
	}
	ios, out, _ = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "token", "list"); code != 0 || !strings.Contains(out.String(), "ci-bot") ||
		!strings.Contains(out.String(), "/s/tokens/ci-bot") || strings.Contains(out.String(), "tok-") {
		t.Fatalf("list: exit %d stdout %q", code, out)
	}
	ios, _, errOut = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "token", "revoke", "ci-bot"); code != 0 || errOut.String() != "revoked ci-bot\n" {
		t.Fatalf("revoke: exit %d stderr %q", code, errOut)
	}
	if strings.Join(changes, ", ") != "ci-bot made, ci-bot revoked" {
		t.Errorf("the daemon got %v", changes)
	}
	ios, _, errOut = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "token", "create"); code != 2 {
		t.Errorf("create without NAME: exit %d stderr %q, want 2", code, errOut)
	}
}

// TestInstallErrorPaths: install's failures, in-process: no daemon, a stream that ends early, an
// error event (with its hint), bad usage; and the progress bar, drawn only on a terminal.
func TestInstallErrorPaths(t *testing.T) {
	var events []string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/install", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, e := range events {
			_, _ = w.Write([]byte(e + "\n"))
		}
	})
	sock := fakeDaemon(t, mux)
	install := func(tty bool, args ...string) (int, string, string) {
		ios, out, errOut := testStreams("")
		ios.SetTTY(tty, tty, tty)
		code := ctl(ios, nil, append([]string{"--socket", sock, "install"}, args...)...)
		return code, out.String(), errOut.String()
	}

	progress := `{"phase":"progress","done":512,"total":1024}`
	events = []string{`{"phase":"installing","message":"downloading jq"}`, progress}
	if code, _, errOut := install(false, "jq"); code != 1 || !strings.Contains(errOut, "install stream ended early") || strings.Contains(errOut, "\r[") {
		t.Errorf("stream ended early: exit %d stderr %q, want the error and no progress bar (stderr is no terminal)", code, errOut)
	}
	if _, _, errOut := install(true, "jq"); !strings.Contains(errOut, "\r[###############...............]  50% 512 B / 1.0 KiB") {
		t.Errorf("on a terminal: stderr %q, want the progress bar", errOut)
	}
	events = []string{`{"phase":"error","message":"no install entry succeeded","error":{"code":"install_failed","message":"x","hint":"install it by hand"}}`}
	if code, out, errOut := install(false, "jq"); code != 1 || out != "" ||
		errOut != "clihostctl: install failed: no install entry succeeded\nhint: install it by hand\n" {
		t.Errorf("error event: exit %d stdout %q stderr %q", code, out, errOut)
	}
	if code, out, _ := install(false, "jq", "--json"); code != 1 || !strings.Contains(out, `"phase": "error"`) {
		t.Errorf("error event, --json: exit %d stdout %q", code, out)
	}
	if code, _, errOut := install(false); code != 2 || !strings.Contains(errOut, "takes 1 argument(s)") {
		t.Errorf("no bundle: exit %d stderr %q, want a usage error", code, errOut)
	}
	ios, _, errOut := testStreams("")
	if code := ctl(ios, nil, "--socket", filepath.Join(t.TempDir(), "none.sock"), "install", "jq"); code != 1 || !strings.Contains(errOut.String(), "no clihostd is running") {
		t.Errorf("no daemon: exit %d stderr %q", code, errOut)
	}
}
