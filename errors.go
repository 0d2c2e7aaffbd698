package clihost

import (
	"fmt"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/manifest"
)

// Error is a failure with an error code (docs/errors.md): a call's, an install's, a setup's or a
// login's, the same code clihostd would return for it. Use errors.As to read it:
//
//	var e *clihost.Error
//	if errors.As(err, &e) && e.Code == errcode.InputInvalid { … }
type Error struct {
	Code    errcode.Code
	Message string
	Hint    string // what to do about it, when there is something to do
	// Detail is the whole error as a call's envelope carries it (stderr, exit code, the JSON
	// pointer of an invalid input, a pending approval).
	Detail *callresult.Error
}

// Error is "code: message (hint)".
func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s", e.Code, e.Message)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// newError wraps an envelope's error; nil for nil.
func newError(d *callresult.Error) error {
	if d == nil {
		return nil
	}
	return &Error{Code: d.Code, Message: d.Message, Hint: d.Hint, Detail: d}
}

func notFound(err error) *callresult.Error {
	return &callresult.Error{Code: errcode.NotFound, Message: err.Error(), Hint: "Host.Bundles lists the loaded bundles"}
}

func bundleInvalid(b *manifest.Bundle, err error) *callresult.Error {
	return &callresult.Error{Code: errcode.BundleInvalid, Message: err.Error(), Hint: fmt.Sprintf("Host.Lint lists the %d finding(s) of %s", len(b.Findings), b.File)}
}
