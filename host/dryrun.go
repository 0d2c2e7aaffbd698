package host

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
)

// DryRun is what a call would run, computed by Host.DryRun without running anything: no process
// of the CLI (not even its version check), no setup or login command, no approval asked.
type DryRun struct {
	Bundle string `json:"bundle"` // id@major
	Tool   string `json:"tool"`   // the TOOL.md id
	// Binary is the program the call would execute, resolved as a call resolves it (a vendored
	// binary, an installed copy, PATH); its version was not checked.
	Binary string `json:"binary"`
	// Argv is the exact command line, argv[0] the binary; a ${secrets.NAME} value is shown as
	// SecretPlaceholder(NAME), never the value.
	Argv []string `json:"argv,omitempty"`
	// Steps are, for a tool with runner.steps, each step's program and argv template (a step's
	// arguments may depend on the output of the steps before it, so they are not expanded).
	Steps [][]string `json:"steps,omitempty"`
	// Stdin says whether the call writes a standard input (runner.stdin); its content is not shown.
	Stdin bool `json:"stdin,omitempty"`
	// Env are the names of the variables the process would get (never their values), sorted.
	Env []string `json:"env"`
	// Cwd is the process's working directory: the workspace.
	Cwd string `json:"cwd"`
	// UID, GID and Groups are whom the process would run as (on a host that is not root: the
	// host's own user, in a user namespace); Home is its HOME.
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Groups []int  `json:"groups,omitempty"`
	Home   string `json:"home,omitempty"`
	// TimeoutMS is the call's wall-clock limit.
	TimeoutMS int64 `json:"timeout_ms"`
	// Engine is the runner engine (subprocess: clihost's kernel sandbox; sandbox: a container).
	Engine string `json:"engine"`
	// Policy is the compiled sandbox; nil when the operator turned the sandbox off.
	Policy *DryRunPolicy `json:"policy,omitempty"`
	// Approval is the tool's approval class (auto, on-mutate, always, policy:REF); the operator's
	// policy rules are applied only when the call is made.
	Approval string `json:"approval"`
	// NotChecked lists what a real call checks or does that the dry run did not.
	NotChecked []string `json:"not_checked"`
}

// DryRunPolicy is a compiled sandbox as the kernel would get it (isolation.Plan's lists).
type DryRunPolicy struct {
	Read    []string `json:"read"`  // readable (the runtime baseline and fs.read), recursively for folders
	Write   []string `json:"write"` // readable and writable roots
	Exec    []string `json:"exec"`  // the files that may be executed
	Deny    []string `json:"deny"`  // masked paths
	Protect []string `json:"protect,omitempty"`
	// Egress are the hosts the call may reach through clihost's proxies; empty: no network.
	Egress  []string     `json:"egress"`
	Ingress []string     `json:"ingress,omitempty"`
	Limits  DryRunLimits `json:"limits"`
	// MissingWriteRoots are the ~ folders fs.write declares that do not exist yet: a call creates
	// them before compiling; the dry run does not, so the lists above leave them out.
	MissingWriteRoots []string `json:"missing_write_roots,omitempty"`
}

// DryRunLimits are a call's resource limits (0: none).
type DryRunLimits struct {
	MemoryBytes int64 `json:"memory_bytes"`
	Pids        int64 `json:"pids"`
	CPUMS       int64 `json:"cpu_ms"`
	NoFile      int64 `json:"nofile"`
	FileSize    int64 `json:"file_size"`
	TmpfsBytes  int64 `json:"tmpfs_bytes"`
}

// dryRunLimits are l as DryRunLimits.
func dryRunLimits(l isolation.Limits) DryRunLimits {
	return DryRunLimits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUMS: l.CPU.Milliseconds(), NoFile: l.NoFile, FileSize: l.FileSize, TmpfsBytes: l.TmpfsBytes}
}

// nonNil is s, or an empty list for nil (a JSON [] rather than null).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// SecretPlaceholder is what a dry run's argv shows in place of the value of ${secrets.NAME}.
func SecretPlaceholder(name string) string { return "<secret " + name + ">" }

// dryRunNotChecked is what every dry run leaves to the call.
var dryRunNotChecked = []string{
	"the binary's version (version_check runs the CLI)",
	"setup and login state (their checks run commands)",
	"the approval policy's rules and any approval the call would wait for",
	"the values of secrets and of setup's persisted variables (only names are shown)",
}

