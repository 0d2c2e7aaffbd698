// Package errcode is the one list of clihost's error codes: the "code" of a failed call's error
// (MCP results, the control socket's envelopes and event streams, clihostctl's JSON). Each
// constant says what the code means, who produces it and what the caller should do; docs/errors.md
// renders the same list as a table (a test keeps the two together, and keeps raw string codes out
// of every other package).
//
// A bundle's exit_codes map may name further codes (a CLI's own "usage_error", "quota", …): those
// arrive as Code(name) and are not listed here unless clihost itself reacts to one.
package errcode

// Code is an error code as it appears on the wire: a short snake_case string.
type Code string

// The codes clihost produces or reacts to.
const (
	// InputInvalid: the tool's input does not match its schema, is not a JSON object, names a
	// workspace that is not a directory, or expands to an argument the argv template refuses.
	// Produced by host (validation, expansion), mcp and control (undecodable input), daemon (a bad
	// workspace). Fix the input; Pointer names the offending field.
	InputInvalid Code = "input_invalid"
	// Internal: clihost itself failed (a state file, a home directory, the setup ledger could not be
	// read). Produced by host and daemon. Not the caller's fault: check clihostd's log and state
	// directory.
	Internal Code = "internal"
	// NotFound: the bundle or tool does not exist (host, daemon), or the CLI reported a missing
	// object. Check the names: clihostctl status lists the loaded bundles.
	NotFound Code = "not_found"
	// NotInstalled: the bundle's binary is missing or could not be started. Produced by host (the
	// gate, steps) and daemon (install record). Run clihostctl install.
	NotInstalled Code = "not_installed"
	// VersionMismatch: the installed binary fails the bundle's version_check (or the check could not
	// run). Produced by host's gate. Install the version the bundle names, or fix the bundle.
	VersionMismatch Code = "version_mismatch"
	// VersionCheckFailed: the bundle's version command crashed before printing a version (a
	// non-zero exit, a signal or its timeout): the binary is there but does not start here. The
	// error carries its exit code and stderr's tail. Produced by host's gate. Read the stderr: a file
	// the sandbox refused, a missing runtime (node), a broken install; reinstalling another version
	// rarely helps.
	VersionCheckFailed Code = "version_check_failed"
	// BundleInvalid: the bundle has lint errors or a broken step, so its tools are not callable, or
	// a call would put a secret of its SECRETS.md on a command line or hand it to a tool its
	// access.bind does not grant it to. Produced by host; clihostctl ask also reports a provider
	// bundle that does not fit. Run clihostctl lint on the bundle.
	BundleInvalid Code = "bundle_invalid"
	// SetupRequired: the bundle's setup has pending steps, or a ${secrets.NAME} or a required
	// secret of its SECRETS.md it needs has no value. Produced by host and setup. Run clihostctl
	// setup, or clihostctl secret set as the hint says.
	SetupRequired Code = "setup_required"
	// SetupFailed: a setup step failed. Produced by setup (through daemon). Read the message, fix
	// the cause, run clihostctl setup again.
	SetupFailed Code = "setup_failed"
	// SecretMissing: a ${secrets.NAME} has no value. Produced by argv's expansion; host turns it
	// into SetupRequired before it reaches a caller.
	SecretMissing Code = "secret_missing"
	// AuthRequired: the CLI is not logged in, its credentials expired, or a login did not complete.
	// Produced by host (login state, the bundle's expiry detection), daemon (login) and by bundles
	// naming an exit code so. Run clihostctl login and retry.
	AuthRequired Code = "auth_required"
	// LoginRefused: the caller may not log in for another workspace's scope. Produced by daemon.
	// Log in as the workspace's user, or for your own workspace.
	LoginRefused Code = "login_refused"
	// WorkspaceDenied: the identity the call runs as may not use the workspace. Produced by host's
	// identity check, and for a workspace that is, holds or lies in the state directory, the sandbox
	// helper's or clihostd's folder, or the approval policy (host.OwnedOverlap). Follow the hint
	// (group access, the agent user, another workspace).
	WorkspaceDenied Code = "workspace_denied"
	// BinaryDenied: the identity the call runs as may not execute the bundle's binary. Produced by
	// host. Make the binary executable for that user.
	BinaryDenied Code = "binary_denied"
	// PathDenied: a path the bundle grants is not usable by the identity the call runs as.
	// Produced by host. Follow the hint.
	PathDenied Code = "path_denied"
	// PathTraversalBlocked: a path input leaves the workspace. Produced by host. Name a path inside
	// the workspace.
	PathTraversalBlocked Code = "path_traversal_blocked"
	// SandboxUnavailable: the kernel sandbox could not be built for the call. Produced by host.
	// Run clihostctl doctor; the hint names the missing kernel feature.
	SandboxUnavailable Code = "sandbox_unavailable"
	// RunnerUnavailable: the bundle's AIP-17 runner cannot be honoured on this host, so the CLI did
	// not run: engine: sandbox with no usable container runtime (podman, docker), its image absent,
	// or a tool shape a container cannot run (steps, network egress); engine: in-process, which is
	// refused for CLIs. Produced by host. Follow the hint (install podman, pull the image, or use
	// engine: subprocess).
	RunnerUnavailable Code = "runner_unavailable"
	// ResourceExhausted: the call hit a per-call resource limit (memory, processes, CPU, file size).
	// Produced by host. Narrow the request or raise the operator's limits.
	ResourceExhausted Code = "resource_exhausted"
	// RateLimited: the daemon runs as many calls at once as it allows: of this caller
	// (--max-calls-per-caller; a call whose sandbox did not end when it was killed, or whose
	// request hangs in the kernel, still counts), in total (--max-calls), or of calls their callers
	// went away from (16 × the larger of --max-calls and --max-calls-per-caller). Produced by host
	// (the daemon's bound). Nothing ran; retryable once one of the caller's calls has ended.
	RateLimited Code = "rate_limited"
	// Timeout: the call or the CLI did not finish in time (also a CLI's exit status 124). Produced by
	// host and output. Narrow the request or raise the tool's timeout_ms; retryable.
	Timeout Code = "timeout"
	// Killed: the CLI was killed by a signal (exit status 137 or a signal). Produced by output.
	// Retry; look at the limits if it repeats.
	Killed Code = "killed"
	// Cancelled: the caller cancelled the call; its processes were stopped. Produced by host.
	// Nothing to do.
	Cancelled Code = "cancelled"
	// ProviderError: a provider (an AI CLI clihostctl ask drives) reported an error in its output
	// without failing. Produced by clihostctl ask; its provider_error field classifies it. Follow
	// its category (quota, authentication, …).
	ProviderError Code = "provider_error"
	// UpstreamError: the CLI failed with an exit code the bundle does not name. Produced by output.
	// Read its stderr.
	UpstreamError Code = "upstream_error"
	// UsageError: a CLI rejected its arguments, by the exit code name bundles give that (git's 129,
	// aws's 252). Produced by bundles' exit_codes; output hints at the tool's inputs. Fix the input.
	UsageError Code = "usage_error"
	// OutputParseFailed: the CLI succeeded but its output is not the format the bundle declares.
	// Produced by output. Fix the bundle's output block.
	OutputParseFailed Code = "output_parse_failed"
	// OutputInvalid: the CLI's output does not match the tool's output schema. Produced by host.
	// Fix the bundle's outputs or the CLI's version.
	OutputInvalid Code = "output_invalid"
	// ApprovalRequired: the tool's approval class needs an operator's (or the MCP client's) yes;
	// Approval names the pending request. Produced by approval through host. Answer it (clihostctl
	// approve) and call again.
	ApprovalRequired Code = "approval_required"
	// ApprovalDenied: the operator or the user refused the call. Produced by approval. Do not retry
	// unchanged.
	ApprovalDenied Code = "approval_denied"
	// ApprovalInvalid: an approval answer or state that does not verify (forged, expired, another
	// call's). Produced by approval. Ask again.
	ApprovalInvalid Code = "approval_invalid"
	// InstallFailed: no install entry of the bundle installed its binary. Produced by daemon and
	// clihostctl install. Read the message; install the CLI by hand if need be.
	InstallFailed Code = "install_failed"
	// NeedsRoot: the install entries that would work need root and the daemon is not root. Produced
	// by daemon. Run clihostctl install under sudo (it runs those entries itself).
	NeedsRoot Code = "needs_root"
	// InsufficientResources: the host has less free disk (on the filesystem the install writes to)
	// or available memory than the bundle's requires.min_disk_mb or min_memory_mb. Produced by
	// install (through daemon). Free disk or memory (the message names both amounts), then install again.
	InsufficientResources Code = "insufficient_resources"
	// RecordRefused: the daemon would not record an install the caller ran as root (not root, wrong
	// entry, binary not found). Produced by daemon. Follow the hint.
	RecordRefused Code = "record_refused"
	// ProviderUnavailable: a provider bundle's circuit breaker is open: its recent calls failed one
	// after another, so the daemon refuses calls of its provider tool until the cool-down ends and a
	// probe call succeeds. Produced by daemon. Use another provider (clihostctl ask falls back), or
	// wait for the retry time clihostctl status shows.
	ProviderUnavailable Code = "provider_unavailable"
)

// All lists every code above, in the order docs/errors.md shows them.
var All = []Code{
	InputInvalid, Internal, NotFound, NotInstalled, VersionMismatch, VersionCheckFailed, BundleInvalid, SetupRequired,
	SetupFailed, SecretMissing, AuthRequired, LoginRefused, WorkspaceDenied, BinaryDenied, PathDenied,
	PathTraversalBlocked, SandboxUnavailable, RunnerUnavailable, ResourceExhausted, RateLimited, Timeout, Killed, Cancelled,
	ProviderError, UpstreamError, UsageError, OutputParseFailed, OutputInvalid, ApprovalRequired, ApprovalDenied,
	ApprovalInvalid, InstallFailed, NeedsRoot, InsufficientResources, RecordRefused, ProviderUnavailable,
}
