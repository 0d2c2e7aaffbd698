package clihost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/setup"
	"github.com/clihost/clihost/store"
)

// Binary is a bundle's CLI as found and version-checked.
type Binary struct {
	Path    string // absolute
	Version string // as version_check parsed it
	// Method is the install method that put it there ("" when Install found it already present).
	Method string
}

// installRecord is the state directory's record of an installed CLI (clihostd keeps the same).
type installRecord struct {
	Method      string    `json:"method"`
	BinPath     string    `json:"bin_path"`
	Version     string    `json:"version"`
	InstalledAt time.Time `json:"installed_at"`
}

// Verify finds a bundle's CLI (vendored, installed by Install, or on PATH) and checks its
// version in the sandbox, as a call would. The error is a *Error: not_found, bundle_invalid,
// not_installed or version_mismatch.
func (h *Host) Verify(ctx context.Context, bundle string) (Binary, error) {
	b, err := h.bundle(bundle)
	if err != nil {
		return Binary{}, err
	}
	path, version, verr := h.h.Verify(ctx, b, h.workspace)
	if verr != nil {
		return Binary{}, newError(verr)
	}
	return Binary{Path: path, Version: version}, nil
}

// InstallOptions adjust Install.
type InstallOptions struct {
	// Force reinstalls even when a matching version is present.
	Force bool
	// AllowUnverified lets curl installer scripts without verify_sha256 run.
	AllowUnverified bool
	// Output, when set, receives the package managers' output as they run.
	Output io.Writer
}

// Install installs a bundle's CLI as clihostd does: nothing when a matching version is present
// (unless Force); else the bundle's install entries in order (downloads verified against
// verify_sha256 before anything is placed; apt, dnf, pacman only when the program is root), the
// version checked in the sandbox, and one reinstall on a mismatch. The result is recorded in the
// state directory, where later calls find the binary. The error is a *Error (install_failed,
// version_mismatch, …) or ErrNoState.
//
// The installers themselves run OUTSIDE the sandbox, as this program's user (root when it is
// root), with the network: package managers (apt's maintainer scripts, npm's and pip's install
// scripts), go and cargo builds and curl installer scripts run what the bundle names. A checksum
// proves the download is the one the bundle's author chose, not that it is harmless. Install only
// bundles you trust; calls, version checks, setup and login are sandboxed whatever the bundle.
func (h *Host) Install(ctx context.Context, bundle string, o InstallOptions) (Binary, error) {
	if h.store == nil {
		return Binary{}, ErrNoState
	}
	b, err := h.bundle(bundle)
	if err != nil {
		return Binary{}, err
	}
	h.installMu.Lock()
	defer h.installMu.Unlock()
	if !o.Force {
		if path, ver, verr := h.h.Verify(ctx, b, h.workspace); verr == nil {
			return Binary{Path: path, Version: ver}, nil
		}
	}
	var last *callresult.Error
	for range 2 {
		res, err := install.Install(ctx, b, install.Options{StateDir: h.stateDir, AllowUnverified: o.AllowUnverified,
			Privileged: os.Geteuid() == 0, Output: o.Output})
		if err != nil {
			return Binary{}, newError(installError(ctx, err))
		}
		h.h.Forget(b)
		path, ver, verr := h.h.Verify(ctx, b, h.workspace)
		if verr == nil {
			rec := installRecord{Method: res.Method, BinPath: path, Version: ver, InstalledAt: time.Now().UTC()}
			if _, err := h.store.Put(store.BucketInstall, b.Key(), rec); err != nil {
				return Binary{}, fmt.Errorf("clihost: recording the install of %s: %w", b.Key(), err)
			}
			return Binary{Path: path, Version: ver, Method: res.Method}, nil
		}
		last = verr
	}
	return Binary{}, newError(last)
}

// InstallEntry runs only install entry index of a bundle (apt, dnf, pacman, pip outside a
// virtualenv: an entry that needs root) in this process, with its output on out: a clihostd that
// is not root hands such entries back to its root caller (sudo clihostctl install), which runs
// them here; the daemon then finds the binary, checks and records it. Nothing is verified or
// recorded here, and no state directory is needed. The package manager runs outside the sandbox,
// as this program's user (see Install).
func (h *Host) InstallEntry(ctx context.Context, bundle string, index int, out io.Writer) error {
	b, err := h.bundle(bundle)
	if err != nil {
		return err
	}
	_, err = install.RunEntry(ctx, b, index, install.Options{Privileged: os.Geteuid() == 0, Output: out})
	return err
}

// installError is install.Install's error with its code: cancelled when ctx ended (cancelled, or
// its deadline passed), as a call's.
func installError(ctx context.Context, err error) *callresult.Error {
	code, hint := errcode.InstallFailed, "each install entry's reason is listed; install the CLI by hand, or fix the bundle's install entries"
	var ce *install.ChecksumError
	switch {
	case errors.As(err, &ce):
		hint = "the download does not match the bundle's verify_sha256; nothing was installed. Report it to the bundle's author"
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		code, hint = errcode.Cancelled, ""
	}
	return &callresult.Error{Code: code, Message: err.Error(), Hint: hint}
}

