package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/beneath"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox"
	"github.com/clihost/clihost/sandbox/nsinit"
	"github.com/clihost/clihost/versioncheck"
)

// gate finds the bundle's binary (a vendored path inside the bundle folder, else PATH) and checks its
// version in c's workspace as c (see identityFor), remembering a passed check until the file
// changes.
func (h *Host) gate(ctx context.Context, b *manifest.Bundle, c Caller, env []string) (binary, *Error) {
	workspace := c.Workspace
	path, err := h.resolve(b)
	if err != nil {
		return binary{}, err
	}
	st, serr := os.Stat(path)
	if serr != nil {
		return binary{}, &Error{Code: errcode.NotInstalled, Message: fmt.Sprintf("%s: %v", path, serr), Hint: installHint(b)}
	}
	h.mu.Lock()
	cached, ok := h.verified[b.Key()]
	h.mu.Unlock()
	if ok && cached.path == path && cached.modTime.Equal(st.ModTime()) && cached.size == st.Size() {
		return cached, nil
	}
	plan, pol, e := h.confine(b, nil, path, c, &env)
	if e != nil {
		return binary{}, e
	}
	res, cerr := versioncheck.Check(ctx, b.CLI.VersionCheck, b.CLI.Bin, runner.Command{Path: path, Dir: workspace, Env: env, Sandbox: plan})
	// The version check ran in the workspace with the bundle's grants: the git rule applies to what
	// it wrote (a version check has no result to carry the warnings: they go to the audit log).
	h.auditSweep(b, "", sweep(pol))
	switch {
	case ctx.Err() != nil:
		// Cancelled while the version command ran: whatever it returned (an error, or the exit
		// status of a process the cancel killed) says nothing about its version.
		return binary{}, &Error{Code: errcode.Cancelled, Message: "the call was cancelled during the version check of " + path}
	case errors.Is(cerr, nsinit.ErrUnavailable):
		return binary{}, sandboxError(b, cerr)
	}
	if cerr != nil {
		return binary{}, &Error{Code: errcode.VersionMismatch, Message: fmt.Sprintf("the version check of %s could not run: %v", path, cerr), Hint: "fix the bundle's version_check or the installed binary"}
	}
	if !res.OK {
		return binary{}, versionError(b, path, res, pol, newRedactor(secretValues(b, h.opts.LookupEnv, nil)))
	}
	bin := binary{path: path, version: res.Version, modTime: st.ModTime(), size: st.Size()}
	h.mu.Lock()
	h.verified[b.Key()] = bin
	h.mu.Unlock()
	return bin, nil
}

// versionError reports a failed version check: a version out of range or unparseable is
// version_mismatch and names the range to install; a version command that crashed (a non-zero exit
// without a version, or its timeout) is version_check_failed and carries its exit code and its
// stderr's tail (redacted), and a path it was refused is explained against the sandbox it ran in.
func versionError(b *manifest.Bundle, path string, res versioncheck.Result, pol *sandbox.Policy, r redactor) *Error {
	e := &Error{Code: errcode.VersionMismatch, Message: r.text(fmt.Sprintf("%s: %s", path, res.Reason)),
		Hint: fmt.Sprintf("the bundle needs %s %q; install a matching version (%s)", b.CLI.Bin, res.Range, installHint(b))}
	if res.Captured != "" {
		return e // a version out of range
	}
	if !res.Failed {
		// Output the bundle's parse pattern does not match: another program of that name, or a
		// version_check that does not fit this build of the CLI.
		e.Hint = fmt.Sprintf("%s printed no version the bundle's version_check.parse recognises: check that %s is the CLI the bundle expects, "+
			"or fix the bundle's version_check (clihostctl inspect %s)", path, path, b.ID())
		return e
	}
	// The command crashed (or hung) before printing a version: not a version to install but a
	// binary that does not start here.
	exit := res.ExitCode
	e.Code, e.ExitCode, e.Stderr = errcode.VersionCheckFailed, &exit, r.text(res.Stderr)
	e.Hint = fmt.Sprintf("%s failed before printing its version (exit code %d): its stderr says why", b.CLI.Bin, exit)
	if p, _ := output.Refusal(res.Stderr); p != "" && pol != nil {
		e.Category = output.CategoryPermission
		e.Hint = r.text(pol.Explain(p))
	}
	return e
}

// resolve finds the bundle's bin: a vendored install entry inside the bundle folder first, then the
// installed copies Options.Locate names, then PATH.
func (h *Host) resolve(b *manifest.Bundle) (string, *Error) {
	for _, m := range b.CLI.Install {
		if m.Method != manifest.MethodVendored || b.OSDir == "" || m.Experimental {
			continue
		}
		// Resolved beneath the bundle folder at each call: a symlink swapped in since the load is not run.
		p, err := beneath.Executable(b.OSDir, m.Path)
		if errors.Is(err, beneath.ErrOutside) {
			return "", &Error{Code: errcode.NotInstalled, Message: fmt.Sprintf("vendored binary: %v", err), Hint: "a symlink in a bundle may only point at another file of the bundle"}
		}
		if err == nil {
			return p, nil
		}
	}
	if h.opts.Locate != nil {
		for _, p := range h.opts.Locate(b) {
			if isExecutable(p) {
				return p, nil
			}
		}
	}
	if p, ok := h.lookPath(b.CLI.Bin); ok {
		return p, nil
	}
	return "", &Error{Code: errcode.NotInstalled, Message: fmt.Sprintf("%s is not installed: not found on PATH", b.CLI.Bin), Hint: installHint(b)}
}

// lookPath finds a program: an absolute path as it is, a bare name in the absolute entries of the
// host's PATH (a relative entry would resolve against our cwd, not a fixed place). A name with a
// slash that is not absolute is never found.
func (h *Host) lookPath(name string) (string, bool) {
	if strings.Contains(name, "/") {
		return name, filepath.IsAbs(name) && isExecutable(name)
	}
	pathVar, _ := h.opts.LookupEnv("PATH")
	for _, dir := range filepath.SplitList(pathVar) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p, true
		}
	}
	return "", false
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// installCommands is, by install method, the start of the command that installs a package by hand
// (the package name follows).
var installCommands = map[string]string{
	manifest.MethodApt:   "apt-get install ",
	manifest.MethodBrew:  "brew install ",
	manifest.MethodDnf:   "dnf install ",
	manifest.MethodNpm:   "npm install -g ",
	manifest.MethodPip:   "pip install ",
	manifest.MethodGo:    "go install ",
	manifest.MethodCargo: "cargo install ",
}

// installHint names the first install commands the bundle declares.
func installHint(b *manifest.Bundle) string {
	var ways []string
	for _, m := range b.CLI.Install {
		if cmd, ok := installCommands[m.Method]; ok {
			ways = append(ways, cmd+m.Package)
		}
		if len(ways) == 2 {
			break
		}
	}
	if len(ways) == 0 {
		return fmt.Sprintf("install %s so that it is on PATH", b.CLI.Bin)
	}
	return "install it, e.g. " + strings.Join(ways, " or ")
}
