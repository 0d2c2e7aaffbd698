package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox"
)

// stepCall is what runSteps needs from the call that runs a multi-step tool.
type stepCall struct {
	b         *manifest.Bundle
	t         *manifest.ToolEntry
	input     map[string]any
	workspace string
	peer      *CallerID // the control-socket caller, nil for others (see identityFor)
	env       []string  // the tool's environment (sandbox env, setup's values)
	bin       binary    // the bundle's verified bin
	secrets   argv.Secrets
	used      *[]string       // secret values used so far, for redaction
	barred    []string        // the SECRETS.md values the call received, never on a command line
	scope     lifecycle.Scope // the login's scope (LoginUser), for a login that expired
	rec       *Invoked
	opts      CallOptions
}

// runSteps runs a tool's runner.steps in order, each as its own process the way call runs one
// argv: in the workspace's sandbox (compiled for the step's program), never through a shell. A
// step that does not succeed ends the call with its error. The result is the output of the steps
// that append to the final output, each without its trailing newlines, joined by newlines (in the
// text format stripped of surrounding white space, as UTCP strips its script's output); when the
// tool's format is text and that result starts with '{' or '[' and is one JSON value, it is parsed
// as JSON (UTCP's detection).
func (h *Host) runSteps(ctx context.Context, sc stepCall) Envelope {
	b, t := sc.b, sc.t
	steps := t.Tool.Runner.Steps
	conv := output.For(b.CLI, t.Tool)
	timeout := sc.opts.capTimeout(callTimeout(b, t))
	deadline := time.Now().Add(timeout)
	stop := h.progress(sc.opts.Progress)
	defer stop()

	var warnings []string
	outputs := make([]string, 0, len(steps))
	var final []string
	truncated := false
	for i := range steps {
		s := &steps[i]
		vals := argv.Values{Input: sc.input, Secrets: sc.secrets, Steps: outputs, Schema: sc.t.Tool.Inputs}
		proc, e := h.stepCommand(sc, i, s, vals)
		if e == nil {
			e = onCommandLine(b, filepath.Base(proc.Path), proc.Args, sc.barred)
		}
		if e != nil {
			return Envelope{Error: e, Warnings: warnings}
		}
		sc.rec.ArgvCount += len(proc.Args)
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return Envelope{Error: &Error{Code: errcode.Timeout, Message: fmt.Sprintf("the tool's steps did not finish within %s; step %d was not started", timeout, i),
				Hint: "narrow the request or raise the tool's timeout_ms"}, Warnings: warnings}
		}
		env := proc.Env
		plan, pol, e := h.confine(b, t, proc.Path, Caller{Workspace: sc.workspace, Peer: sc.peer}, &env)
		if e != nil {
			return Envelope{Error: e, Warnings: warnings}
		}
		proc.Env, proc.Timeout, proc.Sandbox, proc.Egress, proc.Pool = env, remaining, plan, h.egressPolicy(pol, b.ID(), sc.rec.CallID, secretValues(b, h.opts.LookupEnv, *sc.used)...), h.opts.Sandbox.Pool
		proc.OnCleanupError = h.cleanupError(b, sc.rec.CallID)
		res, err := runner.Run(ctx, proc)
		swept := sweep(pol)
		h.auditSweep(b, sc.rec.CallID, swept)
		warnings = append(append(warnings, swept...), cgroupWarning(res)...)
		name, mapped := conv.ExitCodes[res.ExitCode]
		if err != nil || res.Canceled || res.TimedOut || !(name == "ok" || (res.ExitCode == 0 && !mapped)) {
			out := h.finish(ctx, b, t, res, err, conv, timeout, sc.scope, sc.rec, *sc.used, pol)
			if sc.opts.Debug && err == nil {
				debugStreams(out.Error, res, newRedactor(secretValues(b, h.opts.LookupEnv, *sc.used)))
			}
			if out.Error != nil {
				out.Error.Message = fmt.Sprintf("step %d (%s): %s", i, filepath.Base(proc.Path), out.Error.Message)
			}
			out.Warnings = append(warnings, out.Warnings...)
			return out
		}
		out, fromStderr := stepOutput(conv.Stream, res)
		if res.StdoutTruncated || res.StderrTruncated { // a cut may have left a value's start at the end
			out = newRedactor(secretValues(b, h.opts.LookupEnv, *sc.used)).cutTail(out)
		}
		outputs = append(outputs, out)
		if s.Appends(i, len(steps)) {
			final = append(final, outputs[i])
			truncated = truncated || res.StdoutTruncated || res.StderrTruncated && (conv.Stream != "stdout" || fromStderr)
		}
	}
	combined := strings.Join(final, "\n")
	if conv.Format == output.FormatText {
		combined = strings.TrimSpace(combined) // UTCP returns its script's output stripped
	}
	conv.Stream = "stdout"
	if conv.Format == output.FormatText && isJSONDocument(combined) {
		conv.Format = output.FormatJSON
	}
	out := h.finish(ctx, b, t, runner.Result{Stdout: []byte(combined), StdoutTruncated: truncated}, nil, conv, timeout, sc.scope, sc.rec, *sc.used, nil)
	out.Warnings = append(warnings, out.Warnings...)
	return out
}

