// Package host orchestrates a tool call end to end: find the tool, gate on the binary and its
// version, validate the input, expand argv, run the process, parse its output into the ADAPTER's
// envelope, and write the audit line.
package host

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/authstate"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/inflight"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
	"github.com/clihost/clihost/registry"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox"
	"github.com/clihost/clihost/sandbox/nsinit"
	"github.com/clihost/clihost/setup"
)

// Options configure a Host.
type Options struct {
	// LookupEnv reads the host environment (env.pass, PATH). Default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Audit receives one JSON line per call. Nil discards.
	Audit io.Writer
	// ProgressEvery is how often a running call reports progress. Default one second.
	ProgressEvery time.Duration
	// Locate lists candidate paths of a bundle's binary (installed copies), tried after a vendored
	// binary and before PATH. Nil: none.
	Locate func(b *manifest.Bundle) []string
	// OnCall receives each call's audit record after it is written (for metrics). Nil: none.
	OnCall func(Invoked)
	// Setup gates calls on a bundle's setup steps and supplies what they persisted (env, secrets).
	// Nil: setup is not checked (one-shot in-process calls).
	Setup *setup.Engine
	// Auth gates calls on the login state, refreshes when due and detects expiry. Nil: only
	// expiry.detect is mapped to auth_required.
	Auth *authstate.Machine
	// Sandbox says how bundle processes are confined (the kernel sandbox is on unless Sandbox.Off).
	Sandbox SandboxOptions
	// Approvals enforces the tools' approval classes and keeps pending approvals; it outlives a
	// Host (a daemon's reloads share one). Nil: a gate of its own with no policy rules.
	Approvals *approval.Gate
	// InFlight bounds the calls running at once, in total and for each caller (callerKey); it
	// outlives a Host, as Approvals does. Nil: no bound (one-shot in-process calls).
	InFlight *inflight.Limiter
	// Policies keeps the sandbox policies of recent calls for the next calls of the same bundle,
	// tool, workspace and caller's home (see sandbox.Cache); it may outlive a Host, as InFlight
	// does. Nil: a cache of the Host's own.
	Policies *sandbox.Cache
}

// Caller is who calls and where: the workspace is the process's working directory.
type Caller struct {
	Workspace string
	User      string
	// Agent is the name of the agent token an MCP request over HTTP carried ("" otherwise): approval
	// rules may name it, and the audit line records it.
	Agent string
	// Peer is the control-socket process that asked (its uid and groups); nil for an MCP agent and
	// for the host's own work. It decides whom a root host runs the call's processes as.
	Peer *CallerID
}

// Host runs the tools of a registry's bundles.
type Host struct {
	reg   *registry.Registry
	opts  Options
	audit *auditLog

	mu       sync.Mutex
	verified map[string]binary // by bundle key
	limits   isolation.Limits  // the operator's limits, resolved (operatorLimits)
}

// binary is a resolved, version-checked bin.
type binary struct {
	path    string
	version string
	modTime time.Time
	size    int64
}

// PoliciesReused returns how many calls used the sandbox policy of an earlier call again (see
// sandbox.Cache) instead of compiling one.
func (h *Host) PoliciesReused() int64 { return h.opts.Policies.Reused() }

// PoliciesWatched returns how many of those calls were spared asking again the lstat and
// readlink questions of the policy's compilation, inotify having seen nothing they depend on
// change (see sandbox.Cache).
func (h *Host) PoliciesWatched() int64 { return h.opts.Policies.Watched() }

// New makes a Host over reg.
func New(reg *registry.Registry, opts Options) *Host {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = time.Second
	}
	if opts.Approvals == nil {
		opts.Approvals = approval.NewGate(nil)
	}
	if opts.Policies == nil {
		opts.Policies = sandbox.NewCache()
	}
	return &Host{reg: reg, opts: opts, audit: &auditLog{w: opts.Audit}, verified: map[string]binary{}, limits: operatorLimits(opts.Sandbox.Limits)}
}

// Bundle finds a loaded bundle by id or id@major; bundles with lint errors are refused.
func (h *Host) Bundle(name string) (*manifest.Bundle, error) {
	b, err := h.reg.Get(name)
	if err != nil {
		return nil, err
	}
	if b.Findings.HasErrors() {
		return nil, fmt.Errorf("bundle %s has lint errors and is not served; run: clihostctl lint %s", b.Key(), b.Dir)
	}
	return b, nil
}

