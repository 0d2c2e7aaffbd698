package host

import (
	"strings"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/runner"
)

// debugStreams sets e.Debug (when e is not nil) to what the command of res printed, redacted by r
// before it is cut at callresult.MaxDebugBytes (a cut never leaves part of a secret).
func debugStreams(e *Error, res runner.Result, r redactor) {
	if e == nil {
		return
	}
	stdout, cutOut := debugText(r.text(string(res.Stdout)))
	stderr, cutErr := debugText(r.text(string(res.Stderr)))
	e.Debug = &callresult.Streams{Stdout: stdout, Stderr: stderr, Truncated: cutOut || cutErr || res.StdoutTruncated || res.StderrTruncated}
}

// debugText is s cut at callresult.MaxDebugBytes on a character boundary, and whether it was cut.
func debugText(s string) (string, bool) {
	if len(s) <= callresult.MaxDebugBytes {
		return s, false
	}
	return strings.ToValidUTF8(s[:callresult.MaxDebugBytes], ""), true
}