// DryRun computes what calling tool of b with input (decoded JSON; defaults are filled in) as c
// would run: the input is validated, the binary resolved, argv expanded and the sandbox compiled,
// exactly as Call does; then it stops. It starts no process of the CLI (no version check, no
// setup, login or steps) and changes nothing on disk (see confineFor). The error is the one a call
// would have failed with before running anything.
func (h *Host) DryRun(b *manifest.Bundle, tool string, input map[string]any, c Caller) (*DryRun, *Error) {
	t := b.Tool(tool)
	if t == nil || t.Tool == nil {
		return nil, &Error{Code: errcode.NotFound, Message: fmt.Sprintf("bundle %s has no tool %q", b.Key(), tool), Hint: "tools: " + strings.Join(toolNames(b), ", ")}
	}
	if b.Findings.HasErrors() || t.Tool.Runner == nil || !t.Tool.Runner.Callable() || t.InputSchema() == nil {
		return nil, &Error{Code: errcode.BundleInvalid, Message: fmt.Sprintf("bundle %s has lint errors; its tools are not callable", b.Key()), Hint: "run: clihostctl lint " + b.Dir}
	}
	if input == nil {
		input = map[string]any{}
	}
	applyDefaults(t.Tool.Inputs, input)
	if e := validateInput(t.InputSchema(), input); e != nil {
		return nil, e
	}
	workspace, err := filepath.Abs(c.Workspace)
	if err != nil || !isDir(workspace) {
		return nil, &Error{Code: errcode.InputInvalid, Message: fmt.Sprintf("workspace %q is not a directory", c.Workspace), Hint: "pass an existing directory as the workspace"}
	}
	c.Workspace = workspace
	if e := checkPaths(t.Tool.Inputs, input, workspace); e != nil {
		return nil, e
	}
	if e := runnerRefusal(b, t); e != nil {
		return nil, e
	}
	d := &DryRun{Bundle: b.Key(), Tool: t.Tool.ID, Cwd: workspace, Engine: string(b.CLI.Runner.Engine()), Approval: approvalClass(t.Tool),
		TimeoutMS: callTimeout(b, t).Milliseconds(), NotChecked: slices.Clone(dryRunNotChecked)}
	if b.CLI.Runner.Engine() == manifest.EngineSandbox {
		d.NotChecked = append(d.NotChecked, "the container (engine: sandbox): its command line and mounts are built by the container engine when the call runs")
	}
	path, e := h.resolve(b)
	if e != nil {
		return nil, e
	}
	d.Binary = path
	eff := manifest.EffectiveSandbox(b.CLI.Sandbox, t.Tool.Sandbox)
	env := h.envOf(eff.Env)
	if e := h.dryRunArgv(d, b, t, input); e != nil {
		return nil, e
	}
	env = append(env, secretEnvNames(b, t)...)
	plan, pol, e := h.confineFor(b, t, path, c, &env, true)
	if e != nil {
		return nil, e
	}
	d.Env = slices.Compact(slices.Sorted(slices.Values(envNames(env))))
	if plan == nil {
		d.UID, d.GID = os.Geteuid(), os.Getegid()
		d.NotChecked = append(d.NotChecked, "the sandbox: it is OFF on this host (clihostd --sandbox=off); the CLI would run with the full rights of the host user")
		return d, nil
	}
	d.UID, d.GID, d.Groups, d.Home = plan.UID, plan.GID, plan.Groups, envValue(env, "HOME")
	if os.Geteuid() != 0 {
		d.UID, d.GID = os.Geteuid(), os.Getegid()
	}
	d.Policy = &DryRunPolicy{Read: nonNil(plan.ReadOnly), Write: nonNil(plan.ReadWrite), Exec: nonNil(plan.Exec), Deny: nonNil(plan.Deny), Protect: plan.Protect,
		Egress: []string{}, Limits: dryRunLimits(plan.Limits), MissingWriteRoots: missingWriteRoots(d.Home, b, t)}
	d.Policy.Egress = append(d.Policy.Egress, pol.Egress...)
	d.Policy.Ingress = slices.Clone(pol.Ingress)
	return d, nil
}

// dryRunArgv fills d's argv (or steps) as call would expand them, secrets shown by name.
func (h *Host) dryRunArgv(d *DryRun, b *manifest.Bundle, t *manifest.ToolEntry, input map[string]any) *Error {
	if len(t.Tool.Runner.Steps) > 0 {
		for _, s := range t.Tool.Runner.Steps {
			prog := s.Bin
			if prog == "" {
				prog = b.CLI.Bin
			}
			d.Steps = append(d.Steps, append([]string{prog}, s.Argv...))
		}
		d.NotChecked = append(d.NotChecked, "the steps' arguments (a step may use the output of the steps before it)")
		return nil
	}
	secrets := func(name string) (string, bool) { return SecretPlaceholder(name), true }
	args, err := argv.ExpandValues(t.Tool.Runner.Parsed, argv.Values{Input: input, Secrets: secrets, Schema: t.Tool.Inputs})
	if err != nil {
		return expandError(err)
	}
	if _, e := expandStdin(t.Tool.Runner.ParsedStdin, argv.Values{Input: input, Secrets: secrets}); e != nil {
		return e
	}
	d.Stdin = t.Tool.Runner.ParsedStdin != nil
	conv := output.For(b.CLI, t.Tool)
	d.Argv = append([]string{d.Binary}, append(slices.Clone(b.CLI.BinArgs), conv.Args(args)...)...)
	return nil
}

// secretEnvNames are the variables of b's SECRETS.md inventory bound to t, as NAME= entries: a
// call sets them from the secret store, which a dry run does not read (reading an oauth slot may
// refresh its token over the network).
func secretEnvNames(b *manifest.Bundle, t *manifest.ToolEntry) []string {
	var out []string
	for _, slot := range b.Secrets {
		if slot.BoundTo(t) {
			for _, v := range slot.Env {
				out = append(out, v.Name+"=")
			}
		}
	}
	return out
}

// approvalClass is a tool's approval class, auto when it declares none.
func approvalClass(t *manifest.Tool) string {
	if t.Approval == "" {
		return "auto"
	}
	return t.Approval
}

// missingWriteRoots are the ~ write roots of b's (and t's) sandbox that do not exist under home.
func missingWriteRoots(home string, b *manifest.Bundle, t *manifest.ToolEntry) []string {
	if home == "" {
		return nil
	}
	var out []string
	for _, rel := range homeWriteRoots(b, t) {
		p := filepath.Join(home, rel)
		if _, err := os.Lstat(p); err != nil {
			out = append(out, p)
		}
	}
	return out
}

// envValue is the value of name in env (KEY=VALUE), or "".
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}