// CallOptions adjust one call.
type CallOptions struct {
	// Progress is called periodically while the process runs, with the time elapsed.
	Progress func(elapsed time.Duration)
	// Via names the front end (approval.ViaMCP, …): approval rules may match it, and an approval
	// is bound to it.
	Via string
	// Approval is the answer the front end collected for this call (an MCP elicitation), or nil.
	Approval *approval.Answer
	// Timeout, when positive, shortens the call's wall-clock limit (the tool's timeout_ms and
	// runner.limits); it never lengthens it. A call stopped at it is a timeout whose error keeps
	// the output printed so far (Error.PartialStdout).
	Timeout time.Duration
	// Debug adds to a failed call's error everything its command printed (Error.Debug, secrets
	// redacted): for bundle authors (clihostctl call --debug), never set by an agent's front end.
	Debug bool
}

// capTimeout is limit shortened to opts.Timeout when that is positive and shorter.
func (opts CallOptions) capTimeout(limit time.Duration) time.Duration {
	if opts.Timeout > 0 && opts.Timeout < limit {
		return opts.Timeout
	}
	return limit
}

// Call runs one tool of b with input (decoded JSON; it is modified: defaults are filled in). tool is
// the TOOL.md id, the command path ("pr list"), the dotted path or the MCP name. It never returns
// a Go error: every failure is an envelope with a code and a hint.
func (h *Host) Call(ctx context.Context, b *manifest.Bundle, tool string, input map[string]any, c Caller, opts CallOptions) Envelope {
	start := time.Now()
	entry := b.Tool(tool)
	rec := Invoked{Type: "cli.invoked", CallID: newCallID(), CLIID: b.ID(), AuthState: "unknown", UserID: c.User, Agent: c.Agent, WorkspaceID: workspaceID(c.Workspace)}
	if b.CLI != nil {
		rec.CLIVersion = b.CLI.Version
	}
	endEgress := h.audit.holdCall(rec.CallID, b.ID())
	var env Envelope
	if entry == nil || entry.Tool == nil {
		env = fail(errcode.NotFound, fmt.Sprintf("bundle %s has no tool %q", b.Key(), tool), "tools: "+strings.Join(toolNames(b), ", "))
		rec.Subcommand = tool
	} else {
		rec.Subcommand, rec.ToolID = strings.Join(entry.Path, "."), entry.Tool.ID
		if entry.Tool.Runner != nil {
			rec.ArgvTemplate = templateText(entry.Tool.Runner.Argv)
			for i, s := range entry.Tool.Runner.Steps { // runner.steps: "step ; step"
				if i > 0 {
					rec.ArgvTemplate += " ; "
				}
				prog := s.Bin
				if prog == "" && b.CLI != nil {
					prog = b.CLI.Bin
				}
				rec.ArgvTemplate += templateText(append([]string{prog}, s.Argv...))
			}
		}
		env = h.admitted(ctx, b, entry, input, c, opts, &rec)
	}
	env.MS = time.Since(start).Milliseconds()
	if h.opts.Sandbox.Off {
		env.Warnings = append(env.Warnings, SandboxOffWarning)
	}
	rec.DurationMS, rec.OK, rec.TS = env.MS, env.OK, timestamp(time.Now())
	if env.Error != nil {
		rec.ErrorCode = env.Error.Code
	}
	endEgress()
	h.audit.write(rec)
	if h.opts.OnCall != nil {
		h.opts.OnCall(rec)
	}
	return env
}

// admitted runs the call when the InFlight bound admits it (Admit).
func (h *Host) admitted(ctx context.Context, b *manifest.Bundle, t *manifest.ToolEntry, input map[string]any, c Caller, opts CallOptions, rec *Invoked) Envelope {
	ctx, done, e := h.Admit(ctx, c)
	if e != nil {
		return Envelope{Error: e}
	}
	defer done()
	return h.call(ctx, b, t, input, c, opts, rec)
}

