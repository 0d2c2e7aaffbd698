package daemon

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/sandboxprobe"
)

//go:embed statuspage.html
var pageFiles embed.FS

// pageTemplates are the status page ("page") and the page that refuses a request ("refused").
var pageTemplates = template.Must(template.ParseFS(pageFiles, "statuspage.html"))

// What the page shows, and how much of it.
const (
	pageRefreshS   = 15      // the page reloads itself this often (meta refresh)
	pageRows       = 50      // the most recent calls and egress decisions shown
	pageAuditBytes = 1 << 20 // how much of the audit log's end is read for them
	shortText      = 120     // characters of a name, tool, host or code shown
	longText       = 400     // characters of a description, reason or hint shown
)

// pageView is everything the page shows, each string already made safe to show (see shown).
type pageView struct {
	Nonce      string
	RefreshS   int
	Now        string
	Daemon     daemonView
	Sandbox    sandboxView
	Bundles    []bundleView
	Calls      []callView
	Egress     []egressView
	Limits     []limitView
	EgressNote string // the egress settings in one line
	AuditNote  string // why no calls show, when the audit log could not be read
}

type daemonView struct {
	Version, User, Workspace, StateDir, Sources string
	PID, UID, Loaded, Refused                   int
	Warnings                                    []string
}

type sandboxView struct {
	State, Summary, Error, Hint, WorkspaceDenied, Checked string
	Works                                                 bool
}

type bundleView struct {
	Key, Name, Description, Install, Version, Setup, Auth, Fix, Breaker string
	Ready                                                               bool
	Tools                                                               int
}

type callView struct {
	Time, Bundle, Tool, Who, Duration, Outcome, Code, Approval string
	EgressRefused                                              int
}

type egressView struct {
	Time, Bundle, Dest, Via, Decision, Reason string
	Allowed                                   bool
}

type limitView struct{ Limit, Value, Mechanism string }

// limitOf is l as the page shows it: a limit with no mechanism to hold it is "NOT enforced on
// this host" (status says the same), not "none" beside its value.
func limitOf(l sandboxprobe.LimitMechanism) limitView {
	mech := l.Mechanism
	if mech == "none" && l.Value != "none" {
		mech = "NOT enforced on this host"
	}
	return limitView{shown(l.Limit, shortText), shown(l.Value, shortText), shown(mech, shortText)}
}

// refusedView is the refusal page's, and (its nonce only) the login's.
type refusedView struct{ Nonce, Title, Message string }

// pageView assembles the page: the daemon, its sandbox probe, each bundle as status shows it,
// the audit log's latest calls and egress decisions, and the limits.
func (d *Engine) pageView(ctx context.Context) pageView {
	ds := d.Daemon(ctx, false)
	v := pageView{RefreshS: pageRefreshS, Now: time.Now().UTC().Format(time.DateTime + "Z")}
	v.Daemon = daemonView{Version: shown(ds.Version, shortText), User: shown(ds.User, shortText), Workspace: shown(ds.Workspace, longText),
		StateDir: shown(ds.StateDir, longText), Sources: shown(strings.Join(ds.Bundles.Sources, ", "), longText),
		PID: ds.PID, UID: ds.UID, Loaded: ds.Bundles.Loaded, Refused: ds.Bundles.Refused}
	for _, w := range ds.Bundles.Warnings {
		v.Daemon.Warnings = append(v.Daemon.Warnings, shown(w, longText))
	}
	v.Sandbox = sandboxOf(ds.Sandbox)
	for _, l := range ds.Sandbox.Limits {
		v.Limits = append(v.Limits, limitOf(l))
	}
	v.EgressNote = fmt.Sprintf("egress: destination ports %s; at most %d connections a call", shown(d.cfg.EgressPorts, shortText), d.cfg.EgressMaxConns)
	if len(d.cfg.EgressAdmit) > 0 {
		v.EgressNote += "; private ranges admitted: " + shown(strings.Join(d.cfg.EgressAdmit, ", "), longText)
	}
	st := d.cur.Load()
	for _, e := range st.reg.Entries() {
		bs := d.bundleStatus(ctx, st, e)
		bv := bundleView{Key: shown(bs.Key, shortText), Name: shown(bs.Name, shortText), Install: shown(bs.Install, shortText),
			Version: shown(bs.Version, shortText), Setup: shown(bs.Setup, shortText), Auth: shown(bs.Auth, shortText),
			Fix: shown(bs.Reason, longText), Ready: bs.Ready, Tools: bs.Tools}
		if e.Bundle.CLI != nil {
			bv.Description = shown(e.Bundle.CLI.Description, longText)
		}
		if p := bs.Provider; p != nil && p.Breaker.State != control.BreakerClosed {
			bv.Breaker = shown(fmt.Sprintf("circuit breaker %s after %d failed calls (last: %s)", p.Breaker.State, p.Breaker.Failures, p.Breaker.LastError), longText)
		}
		v.Bundles = append(v.Bundles, bv)
	}
	calls, egress, err := readAuditTail(d.auditPath, pageAuditBytes)
	if err != nil {
		v.AuditNote = shown("the audit log could not be read: "+err.Error(), longText)
	}
	v.Calls, v.Egress = callRows(calls, egress), egressRows(egress)
	return v
}

