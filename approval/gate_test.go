package approval

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func commitReq(msg string) Request {
	return Request{Bundle: "git", BundleKey: "git@1", Tool: "commit", ToolPath: "commit", Approval: "on-mutate",
		Mutates: []string{"workspace:.git/**"}, Input: map[string]any{"message": msg}, Via: ViaMCP, User: "agent", Workspace: "/w", PeerUID: -1}
}

// clock is a gate's time, moved by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestGate(p *Policy) (*Gate, *clock) {
	g := NewGate(p)
	c := &clock{t: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	g.now = c.now
	return g, c
}

func TestClasses(t *testing.T) {
	p := &Policy{Policies: map[string]Decision{"release": Deny, "reads": Allow}}
	for _, tc := range []struct {
		approval string
		mutates  []string
		want     Decision
	}{
		{"", nil, Allow},
		{"auto", []string{"x"}, Allow}, // lint refuses auto with mutates; the class is what it says
		{"always", nil, Ask},
		{"on-mutate", nil, Allow},
		{"on-mutate", []string{"workspace:./**"}, Ask},
		{"policy:release", nil, Deny},
		{"policy:reads", nil, Allow},
		{"policy:unknown", nil, Ask},
		{"sometimes", nil, Ask},
	} {
		if got := p.ClassOf(tc.approval, tc.mutates).Needed; got != tc.want {
			t.Errorf("ClassOf(%q, %v) = %s, want %s", tc.approval, tc.mutates, got, tc.want)
		}
	}
}

func TestAutoRunsWithoutRecord(t *testing.T) {
	g, _ := newTestGate(nil)
	req := commitReq("x")
	req.Approval, req.Mutates = "auto", nil
	if out := g.Decide(req, nil); !out.Run || out.Record != nil {
		t.Fatalf("auto: %+v", out)
	}
}

func TestElicitedApprovalRunsOnceForTheSameCall(t *testing.T) {
	g, _ := newTestGate(nil)
	out := g.Decide(commitReq("fix"), nil)
	if out.Run || out.Code != "approval_required" || out.Pending == nil || !out.Elicit {
		t.Fatalf("first call: %+v", out)
	}
	if !strings.Contains(out.Pending.Question(), `{"message":"fix"}`) {
		t.Errorf("question does not show the arguments: %s", out.Pending.Question())
	}
	state := out.Pending.State()

	// The same state for other arguments: refused, and the approval is still usable.
	if o := g.Decide(commitReq("rm -rf"), &Answer{State: state, Approved: true}); o.Run || o.Code != "approval_invalid" {
		t.Fatalf("other arguments: %+v", o)
	}
	other := commitReq("fix")
	other.User = "mallory"
	if o := g.Decide(other, &Answer{State: state, Approved: true}); o.Run || o.Code != "approval_invalid" {
		t.Fatalf("other caller: %+v", o)
	}
	other = commitReq("fix")
	other.Via = ViaStdio
	if o := g.Decide(other, &Answer{State: state, Approved: true}); o.Run || o.Code != "approval_invalid" {
		t.Fatalf("other front end: %+v", o)
	}
	other = commitReq("fix")
	other.Runner = func() string { return "commit --amend" }
	if o := g.Decide(other, &Answer{State: state, Approved: true}); o.Run || o.Code != "approval_invalid" {
		t.Fatalf("what the tool runs changed: %+v", o)
	}
	o := g.Decide(commitReq("fix"), &Answer{State: state, Approved: true, By: "client"})
	if !o.Run || o.Record == nil || o.Record.Decision != "approved" || o.Record.By != "client" || o.Record.RequestID != out.Pending.ID {
		t.Fatalf("approved: %+v %+v", o, o.Record)
	}
	// Replayed: refused.
	if o := g.Decide(commitReq("fix"), &Answer{State: state, Approved: true}); o.Run || o.Code != "approval_invalid" || !strings.Contains(o.Message, "already used") {
		t.Fatalf("replay: %+v", o)
	}
	// A new call asks again, with a new id.
	if o := g.Decide(commitReq("fix"), nil); o.Code != "approval_required" || o.Pending.ID == out.Pending.ID {
		t.Fatalf("after use: %+v", o)
	}
}