// stepOutput is the output of a step that succeeded, without its trailing newlines: the stream
// output.stream names; with the default (stdout), stderr when stdout is empty, as UTCP, whose
// steps run as $(… 2>&1), returns what a program wrote to stderr when it wrote nothing else.
// fromStderr reports whether that output includes stderr.
func stepOutput(stream string, res runner.Result) (out string, fromStderr bool) {
	trim := func(b []byte) string { return strings.TrimRight(string(b), "\n") }
	switch {
	case stream == "mixed":
		return trim(append(append(bytes.Clone(res.Stdout), '\n'), res.Stderr...)), true
	case stream == "stderr" || trim(res.Stdout) == "":
		return trim(res.Stderr), true
	}
	return trim(res.Stdout), false
}

// stepCommand builds the process of step i: its program, expanded argv, working directory,
// environment and stdin. The sandbox is added by the caller.
func (h *Host) stepCommand(sc stepCall, i int, s *manifest.ToolStep, vals argv.Values) (runner.Command, *Error) {
	b := sc.b
	args, err := argv.ExpandValues(s.Parsed, vals)
	if err != nil {
		return runner.Command{}, stepErr(i, expandError(err))
	}
	path := sc.bin.path
	if s.Bin != "" && s.Bin != b.CLI.Bin {
		var e *Error
		if path, e = h.spawnPath(s.Bin); e != nil {
			return runner.Command{}, stepErr(i, e)
		}
	} else {
		args = append(slices.Clone(b.CLI.BinArgs), args...)
	}
	dir, e := stepDir(sc.workspace, s.ParsedDir, vals)
	if e != nil {
		return runner.Command{}, stepErr(i, e)
	}
	env := slices.Clone(sc.env)
	if len(s.ParsedEnv) > 0 {
		set := map[string]string{}
		for k, tok := range s.ParsedEnv {
			v, present, err := argv.ExpandString(tok, vals)
			if err != nil {
				return runner.Command{}, stepErr(i, expandError(err))
			}
			if present {
				set[k] = v
			}
		}
		if _, refused := sandbox.Env(nil, nil, set); len(refused) > 0 {
			return runner.Command{}, stepErr(i, &Error{Code: errcode.BundleInvalid,
				Message: fmt.Sprintf("the step sets %s, which clihost never passes to a program (it makes programs load code) or which holds a NUL byte", strings.Join(refused, ", ")),
				Hint:    "remove the variable from the step's env"})
		}
		for k, v := range set {
			env = setEnv(env, k, v)
		}
	}
	stdin, e := expandStdin(s.ParsedStdin, vals)
	if e != nil {
		return runner.Command{}, stepErr(i, e)
	}
	return runner.Command{Path: path, Args: args, Dir: dir, Env: env, Stdin: stdin}, nil
}

// expandStdin expands a stdin template (runner.stdin, a step's stdin): nil, meaning /dev/null, when
// there is none or an input it uses is absent.
func expandStdin(tok *manifest.TemplateToken, vals argv.Values) ([]byte, *Error) {
	if tok == nil {
		return nil, nil
	}
	text, present, err := argv.ExpandString(*tok, vals)
	if err != nil {
		return nil, expandError(err)
	}
	if !present {
		return nil, nil
	}
	return []byte(text), nil
}

// stepErr names the step in an error's message.
func stepErr(i int, e *Error) *Error {
	e.Message = fmt.Sprintf("step %d: %s", i, e.Message)
	return e
}

// spawnPath finds the program of a step that does not run the bundle's bin: an absolute path, or a
// bare name on PATH (lint has checked that it is listed in exec.spawn).
func (h *Host) spawnPath(name string) (string, *Error) {
	if p, ok := h.lookPath(name); ok {
		return p, nil
	}
	return "", &Error{Code: errcode.NotInstalled, Message: fmt.Sprintf("%s is not installed: not found on PATH", name),
		Hint: fmt.Sprintf("install %s so that it is on PATH", name)}
}

// stepDir resolves a step's dir template against the workspace: a relative path (or an absolute
// one inside the workspace) naming an existing directory, symlinks resolved, that does not leave
// the workspace. No dir, or one whose input is absent, is the workspace.
func stepDir(workspace string, tok *manifest.TemplateToken, vals argv.Values) (string, *Error) {
	if tok == nil {
		return workspace, nil
	}
	d, present, err := argv.ExpandString(*tok, vals)
	if err != nil {
		return "", expandError(err)
	}
	if !present || d == "" {
		return workspace, nil
	}
	ptr := ""
	if e := tok.Whole(); e != nil && e.Source == "input" {
		ptr = "/" + strings.Join(e.Path, "/")
	}
	bad := func(msg string) (string, *Error) {
		return "", &Error{Code: errcode.InputInvalid, Pointer: ptr, Message: msg, Hint: "name a directory inside the workspace, relative to it"}
	}
	if strings.IndexByte(d, 0) >= 0 {
		return bad("the working directory holds a NUL byte")
	}
	p := d
	if !filepath.IsAbs(p) {
		p = filepath.Join(workspace, p)
	}
	root, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return bad(fmt.Sprintf("the workspace: %v", err))
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return bad(fmt.Sprintf("the working directory %q does not exist in the workspace", d))
		}
		return bad(fmt.Sprintf("the working directory %q: %v", d, err))
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return bad(fmt.Sprintf("the working directory %q is outside the workspace", d))
	}
	if !isDir(real) {
		return bad(fmt.Sprintf("the working directory %q is not a directory", d))
	}
	return real, nil
}

// isJSONDocument reports whether s, trimmed, starts with '{' or '[' and is exactly one JSON value.
func isJSONDocument(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var v any
	if dec.Decode(&v) != nil {
		return false
	}
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}
