// Package callresult is a tool call's result as every front end sends it: the envelope
// {ok, value, exit_code, ms} or {ok:false, error:{code, message, hint, ...}, ms} (the AIP-29
// ADAPTER's shape). It is a leaf: package host builds these values, package control carries them
// over the control API, and clihostctl reads them, all with one definition and one JSON.
package callresult

import (
	"encoding/json"
	"time"

	"github.com/clihost/clihost/errcode"
)

// Envelope is a call's result.
type Envelope struct {
	OK        bool   `json:"ok"`
	Value     any    `json:"value"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Truncated bool   `json:"truncated,omitempty"` // the output was larger than the capture limit and was cut
	Error     *Error `json:"error,omitempty"`
	MS        int64  `json:"ms"`
	// Warnings are what the caller must know about how the call ran (the sandbox was off).
	Warnings []string `json:"warnings,omitempty"`
}

// MarshalJSON leaves out value on failures and keeps it (even null) on success.
func (e Envelope) MarshalJSON() ([]byte, error) {
	type plain Envelope
	if e.OK {
		return json.Marshal(plain(e))
	}
	type failure struct {
		plain
		Value any `json:"value,omitempty"`
	}
	return json.Marshal(failure{plain: plain(e)})
}

// Error describes a failed call or request: Code is one of package errcode's codes (docs/errors.md
// lists them) or the name a bundle gives its CLI's exit status; Hint says what to do.
type Error struct {
	Code         errcode.Code `json:"code"`
	Message      string       `json:"message"`
	Hint         string       `json:"hint,omitempty"`
	ExitCode     *int         `json:"exit_code,omitempty"`
	Stderr       string       `json:"stderr,omitempty"`
	Pointer      string       `json:"pointer,omitempty"` // JSON pointer of the offending input (input_invalid)
	Category     string       `json:"category,omitempty"`
	Retryable    bool         `json:"retryable,omitempty"`
	Fallback     bool         `json:"fallback,omitempty"`
	RetryAfterMS int64        `json:"retry_after_ms,omitempty"`
	// PartialStdout is, for a call stopped at its time limit (code timeout), what the command had
	// printed on stdout by then (secrets redacted): an agent CLI's partial answer, or the retry
	// notices that say what it was waiting for.
	PartialStdout string `json:"partial_stdout,omitempty"`
	// Approval is the pending approval an approval_required call waits for.
	Approval *ApprovalInfo `json:"approval,omitempty"`
	// Debug is, for a call made with debugging on (clihostctl call --debug) that failed after its
	// command ran, everything the command printed, secrets redacted: an author sees what the CLI
	// printed when its output did not parse or did not match the outputs schema.
	Debug *Streams `json:"debug,omitempty"`
}

// Streams are a command's standard output and error as text, each cut at MaxDebugBytes.
type Streams struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated,omitempty"` // a stream was cut (at the capture limit or MaxDebugBytes)
}

// MaxDebugBytes bounds each stream of Error.Debug.
const MaxDebugBytes = 256 << 10

// ApprovalInfo is, in an approval_required error, the pending approval the call waits for: an
// operator answers it (clihostctl approve, the control API's AnswerApproval) and the caller
// repeats its call.
type ApprovalInfo struct {
	ID       string    `json:"id"`
	Deadline time.Time `json:"deadline"`
	Question string    `json:"question"`
	// Elicit says the operator's policy lets an MCP front end ask its client. Never on the wire.
	Elicit bool `json:"-"`
	// State is the signed requestState an MCP front end hands its client. Never on the wire: no
	// result, whether a front end's or the control API's, carries it.
	State string `json:"-"`
}