func TestAlteredForeignAndExpiredStatesRefused(t *testing.T) {
	g, c := newTestGate(nil)
	state := g.Decide(commitReq("x"), nil).Pending.State()
	parts := strings.Split(state, ".")
	flipped := []byte(parts[1])
	flipped[3] ^= 1
	for name, s := range map[string]string{
		"altered body": parts[0] + "." + string(flipped) + "." + parts[2],
		"altered mac":  parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2])),
		"garbage":      "hello",
		"empty parts":  "ca1..",
	} {
		if o := g.Decide(commitReq("x"), &Answer{State: s, Approved: true}); o.Run || o.Code != "approval_invalid" {
			t.Errorf("%s: %+v", name, o)
		}
	}
	other, _ := newTestGate(nil) // another daemon run: another key
	if o := other.Decide(commitReq("x"), &Answer{State: state, Approved: true}); o.Run || o.Code != "approval_invalid" {
		t.Errorf("foreign gate: %+v", o)
	}
	c.t = c.t.Add(DefaultTTL + time.Second)
	if o := g.Decide(commitReq("x"), &Answer{State: state, Approved: true}); o.Run || o.Code != "approval_invalid" || !strings.Contains(o.Message, "expired") {
		t.Errorf("expired: %+v", o)
	}
}

func TestDeclinedIsDenied(t *testing.T) {
	g, _ := newTestGate(nil)
	state := g.Decide(commitReq("x"), nil).Pending.State()
	o := g.Decide(commitReq("x"), &Answer{State: state, Approved: false, By: "client"})
	if o.Run || o.Code != "approval_denied" || o.Record.Decision != "denied" {
		t.Fatalf("declined: %+v", o)
	}
}