// Admit takes a place for c among the calls in flight (Options.InFlight), for a call or for other
// work that runs a bundle's programs for c (setup steps, login and its checks, the version check
// they start with): it returns ctx carrying the place, and done, which gives it back once the work
// has returned and every sandbox it let go of without its end has ended (inflight.Hold). Past a
// bound it returns a rate_limited error, retryable, and nothing may run. Work whose ctx has its
// place already (a daemon's request, admitted before it looked at the workspace it names) takes
// none more.
func (h *Host) Admit(ctx context.Context, c Caller) (context.Context, func(), *Error) {
	if inflight.Held(ctx) {
		return ctx, func() {}, nil
	}
	slot, err := h.opts.InFlight.Acquire(callerKey(c))
	if r := (*inflight.Refusal)(nil); errors.As(err, &r) {
		hint := "call again shortly; the operator sets the bound with clihostd --max-calls"
		switch r.Bound {
		case inflight.PerCaller:
			hint = "wait for one of your calls to end and call again; the operator sets the bound with clihostd --max-calls-per-caller (a call whose sandbox did not end when it was killed, or whose request hangs in the kernel, holds its place until it does)"
		case inflight.Abandoned:
			hint = "calls hang in the kernel (a file system that does not answer?); clihost_calls_abandoned counts them, and the daemon's threads show where; they end with that file system, or at a restart"
		}
		return ctx, nil, &Error{Code: errcode.RateLimited, Message: r.Error() + "; nothing ran", Hint: hint, Retryable: true}
	}
	// A request whose caller went away (ctx ends) may still hang in the kernel for good: it then
	// keeps its caller's place, not the host's.
	stop := slot.AbandonWhenDone(ctx)
	return inflight.WithSlot(ctx, slot), func() { stop(); slot.Release() }, nil
}

// callerKey names whom the InFlight bound counts a call against: the control socket's user, else
// the MCP agent's token, else the host itself.
func callerKey(c Caller) string {
	switch {
	case c.Peer != nil:
		return "uid:" + strconv.Itoa(c.Peer.UID)
	case c.Agent != "":
		return "agent:" + c.Agent
	}
	return "host"
}

// envOf builds a process environment from nothing, a sandbox's env block and the extra variables
// to pass (see sandbox.Env); the variables it refuses are reported by lint, not here.
func (h *Host) envOf(e *manifest.Env, extra ...string) []string {
	var set map[string]string
	pass := extra
	if e != nil {
		pass, set = append(slices.Clone(e.Pass), extra...), e.Set
	}
	env, _ := sandbox.Env(h.opts.LookupEnv, pass, set)
	return env
}

// Verify resolves a bundle's binary and checks its version, as a call would, as the host's own work
// (see identityFor). It returns the binary's path and version, or the error a call would get
// (not_installed, version_mismatch).
//
// The check needs no workspace of its own: when the uid it runs as may not use workspace (a root
// host's private folder, no --agent-user), it runs in a folder that uid may use (checkDir), so that
// installing and checking a CLI work on such a host; calls in that workspace are still refused.
func (h *Host) Verify(ctx context.Context, b *manifest.Bundle, workspace string) (path, version string, err *Error) {
	c := Caller{Workspace: workspace}
	if !h.opts.Sandbox.Off {
		if _, e := h.identityFor(workspace, nil, ""); e != nil && e.Code == errcode.WorkspaceDenied {
			dir, done, derr := h.checkDir(h.runAs(workspace, nil))
			if derr != nil {
				return "", "", &Error{Code: errcode.Internal, Message: "a folder for the version check: " + derr.Error()}
			}
			defer done()
			c.Workspace = dir
		}
	}
	bin, err := h.gate(ctx, b, c, h.envOf(b.CLI.Sandbox.Env))
	return bin.path, bin.version, err
}

// LifecycleEnv says how the bundle's own commands (setup steps, login and its checks) run in c's
// workspace (absolute) for c: the verified binary, the bundle's environment plus PATH, and the
// bundle's sandbox, run as identityFor decides for c.
func (h *Host) LifecycleEnv(ctx context.Context, b *manifest.Bundle, c Caller) (lifecycle.Env, *Error) {
	ws := c.Workspace
	bin, verr := h.gate(ctx, b, c, h.envOf(b.CLI.Sandbox.Env))
	if verr != nil {
		return lifecycle.Env{}, verr
	}
	path := bin.path
	env := h.envOf(b.CLI.Sandbox.Env, "PATH")
	plan, pol, e := h.confine(b, nil, path, c, &env)
	if e != nil {
		return lifecycle.Env{}, e
	}
	return lifecycle.Env{BinPath: path, Dir: ws, Env: env, Sandbox: plan, Egress: h.egressPolicy(pol, b.ID(), newCallID()),
		Guard: h.lifecycleGuard(b, pol)}, nil
}

