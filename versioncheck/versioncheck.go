// Package versioncheck runs a bundle's version_check against an installed binary: the command
// without a shell, the regex on stdout then stderr, version normalisation and the npm-style range
// (DESIGN.md).
package versioncheck

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
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
	Reason   string // why not, when !OK: a command that failed names its exit code and stderr's tail
	Failed   bool   // the command crashed before a version could be read: a non-zero exit without one, or its timeout
	ExitCode int    // the version command's exit code
	Stderr   string // the last lines of its stderr (StderrTailLines lines, StderrTailBytes bytes at most), ANSI stripped
}

// The bounds of Result.Stderr.
const (
	StderrTailLines = 10
	StderrTailBytes = 2 << 10
)

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
	res.ExitCode, res.Stderr = r.ExitCode, tail(string(r.Stderr))
	if r.TimedOut {
		res.Reason = fmt.Sprintf("%q did not finish within %s%s", vc.Cmd, timeout, stderrPart(res.Stderr))
		res.Failed = true
		return res, nil
	}
	captured, ok := pattern.Find(string(r.Stdout))
	if !ok {
		captured, ok = pattern.Find(string(r.Stderr))
	}
	if !ok {
		res.Reason, res.Failed = noMatch(vc, r, res.Stderr), r.ExitCode != 0
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

// noMatch says why a version command's output held no version: the command failed (its exit code
// and stderr), printed nothing, or printed something else (its first line).
func noMatch(vc manifest.VersionCheck, r runner.Result, stderr string) string {
	if r.ExitCode != 0 {
		return fmt.Sprintf("%q failed with exit code %d%s", vc.Cmd, r.ExitCode, stderrPart(stderr))
	}
	out := strings.TrimSpace(output.StripANSI(string(r.Stdout)))
	if out == "" {
		out = strings.TrimSpace(output.StripANSI(string(r.Stderr)))
	}
	if out == "" {
		return fmt.Sprintf("%q exited 0 and printed nothing", vc.Cmd)
	}
	first, _, _ := strings.Cut(out, "\n")
	if len(first) > 200 {
		first = strings.ToValidUTF8(first[:200], "") + "…"
	}
	return fmt.Sprintf("the output of %q does not match %q; it begins %q", vc.Cmd, vc.Parse, first)
}

// stderrPart is ": stderr: TAIL", or a note that stderr was empty.
func stderrPart(tail string) string {
	if tail == "" {
		return " (its stderr is empty)"
	}
	return "; its stderr ends: " + tail
}

// tail returns the last StderrTailLines lines of s, at most StderrTailBytes bytes, ANSI stripped
// and trimmed; "…" marks a cut.
func tail(s string) string {
	s = strings.TrimSpace(output.StripANSI(s))
	cut := false
	if lines := strings.Split(s, "\n"); len(lines) > StderrTailLines {
		s, cut = strings.Join(lines[len(lines)-StderrTailLines:], "\n"), true
	}
	if len(s) > StderrTailBytes {
		s, cut = s[len(s)-StderrTailBytes:], true
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if cut {
		return "…" + s
	}
	return s
}