// SetupOptions adjust Setup.
type SetupOptions struct {
	// Values answer the steps by id: prompts (text, select, boolean, secret), external and oauth
	// steps. A prompt without a value takes its default; one without either fails with
	// setup_required.
	Values map[string]string
	// Force re-runs steps already done.
	Force bool
	// Visit is called with the URL an external or oauth step's person must open; clihost's
	// callback server waits for the answer meanwhile. Nil: such steps need a value in Values.
	Visit func(ctx context.Context, step, url string) error
}

// Setup runs a bundle's setup steps for the Host's workspace and user, in the sandbox, and keeps
// what they persist (env values, secrets in the encrypted store) for later calls. The error is a
// *Error (setup_required, setup_failed, …) or ErrNoState.
func (h *Host) Setup(ctx context.Context, bundle string, o SetupOptions) error {
	b, scope, env, err := h.lifecycle(ctx, bundle, h.user)
	if err != nil {
		return err
	}
	_, err = h.setup.Run(ctx, b, scope, env, answerer{o.Visit}, setup.RunOptions{Values: o.Values, Force: o.Force})
	var se *setup.StepError
	switch {
	case errors.As(err, &se):
		return newError(&callresult.Error{Code: se.Code, Message: se.Message, Hint: se.Hint})
	case err != nil:
		return newError(&callresult.Error{Code: errcode.SetupFailed, Message: err.Error()})
	}
	return nil
}

// answerer answers nothing interactively: prompts were answered up front (SetupOptions.Values).
type answerer struct {
	visit func(ctx context.Context, step, url string) error
}

func (a answerer) Ask(_ context.Context, step manifest.SetupStep, _ []setup.Choice) (string, error) {
	return "", fmt.Errorf("step %s needs an answer: pass it in SetupOptions.Values[%q]", step.ID, step.ID)
}

func (a answerer) Visit(ctx context.Context, step manifest.SetupStep, url string) error {
	if a.visit == nil {
		return fmt.Errorf("step %s needs a person to open %s: set SetupOptions.Visit, or pass the value in SetupOptions.Values[%q]", step.ID, url, step.ID)
	}
	return a.visit(ctx, step.ID, url)
}

// LoginOptions are the streams a login command runs on (nil: no input, output discarded).
type LoginOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Login runs a bundle's auth.login.cmd in the sandbox on the given streams, then waits for its
// completes_when check to pass, as clihostctl login does; calls then see the bundle as logged in.
// The login belongs to the Host's user (clihostd's login scope). The error is a *Error
// (auth_required with why, cancelled when ctx ended first) or ErrNoState.
func (h *Host) Login(ctx context.Context, bundle string, o LoginOptions) error {
	b, scope, env, err := h.lifecycle(ctx, bundle, host.LoginUser(h.user))
	if err != nil {
		return err
	}
	run := func(ctx context.Context, argv []string) error {
		c := runner.Command{Path: argv[0], Args: argv[1:], Dir: env.Dir, Env: env.Env, Sandbox: env.Sandbox, Egress: env.Egress,
			Attach: &runner.Attach{Stdin: orEmpty(o.Stdin), Stdout: orDiscard(o.Stdout), Stderr: orDiscard(o.Stderr)}}
		return loginResult(env.Run(ctx, c))
	}
	if _, err := h.auth.Login(ctx, b, scope, env, run); err != nil {
		if ctx.Err() != nil {
			return newError(&callresult.Error{Code: errcode.Cancelled, Message: err.Error()})
		}
		return newError(&callresult.Error{Code: errcode.AuthRequired, Message: err.Error(), Hint: "run Login again"})
	}
	return nil
}

// Logout marks a bundle logged out for the Host's user: calls get auth_required until the next
// Login. The CLI's own credentials are not touched.
func (h *Host) Logout(bundle string) error {
	if h.store == nil {
		return ErrNoState
	}
	b, err := h.bundle(bundle)
	if err != nil {
		return err
	}
	return h.auth.Logout(b, lifecycle.Scope{Bundle: b.Key(), Workspace: h.workspace, User: host.LoginUser(h.user)})
}

// lifecycle resolves what a setup or login of bundle for user runs with.
func (h *Host) lifecycle(ctx context.Context, bundle, user string) (*manifest.Bundle, lifecycle.Scope, lifecycle.Env, error) {
	if h.store == nil {
		return nil, lifecycle.Scope{}, lifecycle.Env{}, ErrNoState
	}
	b, err := h.bundle(bundle)
	if err != nil {
		return nil, lifecycle.Scope{}, lifecycle.Env{}, err
	}
	env, verr := h.h.LifecycleEnv(ctx, b, h.caller())
	if verr != nil {
		h.forEmbedder(b, verr)
		return nil, lifecycle.Scope{}, lifecycle.Env{}, newError(verr)
	}
	return b, lifecycle.Scope{Bundle: b.Key(), Workspace: h.workspace, User: user}, env, nil
}

// loginResult is a login command's outcome as an error.
func loginResult(res runner.Result, err error) error {
	switch {
	case err != nil:
		return err
	case res.Exhausted != "":
		return errors.New(res.Exhausted)
	case res.Signal != "":
		return fmt.Errorf("signal: %s", res.Signal)
	case res.ExitCode != 0:
		return fmt.Errorf("exit status %d", res.ExitCode)
	}
	return nil
}

func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return strings.NewReader("")
	}
	return r
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