func TestOperatorAnswer(t *testing.T) {
	g, _ := newTestGate(nil)
	p := g.Decide(commitReq("x"), nil).Pending
	if again := g.Decide(commitReq("x"), nil).Pending; again.ID != p.ID {
		t.Fatalf("the same call made a second pending approval: %s, %s", p.ID, again.ID)
	}
	if _, err := g.Answer("ap-nope", true, "root"); err != ErrUnknown {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := g.Answer(p.ID, true, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Answer(p.ID, false, "root"); err == nil {
		t.Fatal("a second answer was taken")
	}
	// Different arguments do not use it.
	if o := g.Decide(commitReq("y"), nil); o.Run {
		t.Fatalf("other arguments ran on the approval: %+v", o)
	}
	o := g.Decide(commitReq("x"), nil)
	if !o.Run || o.Record.By != "root" || o.Record.RequestID != p.ID {
		t.Fatalf("approved call: %+v", o)
	}
	if o := g.Decide(commitReq("x"), nil); o.Run {
		t.Fatal("an approval was used twice")
	}
	// A denial.
	p2 := g.Decide(commitReq("z"), nil).Pending
	if _, err := g.Answer(p2.ID, false, "root"); err != nil {
		t.Fatal(err)
	}
	if o := g.Decide(commitReq("z"), nil); o.Run || o.Code != "approval_denied" {
		t.Fatalf("denied call: %+v", o)
	}
}

func TestPolicyRules(t *testing.T) {
	p, err := ParsePolicy([]byte(`
rules:
  - {bundle: git, tool: commit, via: [control], decision: allow}
  - {bundle: git, tool: "st*", decision: deny}
  - {bundle: "*", user: ci, decision: allow}
policies: {release: ask}
elicitation: false
`))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := newTestGate(p)
	req := commitReq("x")
	if o := g.Decide(req, nil); o.Run || o.Elicit {
		t.Fatalf("mcp commit (rule is for control only; elicitation off): %+v", o)
	}
	req.Via = ViaControl
	if o := g.Decide(req, nil); !o.Run || o.Record == nil || !strings.Contains(o.Record.By, "rule 1") {
		t.Fatalf("control commit: %+v", o)
	}
	st := commitReq("x")
	st.Tool, st.ToolPath, st.Approval = "status", "status", "auto"
	if o := g.Decide(st, nil); o.Run || o.Code != "approval_denied" {
		t.Fatalf("a deny rule narrows an auto tool: %+v", o)
	}
	ci := commitReq("x")
	ci.User = "ci"
	if o := g.Decide(ci, nil); !o.Run {
		t.Fatalf("user rule: %+v", o)
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown key":  "rules: [{bundle: git, decison: allow}]",
		"bad decision": "rules: [{bundle: git, decision: yes}]",
		"no bundle":    "rules: [{tool: x, decision: allow}]",
		"bad via":      "rules: [{bundle: git, via: [web], decision: allow}]",
		"bad pattern":  "rules: [{bundle: '[', decision: allow}]",
		"alias":        "a: &x {bundle: git, decision: allow}\nrules: [*x]",
		"bad ref":      "policies: {r: maybe}",
		"two docs":     "rules: [{bundle: git, decision: allow}]\n---\nrules: [{bundle: '*', decision: deny}]\n",
		"no decision":  "rules: [{bundle: git}, {bundle: gh}]",
	} {
		if _, err := ParsePolicy([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Rules are counted from 1 in every message, as the daemon's log and the audit line count them.
	if _, err := ParsePolicy([]byte("rules: [{bundle: git, decision: allow}, {bundle: gh}]")); err == nil || !strings.Contains(err.Error(), "rule 2: decision is required") {
		t.Errorf("missing decision: %v", err)
	}
	if p, err := ParsePolicy(nil); err != nil || len(p.Rules) != 0 || !p.ElicitationAllowed() {
		t.Errorf("empty: %+v %v", p, err)
	}
}

func TestLoadPolicyFile(t *testing.T) {
	dir := t.TempDir()
	if p, err := LoadPolicy(filepath.Join(dir, "absent.yaml")); err != nil || len(p.Rules) != 0 {
		t.Fatalf("absent: %+v %v", p, err)
	}
	f := filepath.Join(dir, "approvals.yaml")
	if err := os.WriteFile(f, []byte("rules: [{bundle: git, decision: allow}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(f)
	if err != nil || p.Source != f || len(p.Rules) != 1 {
		t.Fatalf("load: %+v %v", p, err)
	}
	if err := os.Chmod(f, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(f); err == nil || !strings.Contains(err.Error(), "writable") {
		t.Fatalf("world-writable policy: %v", err)
	}
	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(f, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPolicy(f); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("policy owned by another user: %v", err)
		}
	}
	if _, err := LoadPolicy(dir); err == nil {
		t.Fatal("a directory was read as a policy")
	}
}

func TestDisplayInputEscapes(t *testing.T) {
	s := displayInput(map[string]any{"m": "a\x1b[2Jb\u202ec\n", "n": json.Number("12345678901234567")})
	if strings.ContainsAny(s, "\x1b\u202e\n") || !strings.Contains(s, "12345678901234567") {
		t.Fatalf("display: %q", s)
	}
	long := displayInput(map[string]any{"m": strings.Repeat("é", 5000)})
	if len(long) > maxDisplay+40 || !strings.Contains(long, "bytes more") {
		t.Fatalf("long display: %d bytes", len(long))
	}
}

// An operator's `clihostctl approve --deny` of a call an MCP client was asked about is final: the
// client's later "accept" with the requestState it holds does not run the call — not even after
// a flood of other calls pushed the refused one out of the pending list.
func TestOperatorDenialBeatsTheClientsAnswer(t *testing.T) {
	for _, flood := range []bool{false, true} {
		g, c := newTestGate(nil)
		out := g.Decide(commitReq("push --force"), nil)
		if _, err := g.Answer(out.Pending.ID, false, "root (uid 0) via clihostctl"); err != nil {
			t.Fatal(err)
		}
		if flood {
			for i := range maxPending {
				c.t = c.t.Add(time.Millisecond)
				g.Decide(commitReq(fmt.Sprint("flood ", i)), nil)
			}
			if _, err := g.Get(out.Pending.ID); err == nil {
				t.Fatal("the refused call is still pending after the flood")
			}
		}
		o := g.Decide(commitReq("push --force"), &Answer{State: out.Pending.State(), Approved: true, By: "client"})
		if o.Run || o.Code != "approval_denied" || o.Record == nil || !strings.Contains(o.Record.By, "root") {
			t.Fatalf("flood %v: the client's accept overrode the operator's denial: %+v %+v", flood, o, o.Record)
		}
	}
	// The plain retry learns the denial first; the client's accept after it is still a denial.
	g, _ := newTestGate(nil)
	out := g.Decide(commitReq("push --force"), nil)
	if _, err := g.Answer(out.Pending.ID, false, "root (uid 0) via clihostctl"); err != nil {
		t.Fatal(err)
	}
	if o := g.Decide(commitReq("push --force"), nil); o.Code != "approval_denied" {
		t.Fatalf("plain retry: %+v", o)
	}
	if o := g.Decide(commitReq("push --force"), &Answer{State: out.Pending.State(), Approved: true}); o.Run || o.Code != "approval_denied" {
		t.Fatalf("accept after the plain retry: %+v", o)
	}
}

// With elicitation: false (after a reload) a requestState an MCP client was given before does not
// approve the call any more.
func TestElicitationOffRefusesClientAnswers(t *testing.T) {
	g, _ := newTestGate(nil)
	state := g.Decide(commitReq("x"), nil).Pending.State()
	off := false
	g.SetPolicy(&Policy{Elicitation: &off})
	if o := g.Decide(commitReq("x"), &Answer{State: state, Approved: true}); o.Run || o.Code != "approval_invalid" {
		t.Fatalf("elicitation off: %+v", o)
	}
}

// The question shows every argument: one long value does not push the others out of it, and
// invisible characters (zero-width, soft hyphen, byte order mark, tag characters) are shown as
// escapes, so two different calls never look the same.
func TestDisplayInputShowsEveryArgument(t *testing.T) {
	s := displayInput(map[string]any{"a": strings.Repeat("harmless ", 1000), "z": "--force"})
	if !strings.Contains(s, `"z":"--force"`) || len(s) > maxDisplay+40 {
		t.Errorf("a long value hides the next argument (%d bytes): …%s", len(s), s[max(0, len(s)-80):])
	}
	for _, r := range []string{"\u200b", "\u00ad", "\ufeff", "\U000E0041", "\u061c", "\u2060"} {
		s := displayInput(map[string]any{"branch": "ma" + r + "in"})
		if strings.Contains(s, r) || strings.Contains(s, `"main"`) || s == displayInput(map[string]any{"branch": "ma?in"}) {
			t.Errorf("%U: shown as %q", []rune(r)[0], s)
		}
	}
}

// Whoever may replace the policy file approves every call: a folder on its path (or on its
// symlink's target's path) that others may write is refused — a sticky folder (/tmp) only holds
// it when the entry in it is root's or the daemon's.
func TestLoadPolicyRefusesAnInsecureFolder(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(open, "approvals.yaml")
	if err := os.WriteFile(f, []byte("rules: [{bundle: git, decision: deny}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(f, link); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{f, link} {
		if _, err := LoadPolicy(name); err != nil {
			t.Fatalf("%s in a safe folder: %v", name, err)
		}
	}
	if err := os.Chmod(open, 0o777); err != nil { // chmod: not subject to umask
		t.Fatal(err)
	}
	for _, name := range []string{f, link} {
		if _, err := LoadPolicy(name); err == nil || !strings.Contains(err.Error(), open) {
			t.Errorf("%s in a world-writable folder: %v", name, err)
		}
	}
	if err := os.Chmod(open, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(f); err != nil {
		t.Errorf("a sticky folder, the file root's: %v", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(open, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(open, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPolicy(f); err == nil || !strings.Contains(err.Error(), "uid 65534") {
			t.Errorf("a folder another user owns: %v", err)
		}
	}
}

// A bundle's own words in the question (its mutates) cannot steer the terminal or hide the
// arguments: control and invisible characters are escaped in the message and the question.
func TestReasonFromTheBundleIsEscaped(t *testing.T) {
	g, _ := newTestGate(nil)
	req := commitReq("x")
	req.Mutates = []string{"workspace:./**\x1b[2J\r\x1b[1AAllow\u202e"}
	out := g.Decide(req, nil)
	for _, s := range []string{out.Message, out.Pending.Question(), out.Pending.Reason} {
		if strings.ContainsAny(s, "\x1b\r\u202e") || !strings.Contains(s, `\u001b[2J`) {
			t.Errorf("not escaped: %q", s)
		}
	}
}

// The question and the pending list name the workspace the call runs in (a person approves
// "git add" in one repository, not in any), escaped: a workspace's name is the caller's choice.
func TestPendingNamesTheWorkspace(t *testing.T) {
	g, _ := newTestGate(nil)
	req := commitReq("x")
	req.Workspace = "/home/u/repo\x1b[2J\u202e"
	out := g.Decide(req, nil)
	if out.Pending.Workspace != `/home/u/repo\u001b[2J\u202e` || !strings.Contains(out.Pending.Question(), `in /home/u/repo\u001b[2J\u202e?`) {
		t.Fatalf("workspace %q; question %q", out.Pending.Workspace, out.Pending.Question())
	}
}

// One caller cannot push the others' pending calls out: a caller (front end, user, socket uid)
// holds at most maxPerCaller of them, its own oldest going first.
func TestFloodEvictsOnlyTheFloodersCalls(t *testing.T) {
	g, c := newTestGate(nil)
	mcpCall := g.Decide(commitReq("mcp"), nil).Pending
	if _, err := g.Answer(mcpCall.ID, true, "root"); err != nil {
		t.Fatal(err)
	}
	var first string
	for i := range maxPending {
		c.t = c.t.Add(time.Millisecond)
		req := commitReq(fmt.Sprint("flood ", i))
		req.Via, req.User, req.PeerUID = ViaControl, "mallory", 1000
		if p := g.Decide(req, nil).Pending; i == 0 {
			first = p.ID
		}
	}
	if _, err := g.Get(mcpCall.ID); err != nil {
		t.Fatalf("another caller's flood pushed the MCP call out: %v", err)
	}
	if _, err := g.Get(first); err == nil {
		t.Fatal("the flooder's oldest call is still pending")
	}
	if o := g.Decide(commitReq("mcp"), nil); !o.Run {
		t.Fatalf("the operator's approval was lost: %+v", o)
	}
}

// A policy:REF tool the policy's policies.REF allows runs, and the audit says which policy let it.
func TestPolicyRefAllowIsAudited(t *testing.T) {
	g, _ := newTestGate(&Policy{Policies: map[string]Decision{"release": Allow}, Source: "/etc/clihost/approvals.yaml"})
	req := commitReq("x")
	req.Approval = "policy:release"
	o := g.Decide(req, nil)
	if !o.Run || o.Record == nil || o.Record.Decision != "approved" || !strings.Contains(o.Record.By, "policies.release") {
		t.Fatalf("%+v %+v", o, o.Record)
	}
}

// A rule names a tool by any name a call may use — TOOL.md id, command path, dotted path, MCP
// name — so a deny written as the operator's MCP client shows the tool (pr_merge) holds.
func TestRuleMatchesEveryNameOfATool(t *testing.T) {
	for _, name := range []string{"gh.pr-merge", "pr merge", "pr.merge", "pr_merge", "pr_*", "pr.*"} {
		g, _ := newTestGate(&Policy{Rules: []Rule{{Bundle: "gh", Tool: name, Decision: Deny}}})
		req := Request{Bundle: "gh", BundleKey: "gh@1", Tool: "gh.pr-merge", ToolPath: "pr merge", Approval: "auto", Via: ViaMCP, PeerUID: -1}
		if o := g.Decide(req, nil); o.Run || o.Code != "approval_denied" {
			t.Errorf("rule tool %q: %+v", name, o)
		}
	}
}

// A rule may name the bundle as id@major too (as the MCP endpoint /mcp/gh@2 does).
func TestRuleMatchesTheBundleKey(t *testing.T) {
	for _, name := range []string{"git", "git@1", "git@*"} {
		g, _ := newTestGate(&Policy{Rules: []Rule{{Bundle: name, Decision: Deny}}})
		req := commitReq("x")
		req.Approval = "auto"
		if o := g.Decide(req, nil); o.Run || o.Code != "approval_denied" {
			t.Errorf("rule bundle %q: %+v", name, o)
		}
	}
	g, _ := newTestGate(&Policy{Rules: []Rule{{Bundle: "git@2", Decision: Deny}}})
	if o := g.Decide(commitReq("x"), nil); o.Code != "approval_required" {
		t.Errorf("another major's rule decided: %+v", o)
	}
}

// With elicitation: false a clihostctl mcp client is not told to switch to a client that asks:
// no client may, so the hint names the policy.
func TestStdioHintWithElicitationOff(t *testing.T) {
	off := false
	g, _ := newTestGate(&Policy{Elicitation: &off})
	req := commitReq("x")
	req.Via = ViaStdio
	o := g.Decide(req, nil)
	if strings.Contains(o.Hint, "use one that does") || !strings.Contains(o.Hint, "elicitation: false") {
		t.Errorf("hint: %s", o.Hint)
	}
}

func TestUnmatchedRules(t *testing.T) {
	p, err := ParsePolicy([]byte(`rules:
  - { bundle: git, tool: status, decision: deny }
  - { bundle: git, tool: stauts, decision: deny }
  - { bundle: gti, decision: deny }
  - { bundle: "g*", tool: pr_merge, decision: allow }
  - { bundle: gh@1, tool: pr.merge, token: mybto, decision: allow }
  - { bundle: "*", decision: ask }
`))
	if err != nil {
		t.Fatal(err)
	}
	tools := []Request{
		{Bundle: "git", BundleKey: "git@1", Tool: "git.status", ToolPath: "status"},
		{Bundle: "gh", BundleKey: "gh@1", Tool: "gh.pr-merge", ToolPath: "pr merge"},
	}
	got := strings.Join(p.Unmatched(tools, []string{"default", "mybot"}), "\n")
	for _, want := range []string{`rule 2 (bundle git, tool stauts, deny): tool "stauts" matches no tool of bundle "git"`,
		`rule 3 (bundle gti, deny): bundle "gti" matches no loaded bundle`, `rule 5 (bundle gh@1, tool pr.merge, token mybto, allow): token "mybto"`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 3 {
		t.Errorf("want 3 problems (rules 1, 4 and 6 match), got %d:\n%s", n, got)
	}
	if len(p.Unmatched(tools, nil)) != 2 {
		t.Error("tokens were checked although none were given")
	}
}
