package clihost

import (
	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
)

// DryRun is what a call would run: the exact argv, the environment's names, the uid, the working
// directory and the compiled sandbox (see host.DryRun).
type DryRun = host.DryRun

// DryRun computes what Call would run for the same bundle, tool and input, and stops before
// running anything: no process of the CLI starts (not its version check either), no setup or login
// command, no approval is asked, and nothing is written. The error is the one the call would have
// failed with before its CLI ran (input_invalid, not_installed, sandbox_unavailable, …).
func (h *Host) DryRun(bundle, tool string, input any) (*DryRun, error) {
	raw, err := inputJSON(input)
	var in map[string]any
	if err == nil {
		in, err = argv.DecodeInput(raw)
	}
	if err != nil {
		return nil, newError(&callresult.Error{Code: errcode.InputInvalid, Message: "input: " + err.Error(), Hint: "pass the tool's input as a JSON object"})
	}
	b, err := h.bundle(bundle)
	if err != nil {
		return nil, err
	}
	d, e := h.h.DryRun(b, tool, in, h.caller())
	if e != nil {
		return nil, newError(e)
	}
	return d, nil
}
