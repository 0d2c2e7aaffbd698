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
	msg := err.Error() // names clihostctl lint with the bundle's folder
	if b.OSDir == "" { // a definition, an fs.FS or the catalog: no folder to lint
		msg = fmt.Sprintf("bundle %s has lint errors and is not served", b.Key())
	}
	return &callresult.Error{Code: errcode.BundleInvalid, Message: msg, Hint: fmt.Sprintf("Host.Lint lists the %d finding(s) of %s", len(b.Findings), b.File)}
}

// forEmbedder rewrites the remedy of e, an error of bundle b from clihostd's engine, on a Host that
// keeps state, as the Go API call that applies it: clihostctl setup and login would act on a
// daemon's state, not on this Host's. (A Host without state has no Setup or Login to offer.)
func (h *Host) forEmbedder(b *manifest.Bundle, e *callresult.Error) {
	if e == nil || h.store == nil {
		return
	}
	switch {
	case e.Code == errcode.SetupRequired:
		e.Hint = fmt.Sprintf("call Host.Setup(ctx, %q, clihost.SetupOptions{Values: …}) with the answers of its pending steps", b.ID())
	case e.Code == errcode.AuthRequired && b.CLI.Auth != nil && b.CLI.Auth.Login != nil:
		e.Hint = fmt.Sprintf("call Host.Login(ctx, %q, clihost.LoginOptions{…}) (runs %q)", b.ID(), b.CLI.Auth.Login.Cmd)
	}
}