// lifecycleGuard applies the git rule around each of the bundle's own commands run outside a call
// (setup steps, login checks, background refreshes): a snapshot before, the sweep after, each
// warning an audit line, since no call result carries them. Nil when the sandbox is off.
func (h *Host) lifecycleGuard(b *manifest.Bundle, pol *sandbox.Policy) func() (func(), error) {
	if pol == nil {
		return nil
	}
	return func() (func(), error) {
		if err := pol.SnapshotGit(0); err != nil {
			return nil, fmt.Errorf("the git check of the workspace: %w", err)
		}
		return func() { h.auditSweep(b, "", sweep(pol)) }, nil
	}
}

// auditSweep writes a cli.sweep audit line for each warning of a sweep, tied to the call callID
// ("" for the bundle's own commands outside a call).
func (h *Host) auditSweep(b *manifest.Bundle, callID string, warnings []string) {
	for _, w := range warnings {
		h.audit.write(SweepWarning{Type: "cli.sweep", CallID: callID, CLIID: b.ID(), Warning: w, TS: timestamp(time.Now())})
	}
}

// cleanupError is what a call's process reports when its control groups could not be removed
// after the call returned (runner.Command.OnCleanupError): a cli.sweep audit line, as the call's
// result, already sent, cannot carry it.
func (h *Host) cleanupError(b *manifest.Bundle, callID string) func(error) {
	return func(err error) {
		h.auditSweep(b, callID, cgroupWarning(runner.Result{CgroupErr: err}))
	}
}

// Forget drops what the host remembers about a bundle's binary, so the next call checks it again
// (after an install).
func (h *Host) Forget(b *manifest.Bundle) {
	h.mu.Lock()
	delete(h.verified, b.Key())
	h.mu.Unlock()
}

func toolNames(b *manifest.Bundle) []string {
	var out []string
	for _, t := range b.Tools {
		out = append(out, t.CommandPath())
	}
	return out
}

