package host

import (
	"encoding/json"

	"github.com/clihost/clihost/errcode"
)

// Envelope is a call's result in the AIP-29 ADAPTER's shape: {ok:true, value, exit_code, ms} or
// {ok:false, error:{code, message, hint, exit_code, stderr}, ms}.
type Envelope struct {
	OK        bool   `json:"ok"`
	Value     any    `json:"value"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Truncated bool   `json:"truncated,omitempty"` // the output was larger than the capture limit and was cut
	Error     *Error `json:"error,omitempty"`
	MS        int64  `json:"ms"`
	// Warnings are what the caller must know about how the call ran (SandboxOffWarning).
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

// Error describes a failed call. Code is one of package errcode's codes (docs/errors.md lists
// them) or the name the bundle gives the CLI's exit code.
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
	// Approval is the pending approval an approval_required call waits for.
	Approval *ApprovalInfo `json:"approval,omitempty"`
}

func fail(code errcode.Code, message, hint string) Envelope {
	return Envelope{Error: &Error{Code: code, Message: message, Hint: hint}}
}
