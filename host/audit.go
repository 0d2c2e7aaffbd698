package host

import (
	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/errcode"

	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"
)

// Invoked is the cli.invoked audit entry (AIP-29 ADAPTER): the argv template and the number of
// arguments, never the arguments, input values or output.
type Invoked struct {
	Type          string       `json:"type"`
	CallID        string       `json:"call_id"`
	CLIID         string       `json:"cli_id"`
	CLIVersion    string       `json:"cli_version"`
	BinaryVersion string       `json:"binary_version,omitempty"`
	Subcommand    string       `json:"subcommand"`
	ToolID        string       `json:"tool_id"`
	UserID        string       `json:"user_id,omitempty"`
	Agent         string       `json:"agent,omitempty"` // the agent token of an MCP call over HTTP
	WorkspaceID   string       `json:"workspace_id,omitempty"`
	ArgvTemplate  string       `json:"argv_template"`
	ArgvCount     int          `json:"argv_count"`
	ExitCode      *int         `json:"exit_code"`
	DurationMS    int64        `json:"duration_ms"`
	AuthState     string       `json:"auth_state"`
	OK            bool         `json:"ok"`
	ErrorCode     errcode.Code `json:"error_code,omitempty"`
	// Approval is how the call's approval was decided: who approved what, when (absent when the
	// tool needed none and no policy rule spoke).
	Approval *approval.Record `json:"approval,omitempty"`
	TS       string           `json:"ts"`
}

// EgressDecision is the cli.egress audit entry: one connection or DNS answer the egress proxy
// allowed or refused during the call CallID (the cli.invoked entry's call_id).
type EgressDecision struct {
	Type    string `json:"type"`
	CallID  string `json:"call_id"`
	CLIID   string `json:"cli_id"`
	Host    string `json:"host"`
	Port    int    `json:"port,omitempty"`
	Addr    string `json:"addr,omitempty"` // the address dialed, when allowed
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	Via     string `json:"via,omitempty"` // connect, http, socks5, dns, capture
	TS      string `json:"ts"`
}

// AuditMaxSize and AuditKeep are the audit log's default rotation: a file grows to 64 MiB, then
// becomes audit.jsonl.1, and five rotated files are kept (clihostd --audit-max-size,
// --audit-keep; see internal/rotate).
const (
	AuditMaxSize = 64 << 20
	AuditKeep    = 5
)

// newCallID returns a random identifier that ties a call's audit entries together.
func newCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "c_" + hex.EncodeToString(b[:])
}

// SweepWarning is the cli.sweep audit entry: one file the sandbox's sweep removed or neutralised
// after a process of the bundle ran: a call's (CallID, the cli.invoked entry's call_id; its result
// carries the same warnings) or one of the bundle's own commands outside a call.
type SweepWarning struct {
	Type    string `json:"type"`
	CallID  string `json:"call_id,omitempty"`
	CLIID   string `json:"cli_id"`
	Warning string `json:"warning"`
	TS      string `json:"ts"`
}

// AuthExpired is the cli.auth_expired audit entry.
type AuthExpired struct {
	Type   string `json:"type"`
	CLIID  string `json:"cli_id"`
	UserID string `json:"user_id,omitempty"`
	TS     string `json:"ts"`
}

// auditLog writes one JSON object a line; a nil writer discards. It aggregates each call's
// egress decisions (see egressaudit.go).
type auditLog struct {
	mu sync.Mutex
	w  io.Writer

	cmu   sync.Mutex             // guards calls; taken before mu
	calls map[string]*callEgress // by call id, while the call runs
}

func (a *auditLog) write(v any) {
	if a == nil || a.w == nil {
		return
	}
	line, err := json.Marshal(v)
	if err != nil {
		return
	}
	a.writeLine(line)
}

// writeLine writes one marshalled record and its newline in one Write.
func (a *auditLog) writeLine(line []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _ = a.w.Write(append(line, '\n'))
}

// workspaceID names a workspace in audit lines without writing its path.
func workspaceID(dir string) string {
	if dir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(dir))
	return "w_" + hex.EncodeToString(sum[:6])
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func templateText(raw []string) string { return strings.Join(raw, " ") }
