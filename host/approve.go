package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/manifest"
)

// approve applies the tool's approval class (and the operator's policy) to a validated call
// before anything of it runs: nil lets it run; otherwise the error says what is needed. The
// decision is recorded in the call's audit line.
func (h *Host) approve(b *manifest.Bundle, t *manifest.ToolEntry, input map[string]any, c Caller, opts CallOptions, rec *Invoked) *Error {
	peer := -1
	if c.Peer != nil {
		peer = c.Peer.UID
	}
	out := h.opts.Approvals.Decide(approval.Request{Bundle: b.ID(), BundleKey: b.Key(), Tool: t.Tool.ID, ToolPath: strings.Join(t.Path, " "),
		Approval: t.Tool.Approval, Mutates: t.Tool.Mutates, Runner: func() string { return runnerDigest(b, t) }, Input: input, Via: opts.Via, User: c.User, Agent: c.Agent, Workspace: c.Workspace, PeerUID: peer}, opts.Approval)
	rec.Approval = out.Record
	if out.Run {
		return nil
	}
	e := &Error{Code: out.Code, Message: out.Message, Hint: out.Hint, Category: "approval"}
	if p := out.Pending; p != nil {
		e.Approval = &ApprovalInfo{ID: p.ID, Deadline: p.Deadline, Question: p.Question(), Elicit: out.Elicit, State: p.State()}
	}
	return e
}

// ApprovalAnswered is the cli.approval audit entry: an operator answered a pending approval. The
// call that uses the answer writes its own cli.invoked line, whose approval.request_id is ID.
type ApprovalAnswered struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	CLIID  string `json:"cli_id"`
	ToolID string `json:"tool_id"`
	Answer string `json:"answer"` // approved or denied
	By     string `json:"by"`
	TS     string `json:"ts"`
}

// AnswerApproval records an operator's answer to a pending approval, by (who, for the audit log);
// the waiting caller repeats its call to use it.
func (h *Host) AnswerApproval(id string, approve bool, by string) (approval.Pending, error) {
	p, err := h.opts.Approvals.Answer(id, approve, by)
	if err != nil {
		return p, err
	}
	h.audit.write(ApprovalAnswered{Type: "cli.approval", ID: p.ID, CLIID: p.Bundle, ToolID: p.Tool, Answer: p.Answer, By: by, TS: timestamp(time.Now())})
	return p, nil
}

// runnerDigest is what an approval of t is bound to besides its input: everything that decides what
// the call runs and how — the program and its fixed arguments, the runner (argv or steps, with
// their programs, directories, environment and stdin; the output convention and limits) and the
// effective sandbox, and the secrets of its SECRETS.md it receives (slugs, variables, fields). A
// bundle reloaded with any of them changed between the question and the answer asks again.
func runnerDigest(b *manifest.Bundle, t *manifest.ToolEntry) string {
	var secrets []manifest.SecretSlot
	for _, s := range b.Secrets {
		if s.BoundTo(t) {
			secrets = append(secrets, s)
		}
	}
	data, err := json.Marshal(struct {
		Bin     string
		BinArgs []string
		Runner  *manifest.ToolRunner
		Sandbox any
		Secrets []manifest.SecretSlot `json:",omitempty"`
	}{b.CLI.Bin, b.CLI.BinArgs, t.Tool.Runner, manifest.EffectiveSandbox(b.CLI.Sandbox, t.Tool.Sandbox), secrets})
	if err != nil {
		return "unencodable: " + err.Error() // no approval given for it matches another call's
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