func (h *Host) call(ctx context.Context, b *manifest.Bundle, t *manifest.ToolEntry, input map[string]any, c Caller, opts CallOptions, rec *Invoked) (result Envelope) {
	// The values the call received (SECRETS.md, setup's, ${secrets.NAME}) as it goes; clihost's
	// own errors about them (a step's dir, a step output refused as an option) are redacted too.
	var usedSecrets []string
	defer func() { h.redactError(b, result.Error, usedSecrets) }()
	if b.Findings.HasErrors() || t.Tool.Runner == nil || !t.Tool.Runner.Callable() || t.InputSchema() == nil {
		return fail(errcode.BundleInvalid, fmt.Sprintf("bundle %s has lint errors; its tools are not callable", b.Key()), "run: clihostctl lint "+b.Dir)
	}
	if input == nil {
		input = map[string]any{}
	}
	applyDefaults(t.Tool.Inputs, input)
	if e := validateInput(t.InputSchema(), input); e != nil {
		return Envelope{Error: e}
	}
	workspace, err := filepath.Abs(c.Workspace)
	if err != nil || !isDir(workspace) {
		return fail(errcode.InputInvalid, fmt.Sprintf("workspace %q is not a directory", c.Workspace), "pass an existing directory as the workspace")
	}
	eff := manifest.EffectiveSandbox(b.CLI.Sandbox, t.Tool.Sandbox)
	env := h.envOf(eff.Env)
	c.Workspace = workspace
	if e := checkPaths(t.Tool.Inputs, input, workspace); e != nil {
		return Envelope{Error: e}
	}
	if e := h.approve(b, t, input, c, opts, rec); e != nil {
		return Envelope{Error: e}
	}
	if e := runnerRefusal(b, t); e != nil {
		return Envelope{Error: e}
	}
	if b.CLI.Runner.Engine() == manifest.EngineSandbox {
		if o := t.Tool.Runner.Output; o != nil && o.File != "" {
			return fail(errcode.BundleInvalid, "runner.output.file is not supported with engine: sandbox", "drop runner.output.file, or run the CLI with engine: subprocess")
		}
		return h.callContainer(ctx, b, t, input, c, env, rec, opts)
	}

	bin, gateErr := h.gate(ctx, b, c, env)
	if gateErr != nil {
		return Envelope{Error: gateErr}
	}
	rec.BinaryVersion = bin.version

	scope := lifecycle.Scope{Bundle: b.Key(), Workspace: workspace, User: c.User}
	loginScope := scope
	loginScope.User = LoginUser(c.User)
	if e := h.secretEnv(ctx, b, t, scope, &env, &usedSecrets); e != nil {
		return Envelope{Error: e}
	}
	barred := slices.Clone(usedSecrets) // SECRETS.md values: never on a command line
	lenv := lifecycle.Env{BinPath: bin.path, Dir: workspace, Env: slices.Clone(env)}
	var lpol *sandbox.Policy
	if h.opts.Auth != nil && b.CLI.Auth != nil && b.CLI.Auth.Login != nil {
		// Login checks and refreshes run the bundle's own commands, in the bundle's sandbox.
		var e *Error
		if lenv.Sandbox, lpol, e = h.confine(b, nil, bin.path, c, &lenv.Env); e != nil {
			return Envelope{Error: e}
		}
		lenv.Egress = h.egressPolicy(lpol, b.ID(), rec.CallID, secretValues(b, h.opts.LookupEnv, usedSecrets)...)
	}
	e := h.lifecycle(ctx, b, scope, loginScope, lenv, &env, &usedSecrets)
	// The login commands ran in the workspace too: the git rule applies to what they wrote, before
	// the tool's own snapshot is taken.
	lifeWarnings := sweep(lpol)
	h.auditSweep(b, rec.CallID, lifeWarnings)
	if e != nil {
		return Envelope{Error: e, Warnings: lifeWarnings}
	}
	// ${secrets.NAME} are the secret slugs setup stored for this scope (an oauth step's token
	// refreshed first when it expired); without a setup engine there are none.
	var secretErr error // why a secret could not be read (an expired oauth token's failed refresh)
	secrets := func(name string) (string, bool) {
		if h.opts.Setup == nil {
			return "", false
		}
		v, ok, err := h.opts.Setup.FreshSecret(ctx, b, scope, name)
		if ok {
			usedSecrets = append(usedSecrets, v)
		} else if err != nil && secretErr == nil {
			secretErr = err
		}
		return v, ok
	}
	if len(t.Tool.Runner.Steps) > 0 {
		out := h.runSteps(ctx, stepCall{b: b, t: t, input: input, workspace: workspace, peer: c.Peer, env: env, bin: bin, secrets: secrets,
			used: &usedSecrets, barred: barred, scope: loginScope, rec: rec, opts: opts})
		out.Warnings = append(lifeWarnings, out.Warnings...)
		return out
	}
	args, err := argv.ExpandValues(t.Tool.Runner.Parsed, argv.Values{Input: input, Secrets: secrets, Schema: t.Tool.Inputs})
	if err != nil {
		return Envelope{Error: cmp.Or(secretReadError(b, secretErr), expandError(err))}
	}
	stdin, e := expandStdin(t.Tool.Runner.ParsedStdin, argv.Values{Input: input, Secrets: secrets})
	if e != nil {
		return Envelope{Error: cmp.Or(secretReadError(b, secretErr), e)}
	}
	conv := output.For(b.CLI, t.Tool)
	args = append(slices.Clone(b.CLI.BinArgs), conv.Args(args)...)
	rec.ArgvCount = len(args)
	if e := onCommandLine(b, b.CLI.Bin, args, barred); e != nil {
		return Envelope{Error: e}
	}

	timeout := opts.capTimeout(callTimeout(b, t))
	plan, pol, e := h.confineFor(b, t, bin.path, c, &env, false)
	if e != nil {
		return Envelope{Error: e}
	}
	// The git rule's snapshot runs while the sandbox is built; the program waits for it.
	snap := snapshotBeside(b, pol)
	defer snap.wait() // never left running past the call (an early return)
	cmd := runner.Command{Path: bin.path, Args: args, Dir: workspace, Env: env, Timeout: timeout,
		TTY: eff.TTY != nil && eff.TTY.Required, Stdin: stdin, Sandbox: plan, Egress: h.egressPolicy(pol, b.ID(), rec.CallID, secretValues(b, h.opts.LookupEnv, usedSecrets)...), Pool: h.opts.Sandbox.Pool,
		OnCleanupError: h.cleanupError(b, rec.CallID)}
	if pol != nil {
		cmd.Gate = snap.gate
	}
	if o := t.Tool.Runner.Output; o != nil && o.File != "" {
		// The output file is made in the workspace before the call: after the snapshot, which
		// must not count it as there before.
		if e := snap.wait(); e != nil {
			return Envelope{Error: e}
		}
	}
	file, e := stdoutFileFor(t, input, workspace, pol, plan, &cmd)
	if e != nil {
		return Envelope{Error: e}
	}
	stop := h.progress(opts.Progress)
	res, err := runner.Run(ctx, cmd)
	stop()
	if e := snap.wait(); e != nil {
		if file != nil {
			file.close()
		}
		return Envelope{Error: e} // refused before its program started
	}
	if file != nil {
		defer file.close()
		res, conv = file.redirected(res, conv)
	}
	toolWarnings := sweep(pol)
	h.auditSweep(b, rec.CallID, toolWarnings)
	warnings := append(lifeWarnings, toolWarnings...)
	out := h.finish(ctx, b, t, res, err, conv, timeout, loginScope, rec, usedSecrets, pol)
	if file != nil && out.OK {
		if err := file.commit(); err != nil {
			out = fail(errcode.Internal, fmt.Sprintf("the output file %q could not be written: %v", file.rel, err), "check the folder's permissions")
		}
	}
	if opts.Debug && err == nil {
		debugStreams(out.Error, res, newRedactor(secretValues(b, h.opts.LookupEnv, usedSecrets)))
	}
	out.Warnings = append(append(out.Warnings, warnings...), cgroupWarning(res)...)
	return out
}

