package clihost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
)

// Result is a call's result, the envelope clihostd returns to its agents: OK with the parsed
// Value and the exit code, or an Error with a code and a hint; MS is the call's duration.
type Result = callresult.Envelope

// CallOptions adjust one call (the zero value is a plain call).
type CallOptions struct {
	// Via names the front end for approval rules (approval.ViaCLI, the default: a call made in
	// this process; approval_required then names Host.AnswerApproval in its hint).
	Via string
	// Progress is called about every second while the CLI runs, with the time elapsed.
	Progress func(elapsed time.Duration)
	// Debug adds to a failed call's error everything the CLI printed (Error.Detail.Debug, secrets
	// redacted): what a bundle's author needs when its output does not parse.
	Debug bool
}

// Call runs one tool of a bundle, as clihostd runs it for an agent: the input is checked against
// the tool's input schema (defaults filled in), the argv is built from the tool's template
// without a shell (an input value never becomes an option), the approval class and policy are
// applied, the CLI is version-checked, and it runs in the kernel sandbox in the Host's workspace.
//
// tool is the TOOL.md id, the command path ("pr list"), its dotted form or the MCP name. input is
// the tool's input: anything encoding/json encodes as an object (a map, a struct), or the JSON
// itself as json.RawMessage or []byte; it is decoded as clihostd decodes an agent's (every digit
// of a number kept).
//
// The Result is returned in every case; when it is not OK the error is a *Error with its code
// (input_invalid, approval_required, not_installed, the CLI's own failure, …).
func (h *Host) Call(ctx context.Context, bundle, tool string, input any, o CallOptions) (Result, error) {
	raw, err := inputJSON(input)
	if err == nil {
		var in map[string]any
		if in, err = argv.DecodeInput(raw); err == nil {
			return h.call(ctx, bundle, tool, in, o)
		}
	}
	env := Result{Error: &callresult.Error{Code: errcode.InputInvalid, Message: "input: " + err.Error(), Hint: "pass the tool's input as a JSON object"}}
	return env, newError(env.Error)
}

// call runs a decoded input.
func (h *Host) call(ctx context.Context, bundle, tool string, input map[string]any, o CallOptions) (Result, error) {
	start := time.Now()
	b, err := h.bundle(bundle)
	if err != nil {
		var e *Error
		env := Result{MS: time.Since(start).Milliseconds()}
		if errors.As(err, &e) {
			env.Error = e.Detail
		}
		return env, err
	}
	embedder := o.Via == "" // clihostctl names its front end; its person at a terminal is asked
	if embedder {
		o.Via = approval.ViaCLI
	}
	env := h.h.Call(ctx, b, tool, input, h.caller(), host.CallOptions{Via: o.Via, Progress: o.Progress, Debug: o.Debug})
	if env.OK {
		return env, nil
	}
	h.forEmbedder(b, env.Error)
	if e := env.Error; embedder && e.Code == errcode.ApprovalRequired && e.Approval != nil {
		e.Hint = fmt.Sprintf("once a person agrees, call Host.AnswerApproval(%q, true, who) and repeat the same call; "+
			"or allow the tool in the approval policy (WithApprovalPolicy)", e.Approval.ID)
	}
	return env, newError(env.Error)
}

// inputJSON is input as JSON text.
func inputJSON(input any) ([]byte, error) {
	switch v := input.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	}
	return json.Marshal(input)
}

// AnswerApproval approves (or denies) a call that failed with approval_required: id is its
// Error.Detail.Approval.ID, by who answered (for the audit log). Repeat the call to use it.
func (h *Host) AnswerApproval(id string, approve bool, by string) error {
	_, err := h.h.AnswerApproval(id, approve, by)
	return err
}