// sandboxOf is the probe as the page shows it.
func sandboxOf(p sandboxprobe.Result) sandboxView {
	s := sandboxView{State: shown(p.State, shortText), Works: p.Works(), Error: shown(p.Error, longText), Hint: shown(p.Hint, longText),
		WorkspaceDenied: shown(p.WorkspaceDenied, longText)}
	if !p.Checked.IsZero() {
		s.Checked = p.Checked.UTC().Format(time.DateTime + "Z")
	}
	switch p.State {
	case sandboxprobe.Works:
		how := "from a root daemon"
		if p.UserNS {
			how = "in a user namespace"
		}
		s.Summary = shown(fmt.Sprintf("works: a sandboxed process ran as uid %d (%s), %s", p.UID, p.User, how), longText)
	case sandboxprobe.Off:
		s.Summary = "OFF: the operator ran clihostd --sandbox=off; CLIs run with the daemon's full rights"
	default:
		s.Summary = "UNAVAILABLE: every call is refused"
	}
	return s
}

// auditEntry is what the page reads of an audit line: cli.invoked and cli.egress fields only,
// never the argv template (or anything else the line holds).
type auditEntry struct {
	Type       string                     `json:"type"`
	TS         string                     `json:"ts"`
	CallID     string                     `json:"call_id"`
	CLIID      string                     `json:"cli_id"`
	Subcommand string                     `json:"subcommand"`
	UserID     string                     `json:"user_id"`
	Agent      string                     `json:"agent"`
	DurationMS int64                      `json:"duration_ms"`
	OK         bool                       `json:"ok"`
	ErrorCode  errcode.Code               `json:"error_code"`
	ExitCode   *int                       `json:"exit_code"`
	Approval   *struct{ Decision string } `json:"approval"`
	Host       string                     `json:"host"`
	Port       int                        `json:"port"`
	Allowed    bool                       `json:"allowed"`
	Reason     string                     `json:"reason"`
	Via        string                     `json:"via"`
}

// readAuditTail reads the cli.invoked and cli.egress lines of the last limit bytes of the audit log
// at path (its current file: what was rotated away is not shown), oldest first. A missing log
// has none.
func readAuditTail(path string, limit int64) (calls, egress []auditEntry, err error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	off := max(st.Size()-limit, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return nil, nil, err
	}
	text := string(data)
	if off > 0 { // the first line is cut: skip it
		_, text, _ = strings.Cut(text, "\n")
	}
	for line := range strings.Lines(text) {
		var e auditEntry
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		switch e.Type {
		case "cli.invoked":
			calls = append(calls, e)
		case "cli.egress":
			egress = append(egress, e)
		}
	}
	return calls, egress, nil
}

// refusals are the error codes of calls clihost refused before their CLI ran.
var refusals = []errcode.Code{errcode.InputInvalid, errcode.PathDenied, errcode.PathTraversalBlocked, errcode.WorkspaceDenied,
	errcode.BinaryDenied, errcode.ApprovalRequired, errcode.ApprovalDenied, errcode.ApprovalInvalid, errcode.ProviderUnavailable}

// callRows are the last pageRows calls, newest first, each with the egress connections refused
// during it.
func callRows(calls, egress []auditEntry) []callView {
	refused := map[string]int{}
	for _, e := range egress {
		if !e.Allowed {
			refused[e.CallID]++
		}
	}
	var out []callView
	for _, c := range slices.Backward(calls) {
		if len(out) == pageRows {
			break
		}
		cv := callView{Time: when(c.TS), Bundle: shown(c.CLIID, shortText), Tool: shown(c.Subcommand, shortText),
			Duration: strconv.FormatInt(c.DurationMS, 10) + " ms", Code: shown(string(c.ErrorCode), shortText), EgressRefused: refused[c.CallID]}
		cv.Who = shown(c.UserID, shortText)
		if c.Agent != "" {
			cv.Who = shown("agent "+c.Agent, shortText)
		}
		if c.Approval != nil {
			cv.Approval = shown(c.Approval.Decision, shortText)
		}
		switch {
		case c.OK:
			cv.Outcome = "ok"
		case slices.Contains(refusals, c.ErrorCode) || cv.Approval == "denied":
			cv.Outcome = "refused"
		default:
			cv.Outcome = "failed"
			if c.ExitCode != nil {
				cv.Code += fmt.Sprintf(" (exit %d)", *c.ExitCode)
			}
		}
		out = append(out, cv)
	}
	return out
}

// egressRows are the last pageRows egress decisions, newest first.
func egressRows(egress []auditEntry) []egressView {
	var out []egressView
	for _, e := range slices.Backward(egress) {
		if len(out) == pageRows {
			break
		}
		dest := e.Host
		if e.Port != 0 {
			dest += ":" + strconv.Itoa(e.Port)
		}
		ev := egressView{Time: when(e.TS), Bundle: shown(e.CLIID, shortText), Dest: shown(dest, shortText), Via: shown(e.Via, shortText),
			Decision: "refused", Reason: shown(e.Reason, longText), Allowed: e.Allowed}
		if e.Allowed {
			ev.Decision = "allowed"
		}
		out = append(out, ev)
	}
	return out
}

// when is an audit timestamp as the page shows it (UTC, to the second).
func when(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return shown(ts, shortText)
	}
	return t.UTC().Format(time.DateTime + "Z")
}

// shown is s as the page shows it: each byte of invalid UTF-8 as \xNN and each character a
// person cannot see or a terminal would act on (controls such as ESC, bidi and zero-width
// characters, tags, spaces other than U+0020) as a \u escape, cut after limit characters with the
// number of bytes left. The template escapes HTML on top of this.
func shown(s string, limit int) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		if n == limit {
			fmt.Fprintf(&b, "…(%d bytes more)", len(s)-i)
			break
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Zl, unicode.Zp, unicode.Variation_Selector),
			unicode.Is(unicode.Zs, r) && r != ' ':
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
		i += size
		n++
	}
	return b.String()
}