// redactError redacts the values of used (and auth.state.env's) in e's text.
func (h *Host) redactError(b *manifest.Bundle, e *Error, used []string) {
	if e == nil {
		return
	}
	r := newRedactor(secretValues(b, h.opts.LookupEnv, used))
	e.Message, e.Hint, e.Stderr = r.text(e.Message), r.text(e.Hint), r.text(e.Stderr)
}

// finish turns a finished (or unstartable) process into the call's envelope. pol is the sandbox
// it ran in (nil when off): a refused path is explained against it.
func (h *Host) finish(ctx context.Context, b *manifest.Bundle, t *manifest.ToolEntry, res runner.Result, err error, conv output.Convention,
	timeout time.Duration, scope lifecycle.Scope, rec *Invoked, usedSecrets []string, pol *sandbox.Policy) Envelope {
	switch {
	case err != nil && ctx.Err() != nil:
		return fail(errcode.Cancelled, "the call was cancelled before its process started", "")
	case errors.Is(err, nsinit.ErrUnavailable) && res.TimedOut && !nsinit.MayHaveRun(err):
		// The timeout stopped the call while its sandbox was built or checked (a slow git
		// snapshot, a loaded host): what failed after that is the kill's doing. (A sandbox the
		// host lost, whose program may have run, stays a sandbox failure that says so.)
		return fail(errcode.Timeout, fmt.Sprintf("the command did not finish within %s: it was stopped before its sandbox could start it", timeout),
			"raise the tool's timeout_ms, or see what makes its sandbox slow to start on this host (the git rule walks a writable workspace before the command starts)")
	case errors.Is(err, nsinit.ErrUnavailable):
		return Envelope{Error: sandboxError(b, err)}
	case err != nil:
		return fail(errcode.NotInstalled, fmt.Sprintf("%s could not be started: %v", b.CLI.Bin, err), "check the binary is installed and executable")
	}
	exit := res.ExitCode
	rec.ExitCode = &exit
	if res.Canceled {
		return Envelope{ExitCode: &exit, Error: &Error{Code: errcode.Cancelled, Message: "the call was cancelled; its processes were stopped", ExitCode: &exit}}
	}
	r := newRedactor(secretValues(b, h.opts.LookupEnv, usedSecrets))
	stdout, stderr := res.Stdout, res.Stderr
	if res.StdoutTruncated { // the capture limit may have cut a value, leaving its start
		stdout = []byte(r.cutTail(string(stdout)))
	}
	if res.StderrTruncated {
		stderr = []byte(r.cutTail(string(stderr)))
	}
	proc := output.Process{ExitCode: res.ExitCode, Stdout: stdout, Stderr: stderr,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated, TimedOut: res.TimedOut}
	out := output.Parse(conv, proc)
	if !out.OK && len(r) > 0 {
		// A failure's message is the streams' last lines and its stderr an excerpt: cut from the
		// redacted streams, so that no part of a value (a PEM key's last lines) survives the cut.
		proc.Stdout, proc.Stderr = []byte(r.text(string(stdout))), []byte(r.text(string(stderr)))
		out = output.Parse(conv, proc)
	}
	if out.OK {
		if s := t.OutputSchema(); s != nil {
			if err := s.Validate(out.Value); err != nil {
				return Envelope{ExitCode: &exit, Error: &Error{Code: errcode.OutputInvalid, ExitCode: &exit,
					Message: "the command succeeded but its output does not match the tool's outputs schema: " + firstCause(err),
					Hint:    "the bundle's outputs schema does not describe what this version of the CLI prints; report it to the bundle's author"}}
			}
		}
		return Envelope{OK: true, Value: r.value(out.Value), ExitCode: &exit, Truncated: res.StdoutTruncated}
	}
	f := out.Failure
	if res.Exhausted != "" {
		return Envelope{ExitCode: &exit, Error: exhaustedError(res, &exit, r.text(r.cutHead(f.Stderr)))}
	}
	e := &Error{Code: f.Code, Message: r.text(f.Message), Hint: f.Hint, ExitCode: &exit, Stderr: r.text(r.cutHead(f.Stderr)),
		Category: f.Category, Retryable: f.Retryable, Fallback: f.Fallback, RetryAfterMS: f.RetryAfterMS}
	if res.TimedOut {
		e.Message = fmt.Sprintf("the command did not finish within %s and was stopped", timeout)
		// Redacted whole, then cut: a secret across the cut would otherwise leave in part.
		e.PartialStdout = partialStdout([]byte(r.text(string(stdout))))
	}
	switch {
	case f.Category == output.CategoryPermission && f.Path != "" && pol != nil:
		e.Hint = r.text(pol.Explain(f.Path))
	case f.Category == output.CategoryAuthentication:
		e.Hint = "the CLI reports that it is not logged in or that its credentials expired; " + loginHint(b)
	}
	if h.expired(b, scope, exit, rec.UserID) {
		e.Code, e.Category = errcode.AuthRequired, "authentication"
		e.Hint = "the CLI's login expired; " + loginHint(b)
	}
	return Envelope{ExitCode: &exit, Error: e}
}

