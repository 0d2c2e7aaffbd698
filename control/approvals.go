package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/clihost/clihost/approval"
)

// PathApprovals lists the calls waiting for an approval (GET → []approval.Pending) and answers
// one (POST ApprovalAnswer → approval.Pending).
const PathApprovals = "/v1/approvals"

// ApprovalBackend is what a Backend offers for approvals, when it enforces them.
type ApprovalBackend interface {
	// PendingApprovals lists the calls waiting for an approval.
	PendingApprovals() []approval.Pending
	// PendingApproval returns the pending call id (approval.ErrUnknown when there is none).
	PendingApproval(id string) (approval.Pending, error)
	// AnswerApproval records an answer by (who, for the audit log) to a pending call.
	AnswerApproval(id string, approve bool, by string) (approval.Pending, error)
}

// ApprovalAnswer answers one pending approval.
type ApprovalAnswer struct {
	ID      string `json:"id"`
	Approve bool   `json:"approve"`
}

// answers reports whether peer p may see and answer pending: root and the daemon's own user
// answer every call (the operator); any other admitted user only the calls it made itself through
// this socket — never an MCP client's, whose approval is the operator's.
func (a Admission) answers(p Peer, pending approval.Pending) bool {
	return p.UID == 0 || p.UID == a.OwnerUID || (pending.PeerUID >= 0 && pending.PeerUID == p.UID)
}

// approvalHandlers adds the approval endpoints to mux when b enforces approvals.
func approvalHandlers(mux *http.ServeMux, b Backend, a Admission) {
	ab, ok := b.(ApprovalBackend)
	if !ok {
		return
	}
	mux.HandleFunc("GET "+PathApprovals, func(w http.ResponseWriter, r *http.Request) {
		p, _ := PeerOf(r.Context())
		out := []approval.Pending{}
		for _, pe := range ab.PendingApprovals() {
			if a.answers(p, pe) {
				out = append(out, pe)
			}
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("POST "+PathApprovals, func(w http.ResponseWriter, r *http.Request) {
		var req ApprovalAnswer
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "bad approval answer: "+err.Error(), "")
			return
		}
		p, _ := PeerOf(r.Context())
		target, err := ab.PendingApproval(req.ID)
		if err != nil || !a.answers(p, target) {
			// The same answer whether it exists or belongs to someone else: ids are not probed.
			writeError(w, http.StatusNotFound, "approval "+strconv.Quote(req.ID)+": "+approval.ErrUnknown.Error(),
				"clihostctl approve lists the calls you may answer; the operator (root or clihostd's user) answers MCP clients' calls")
			return
		}
		pe, err := ab.AnswerApproval(req.ID, req.Approve, peerUser(r)+" (uid "+strconv.Itoa(p.UID)+") via clihostctl")
		if err != nil {
			status := http.StatusConflict
			if errors.Is(err, approval.ErrUnknown) {
				status = http.StatusNotFound
			}
			writeError(w, status, err.Error(), "")
			return
		}
		writeJSON(w, pe)
	})
}

// Approvals lists the pending approvals this caller may answer.
func (c *Client) Approvals(ctx context.Context) ([]approval.Pending, error) {
	var out []approval.Pending
	return out, c.getJSON(ctx, PathApprovals, &out)
}

// AnswerApproval approves (or denies) a pending call.
func (c *Client) AnswerApproval(ctx context.Context, id string, approve bool) (approval.Pending, error) {
	var p approval.Pending
	resp, err := c.do(ctx, http.MethodPost, PathApprovals, ApprovalAnswer{ID: id, Approve: approve})
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	return p, json.NewDecoder(resp.Body).Decode(&p)
}
