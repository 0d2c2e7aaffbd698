package host

import (
	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/errcode"
)

// Envelope, Error and ApprovalInfo are a call's result (package callresult defines them, for
// every front end and the control API alike). They are aliases, not host types: host builds
// them at many places, and front ends (mcp, acli, clihostctl) name them as host's.
type (
	// Envelope is a call's result in the AIP-29 ADAPTER's shape.
	Envelope = callresult.Envelope
	// Error describes a failed call.
	Error = callresult.Error
	// ApprovalInfo is the pending approval an approval_required call waits for.
	ApprovalInfo = callresult.ApprovalInfo
)

func fail(code errcode.Code, message, hint string) Envelope {
	return Envelope{Error: &Error{Code: code, Message: message, Hint: hint}}
}
