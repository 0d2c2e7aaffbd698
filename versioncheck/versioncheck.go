// Package versioncheck runs a bundle's version_check against an installed binary: the command
// without a shell, the regex on stdout then stderr, version normalisation and the npm-style range
// (DESIGN.md).
package versioncheck

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
)

// DefaultTimeout is version_check.timeout_ms's default.
const DefaultTimeout = 5 * time.Second

// Result is the outcome of one check.
type Result struct {
	Captured string // what the regex captured, e.g. "2.40.1"
	Version  string // the normalised semver, e.g. "2.40.1"
	Range    string // the range it was checked against
	OK       bool   // the version is inside the range
	Reason   string // why not, when !OK
}

// Check runs vc against the bundle's binary: proc says how (Path is the resolved bin; Dir, Env and
// Sandbox are used as given; Check sets the arguments, the timeout and the capture limits). The
// error reports a check that could not run (a sandbox that could not be built among them: it wraps
// nsinit.ErrUnavailable); a version out of range or unparseable is a Result with OK false and a
// Reason.
func Check(ctx context.Context, vc manifest.VersionCheck, bin string, proc runner.Command) (Result, error) {
	res := Result{Range: vc.Range}
	words, err := argv.Split(vc.Cmd)
	if err != nil {
		return res, fmt.Errorf("version_check.cmd: %w", err)
	}
	if filepath.Base(words[0]) != filepath.Base(bin) {
		return res, fmt.Errorf("version_check.cmd %q does not run the bundle's bin %q", vc.Cmd, bin)
	}
	pattern, err := manifest.CompileVersionPattern(vc.Parse)
	if err != nil {
		return res, fmt.Errorf("version_check.parse: %w", err)
	}
	rng, err := manifest.ParseRange(vc.Range)
	if err != nil {
		return res, fmt.Errorf("version_check.range: %w", err)
	}
	timeout := DefaultTimeout
	if vc.TimeoutMS > 0 {
		timeout = time.Duration(vc.TimeoutMS) * time.Millisecond
	}
	proc.Args, proc.Timeout, proc.StdoutLimit, proc.StderrLimit = words[1:], timeout, 64<<10, 64<<10
	r, err := runner.Run(ctx, proc)
	if err != nil {
		return res, fmt.Errorf("run %s: %w", vc.Cmd, err)
	}
	if r.TimedOut {
		res.Reason = fmt.Sprintf("%q did not finish within %s", vc.Cmd, timeout)
		return res, nil
	}
	captured, ok := pattern.Find(string(r.Stdout))
	if !ok {
		captured, ok = pattern.Find(string(r.Stderr))
	}
	if !ok {
		res.Reason = fmt.Sprintf("the output of %q (exit %d) does not match %q", vc.Cmd, r.ExitCode, vc.Parse)
		return res, nil
	}
	res.Captured = captured
	v, err := manifest.NormalizeVersion(captured)
	if err != nil {
		res.Reason = fmt.Sprintf("captured version %q: %v", captured, err)
		return res, nil
	}
	res.Version = v.String()
	if !rng.Contains(v) {
		res.Reason = fmt.Sprintf("version %s is outside the range %q", res.Version, vc.Range)
		return res, nil
	}
	res.OK = true
	return res, nil
}