// maxPartialStdout bounds Error.PartialStdout: a timed-out call's first bytes of stdout.
const maxPartialStdout = 1 << 20

// partialStdout is the start of a timed-out call's stdout, at most maxPartialStdout bytes, cut at
// a line end (else a character boundary).
func partialStdout(out []byte) string {
	if len(out) <= maxPartialStdout {
		return string(out)
	}
	out = out[:maxPartialStdout]
	if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
		return string(out[:i+1])
	}
	return strings.ToValidUTF8(string(out), "")
}

// lifecycle checks setup (in scope, the caller's) and login (in loginScope, see LoginUser) before a
// call (when the host has a setup engine and an auth machine) and adds what setup persisted to the
// call's environment and the values to redact.
func (h *Host) lifecycle(ctx context.Context, b *manifest.Bundle, scope, loginScope lifecycle.Scope, lenv lifecycle.Env, env *[]string, sensitive *[]string) *Error {
	if h.opts.Setup != nil && len(b.CLI.Setup) > 0 {
		pending, err := h.opts.Setup.Pending(b, scope)
		if err != nil {
			return &Error{Code: errcode.Internal, Message: "reading the setup ledger: " + err.Error()}
		}
		if len(pending) > 0 {
			var ids []string
			for _, p := range pending {
				ids = append(ids, p.ID)
			}
			return &Error{Code: errcode.SetupRequired, Message: fmt.Sprintf("%s's setup is not complete: pending steps %s", b.ID(), strings.Join(ids, ", ")),
				Hint: fmt.Sprintf("run: clihostctl setup %s --workspace %s", b.ID(), scope.Workspace)}
		}
		persisted, err := h.opts.Setup.PersistedEnv(b, scope)
		if err != nil {
			return &Error{Code: errcode.Internal, Message: "reading the values setup persisted: " + err.Error()}
		}
		for k, v := range persisted {
			*env = setEnv(*env, k, v)
			*sensitive = append(*sensitive, v)
		}
	}
	if h.opts.Auth != nil && b.CLI.Auth != nil && b.CLI.Auth.Login != nil {
		st, err := h.opts.Auth.BeforeCall(ctx, b, loginScope, lenv)
		if err != nil {
			return &Error{Code: errcode.AuthRequired, Message: "the login state could not be checked: " + err.Error(), Hint: loginHint(b)}
		}
		if st.Phase != authstate.Authed {
			msg := fmt.Sprintf("%s is not logged in (%s)", b.ID(), st.Phase)
			if st.Reason != "" {
				msg += ": " + st.Reason
			}
			return &Error{Code: errcode.AuthRequired, Message: msg, Hint: loginHint(b), Category: "authentication"}
		}
	}
	return nil
}

// expired reports whether exit means the login expired, moving the state machine (which writes
// the cli.auth_expired audit record) or, without one, writing the record here.
func (h *Host) expired(b *manifest.Bundle, scope lifecycle.Scope, exit int, user string) bool {
	if h.opts.Auth != nil {
		matched, _ := h.opts.Auth.Expired(b, scope, exit)
		return matched
	}
	if !expired(b, exit) {
		return false
	}
	h.audit.write(AuthExpired{Type: "cli.auth_expired", CLIID: b.ID(), UserID: user, TS: timestamp(time.Now())})
	return true
}

// LoginUser is the user whose login of a CLI a call by caller uses. A host that is not root runs
// every CLI as its own user, with one HOME, so what a CLI's login writes there (gh's hosts.yml)
// serves every caller: the login is the host user's, kept in its scope, whoever calls. On a root
// host each caller's CLIs run as that caller, with its own HOME and its own login.
func LoginUser(caller string) string {
	if os.Geteuid() == 0 {
		return caller
	}
	return hostUser()
}

// hostUser is this process's user name, or its uid when it has none.
var hostUser = sync.OnceValue(func() string { return userName(os.Geteuid()) })

func loginHint(b *manifest.Bundle) string {
	if a := b.CLI.Auth; a != nil && a.Login != nil {
		return fmt.Sprintf("log in: clihostctl login %s (runs %q)", b.ID(), a.Login.Cmd)
	}
	return "log the CLI in"
}

// setEnv sets k=v in env, replacing an existing entry.
func setEnv(env []string, k, v string) []string {
	prefix := k + "="
	for i, e := range env {
		if strings.HasPrefix(e, prefix) {
			env[i] = prefix + v
			return env
		}
	}
	return append(env, prefix+v)
}

// progress calls report every ProgressEvery until the returned stop is called.
func (h *Host) progress(report func(time.Duration)) (stop func()) {
	if report == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(h.opts.ProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				report(time.Since(start))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func expired(b *manifest.Bundle, exit int) bool {
	a := b.CLI.Auth
	if a == nil || a.Expiry == nil {
		return false
	}
	return a.Expiry.Detect == fmt.Sprintf("exit_code:%d", exit)
}

// secretReadError is the error of a call whose secret could not be read (err, nil: none): a
// setup step's failure (an expired oauth token whose refresh failed) as that step reports it.
func secretReadError(b *manifest.Bundle, err error) *Error {
	if err == nil {
		return nil
	}
	var se *setup.StepError
	if errors.As(err, &se) {
		return &Error{Code: se.Code, Message: fmt.Sprintf("%s: %s", b.ID(), se.Message), Hint: se.Hint}
	}
	return &Error{Code: errcode.Internal, Message: fmt.Sprintf("reading %s's secrets: %v", b.ID(), err)}
}

func expandError(err error) *Error {
	e, ok := err.(*argv.Error)
	if !ok {
		return &Error{Code: errcode.Internal, Message: err.Error()}
	}
	if e.Code == errcode.SecretMissing {
		return &Error{Code: errcode.SetupRequired, Message: e.Message, Hint: e.Hint}
	}
	return &Error{Code: e.Code, Message: e.Message, Hint: e.Hint, Pointer: e.Pointer}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// secretValues lists the values that must not reach a result: the secrets used and the values of
// the bundle's auth.state.env variables.
func secretValues(b *manifest.Bundle, lookup func(string) (string, bool), used []string) []string {
	vals := append([]string(nil), used...)
	if a := b.CLI.Auth; a != nil && a.State != nil {
		for _, name := range a.State.Env {
			if v, ok := lookup(name); ok {
				vals = append(vals, v)
			}
		}
	}
	return vals
}
