package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/container"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// runnerRefusal is the error of a call whose bundle's runner engine this host does not run in
// clihost's kernel sandbox: in-process is refused; sandbox is refused when a container cannot run
// the tool here (h.callContainer decides the rest). Nil for the subprocess engine.
func runnerRefusal(b *manifest.Bundle, t *manifest.ToolEntry) *Error {
	switch b.CLI.Runner.Engine() {
	case manifest.EngineSubprocess:
		return nil
	case manifest.EngineInProcess:
		return &Error{Code: errcode.RunnerUnavailable, Message: fmt.Sprintf("bundle %s asks for runner engine: in-process, which clihost refuses for CLIs", b.Key()),
			Hint: "remove runner.engine (the default, subprocess, runs the CLI in clihost's kernel sandbox)"}
	case manifest.EngineSandbox:
		switch {
		case b.CLI.Runner.Image() == "":
			return &Error{Code: errcode.RunnerUnavailable, Message: "engine: sandbox without an image", Hint: "name the OCI image in runner.image"}
		case len(t.Tool.Runner.Steps) > 0:
			return &Error{Code: errcode.RunnerUnavailable, Message: "a tool with runner.steps cannot run under engine: sandbox", Hint: "use runner.argv, or engine: subprocess"}
		case b.CLI.Sandbox.Network != nil && len(b.CLI.Sandbox.Network.Egress) > 0:
			return &Error{Code: errcode.RunnerUnavailable, Message: "engine: sandbox runs with no network; network.egress cannot be filtered in a container",
				Hint: "use engine: subprocess for a CLI that needs the network"}
		}
		return nil
	}
	return &Error{Code: errcode.RunnerUnavailable, Message: fmt.Sprintf("unknown runner engine %q", b.CLI.Runner.Engine()), Hint: "use subprocess or sandbox"}
}

// lookPathIn returns a LookPath over the directories of pathVar (the host's PATH as Options.LookupEnv
// reads it), not the process's own environment.
func lookPathIn(pathVar string) func(string) (string, error) {
	return func(name string) (string, error) {
		for _, dir := range filepath.SplitList(pathVar) {
			if !filepath.IsAbs(dir) {
				continue
			}
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s: not found on PATH", name)
	}
}

// ContainerRuntime returns the container runtime engine: sandbox calls use on this host, or the
// error naming what is missing.
func (h *Host) ContainerRuntime(ctx context.Context) (container.Runtime, []string, error) {
	pathVar, _ := h.opts.LookupEnv("PATH")
	env := container.Env(h.opts.LookupEnv)
	rt, err := container.Find(ctx, lookPathIn(pathVar), env)
	return rt, env, err
}

// callContainer runs tool t of b, whose runner asks for engine: sandbox, in an OCI container (see
// package container), or refuses it with runner_unavailable naming what this host lacks. It never
// runs the CLI on the host. The bundle's login and setup steps do not run here (they would run
// on the host); ${secrets.NAME} come from setup's store as for any call.
func (h *Host) callContainer(ctx context.Context, b *manifest.Bundle, t *manifest.ToolEntry, input map[string]any, c Caller, env []string, rec *Invoked, opts CallOptions) Envelope {
	image, timeout, l := b.CLI.Runner.Image(), callTimeout(b, t), h.limitsFor(b, t)
	// The policy's paths are real: so is the workspace the mounts compare them with (the call's
	// scope keeps the name the caller gave).
	ws, err := filepath.EvalSymlinks(c.Workspace)
	if err != nil {
		return fail(errcode.InputInvalid, "workspace: "+err.Error(), "pass an existing directory as the workspace")
	}
	rt, rtEnv, e := h.usableRuntime(ctx, image, l)
	if e != nil {
		return Envelope{Error: e}
	}
	// The kernel sandbox's policy of the call decides what of the workspace the container may
	// write and what it must not see (deny paths, protected bundle folders), and its git rule
	// runs around the call as for engine: subprocess. The runtime's client is the "binary".
	scratch := slices.Clone(env)
	plan, pol, e := h.confine(b, t, rt.Path, c, &scratch)
	if e != nil {
		return Envelope{Error: e}
	}
	who, idErr := h.identityFor(c.Workspace, c.Peer, "")
	if idErr != nil {
		return Envelope{Error: idErr}
	}
	scope := lifecycle.Scope{Bundle: b.Key(), Workspace: c.Workspace, User: c.User}
	var used, secretVars []string
	// The SECRETS.md inventory's variables reach the container as a kernel-sandbox call's
	// environment: through the runtime's own environment (--env=NAME), never its command line
	// or the env file on disk; a required one unset refuses the call here.
	if e := h.secretEnv(ctx, b, t, scope, &secretVars, &used); e != nil {
		return Envelope{Error: e}
	}
	args, stdin, conv, e := h.containerArgv(b, t, input, scope, &used)
	if e != nil {
		return Envelope{Error: e}
	}
	rec.ArgvCount = len(args)
	dir, err := os.MkdirTemp("", containerDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return fail(errcode.Internal, "a folder for the container's env file: "+err.Error(), "")
	}
	defer os.RemoveAll(dir)
	if dir, err = filepath.EvalSymlinks(dir); err != nil { // the mount check refuses links in sources
		return fail(errcode.Internal, "a folder for the container's env file: "+err.Error(), "")
	}
	envFile, err := container.WriteEnvFile(dir, containerEnv(env))
	if err != nil {
		return fail(errcode.InputInvalid, err.Error(), "")
	}
	mounts, err := workspaceMounts(plan, ws, dir)
	if err != nil {
		return fail(errcode.Internal, "the container's mounts: "+err.Error(), "")
	}
	name := "clihost-" + rec.CallID
	spec := container.Spec{Name: name, Image: image, Workspace: ws, Mounts: mounts, UID: who.id.UID, GID: who.id.GID, Groups: who.id.Groups, EnvFile: envFile, Dir: dir, SecretEnv: envNames(secretVars),
		Argv: append([]string{b.CLI.Bin}, args...), Stdin: stdin != nil, Timeout: timeout,
		Limits: container.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, NoFile: l.NoFile, FileSize: l.FileSize, CPU: l.CPU, TmpfsBytes: l.TmpfsBytes}}
	createArgs, err := rt.Args(spec)
	if err != nil {
		return fail(errcode.RunnerUnavailable, err.Error(), "run the call in another workspace")
	}
	// The create names the secrets (--env=NAME) and takes their values from its own environment.
	if e := prepareContainer(ctx, rt, append(slices.Clone(rtEnv), secretVars...), createArgs, spec); e != nil {
		return Envelope{Error: e, Warnings: sweep(pol)}
	}
	stop := h.progress(opts.Progress)
	start := time.Now()
	res, err := runner.Run(ctx, runner.Command{Path: rt.Path, Args: rt.StartArgs(spec), Dir: ws, Env: rtEnv, Timeout: timeout, Stdin: stdin})
	stop()
	warnings := sweep(pol)
	h.auditSweep(b, rec.CallID, warnings)
	if err != nil || res.TimedOut || res.Canceled || res.Signal != "" {
		if rmErr := rt.Remove(rtEnv, name); rmErr != nil {
			warnings = append(warnings, "the call's container could not be removed: "+rmErr.Error())
		}
	}
	warnings = append(warnings, clearSetuid(mounts, start)...)
	if e := runtimeFailure(rt, image, b.CLI.Bin, res, err); e != nil {
		return Envelope{Error: e, Warnings: warnings}
	}
	if res.Exhausted == "" && !res.TimedOut && !res.Canceled && res.ExitCode == 137 {
		res.Exhausted = containerKilled(l)
	}
	out := h.finish(ctx, b, t, res, err, conv, timeout, scope, rec, used, pol)
	if opts.Debug && err == nil {
		debugStreams(out.Error, res, newRedactor(secretValues(b, h.opts.LookupEnv, used)))
	}
	out.Warnings = append(out.Warnings, warnings...)
	return out
}

// prepareContainer creates the container of spec and checks, before its program starts, that the
// runtime mounted the files the policy checked (package container's Prepare), or removes it and
// returns runner_unavailable.
func prepareContainer(ctx context.Context, rt container.Runtime, rtEnv, createArgs []string, spec container.Spec) *Error {
	pins, err := container.PinMounts(spec.Mounts)
	if err == nil {
		err = rt.Prepare(ctx, rtEnv, createArgs, spec, pins)
		pins.Close()
	}
	if err == nil {
		return nil
	}
	if rmErr := rt.Remove(rtEnv, spec.Name); rmErr != nil {
		err = fmt.Errorf("%w (and the container could not be removed: %v)", err, rmErr)
	}
	if errors.Is(err, container.ErrNotInImage) {
		return &Error{Code: errcode.NotInstalled, Message: fmt.Sprintf("%s cannot be run in image %s: %v", spec.Argv[0], spec.Image, err), Hint: "build the image with the CLI on its PATH"}
	}
	return &Error{Code: errcode.RunnerUnavailable, Message: "the call's container was not started: " + err.Error(),
		Hint: "a process changed the workspace while the call was set up; run the call again, or check that " + rt.Name + " run works on this host"}
}

// usableRuntime returns the container runtime a call with limits l runs image in, and the
// runtime's environment, or runner_unavailable naming what is missing: a runtime, the image, or
// the enforcement of l's memory and process limits.
func (h *Host) usableRuntime(ctx context.Context, image string, l isolation.Limits) (container.Runtime, []string, *Error) {
	rt, rtEnv, err := h.ContainerRuntime(ctx)
	if err != nil {
		return rt, nil, &Error{Code: errcode.RunnerUnavailable, Message: err.Error(),
			Hint: "install podman (apt-get install podman) or start docker's engine; or use engine: subprocess, clihost's kernel sandbox"}
	}
	if rt.Name != "podman" {
		return rt, nil, &Error{Code: errcode.RunnerUnavailable, Message: "engine: sandbox needs podman: " + rt.Name + " cannot set up a container's mounts without starting its program, so clihost cannot check them first",
			Hint: "install podman (apt-get install podman); or use engine: subprocess, clihost's kernel sandbox"}
	}
	if err := rt.ImagePresent(ctx, rtEnv, image); err != nil {
		return rt, nil, &Error{Code: errcode.RunnerUnavailable, Message: err.Error(),
			Hint: fmt.Sprintf("make the image present on this host (%s pull %s, or %s load); clihost never pulls", rt.Name, image, rt.Name)}
	}
	if l.MemoryBytes > 0 || l.Pids > 0 {
		if err := rt.CgroupLimits(ctx, rtEnv); err != nil {
			return rt, nil, &Error{Code: errcode.RunnerUnavailable, Message: "the call's memory and process limits cannot be enforced in a container here: " + err.Error(),
				Hint: "run clihostd as root (rootful podman), on a cgroup v2 host, or use engine: subprocess (the kernel sandbox enforces them)"}
		}
	}
	return rt, rtEnv, nil
}

// containerArgv expands tool t's argv and stdin for input (${secrets.NAME} from setup's store for
// scope, each value used appended to *used, for redaction) and returns the arguments after bin
// (bin_args, the output convention's flags, the tool's argv) and the convention.
func (h *Host) containerArgv(b *manifest.Bundle, t *manifest.ToolEntry, input map[string]any, scope lifecycle.Scope, used *[]string) ([]string, []byte, output.Convention, *Error) {
	secrets := func(name string) (string, bool) {
		if h.opts.Setup == nil {
			return "", false
		}
		v, ok, _ := h.opts.Setup.Secret(scope, name)
		if ok {
			*used = append(*used, v)
		}
		return v, ok
	}
	conv := output.For(b.CLI, t.Tool)
	args, err := argv.ExpandValues(t.Tool.Runner.Parsed, argv.Values{Input: input, Secrets: secrets, Schema: t.Tool.Inputs})
	if err != nil {
		return nil, nil, conv, expandError(err)
	}
	stdin, e := expandStdin(t.Tool.Runner.ParsedStdin, argv.Values{Input: input, Secrets: secrets})
	if e != nil {
		return nil, nil, conv, e
	}
	return append(slices.Clone(b.CLI.BinArgs), conv.Args(args)...), stdin, conv, nil
}

// workspaceMounts turns the kernel sandbox's plan of a call into the container's view of workspace
// ws: the workspace itself when the plan lets the program read it (read-write when it lets it
// write it), else an empty directory in its place with the readable and writable roots inside it
// bound over it; each writable root inside it bound read-write, each protected path read-only over
// itself, and each denied path that exists masked by an empty read-only directory or file made in
// scratch. Nothing outside the workspace is mounted. A nil plan (the operator turned the kernel
// sandbox off) gives the workspace read-write.
func workspaceMounts(plan *isolation.Plan, ws, scratch string) ([]container.Mount, error) {
	if plan == nil {
		return []container.Mount{{Source: ws, Target: ws}}, nil
	}
	emptyDir, emptyFile := filepath.Join(scratch, "empty-dir"), filepath.Join(scratch, "empty-file")
	if err := os.Mkdir(emptyDir, 0o555); err != nil {
		return nil, err
	}
	if err := os.WriteFile(emptyFile, nil, 0o444); err != nil {
		return nil, err
	}
	inside := func(p string) bool { return strings.HasPrefix(p, ws+"/") }
	var mounts []container.Mount
	switch {
	case slices.Contains(plan.ReadWrite, ws):
		mounts = append(mounts, container.Mount{Source: ws, Target: ws})
	case slices.Contains(plan.ReadOnly, ws) || slices.Contains(plan.Exec, ws):
		mounts = append(mounts, container.Mount{Source: ws, Target: ws, ReadOnly: true})
	default:
		mounts = append(mounts, container.Mount{Source: emptyDir, Target: ws, ReadOnly: true})
		for _, p := range slices.Concat(plan.ReadOnly, plan.Exec) {
			if inside(p) {
				mounts = append(mounts, container.Mount{Source: p, Target: p, ReadOnly: true})
			}
		}
	}
	for _, p := range plan.ReadWrite {
		if inside(p) {
			mounts = append(mounts, container.Mount{Source: p, Target: p})
		}
	}
	for _, p := range plan.Protect {
		if inside(p) || p == ws {
			mounts = append(mounts, container.Mount{Source: p, Target: p, ReadOnly: true})
		}
	}
	for _, p := range plan.Deny {
		if !inside(p) && p != ws {
			continue
		}
		st, err := os.Lstat(p)
		if err != nil {
			continue // absent: the sweep removes what the call creates there (plan.Absent)
		}
		src := emptyFile
		if st.IsDir() {
			src = emptyDir
		}
		mounts = append(mounts, container.Mount{Source: src, Target: p, ReadOnly: true})
	}
	return mounts, nil
}

// clearSetuid clears the set-user-ID bit of every regular file in the writable mounts whose
// inode changed since start (a chmod sets its ctime): the container's seccomp profile lets the CLI
// set it, and the host does not mount the workspace nosuid, so whoever ran such a file later would
// run it as the call's uid (the kernel sandbox refuses that mode with seccomp). Each walk goes
// through an os.Root on the mount's source, so a symbolic link the CLI planted never leads it out.
// It returns the warnings of the files it changed, and of a walk it could not finish.
func clearSetuid(mounts []container.Mount, start time.Time) []string {
	since := start.Add(-time.Second) // ctime comes from the coarse clock
	var out []string
	for _, m := range mounts {
		if m.ReadOnly {
			continue
		}
		root, err := os.OpenRoot(m.Source)
		if err != nil {
			out = append(out, "could not check the workspace for set-user-ID files after the call: "+err.Error())
			continue
		}
		err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil || info.Mode()&fs.ModeSetuid == 0 || changedAt(info).Before(since) {
				return nil
			}
			if err := root.Chmod(p, info.Mode().Perm()|info.Mode()&(fs.ModeSetgid|fs.ModeSticky)); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			out = append(out, fmt.Sprintf("cleared the set-user-ID bit of %s, which the CLI set: whoever ran it would run it as the call's user", filepath.Join(m.Source, p)))
			return nil
		})
		root.Close()
		if err != nil {
			out = append(out, "could not clear a set-user-ID file after the call: "+err.Error())
		}
	}
	return out
}

// changedAt is info's inode change time (now when the platform does not say: the bit is cleared).
func changedAt(info fs.FileInfo) time.Time {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Now()
	}
	return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
}

// runtimeFailure is the error of a container run that failed in the runtime rather than in the CLI
// (exit statuses 125: the runtime's own error; 126: the program cannot be invoked; 127: not in the
// image), or nil.
func runtimeFailure(rt container.Runtime, image, bin string, res runner.Result, err error) *Error {
	stderr := strings.TrimSpace(string(res.Stderr))
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		return &Error{Code: errcode.RunnerUnavailable, Message: fmt.Sprintf("%s could not be started: %v", rt.Name, err), Hint: "check the container runtime: " + rt.Path}
	case err != nil || res.TimedOut || res.Canceled:
		return nil
	case res.ExitCode == 125 || (res.ExitCode == 126 && strings.Contains(stderr, "OCI")):
		return &Error{Code: errcode.RunnerUnavailable, Message: fmt.Sprintf("%s could not run the container: %s", rt.Name, stderr), Hint: "run clihostctl doctor; check that " + rt.Name + " run works on this host"}
	case res.ExitCode == 126 || res.ExitCode == 127:
		return &Error{Code: errcode.NotInstalled, Message: fmt.Sprintf("%s cannot be run in image %s: %s", bin, image, stderr), Hint: "build the image with the CLI on its PATH"}
	}
	return nil
}

// envNames are the names of NAME=VALUE entries.
func envNames(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		out = append(out, name)
	}
	return out
}

// containerKilled says which limits of l a container's CLI killed with SIGKILL (exit 137) may
// have reached: the memory limit (the OOM killer) and the CPU time limit (RLIMIT_CPU, whole
// seconds: the CLI is pid 1 of its container and ignores SIGXCPU, so the hard limit's SIGKILL
// ends it). The runtime does not say which, so both are named; "" when neither is set (a
// SIGKILL the CLI got some other way).
func containerKilled(l isolation.Limits) string {
	var limits []string
	if l.MemoryBytes > 0 {
		limits = append(limits, "memory limit "+nsinit.FormatBytes(l.MemoryBytes))
	}
	if l.CPU > 0 {
		limits = append(limits, fmt.Sprintf("CPU time limit %s", (l.CPU+time.Second-1)/time.Second*time.Second))
	}
	if len(limits) == 0 {
		return ""
	}
	return "the CLI was killed in its container (SIGKILL, exit 137) at a resource limit: " + strings.Join(limits, " or ") + " reached"
}

// containerEnv is the environment of the CLI inside the container: the call's, without PATH (the
// image's) and with HOME the container's /tmp unless the bundle set one.
func containerEnv(env []string) []string {
	var out []string
	home := false
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			continue
		case strings.HasPrefix(kv, "HOME="):
			home = true
		}
		out = append(out, kv)
	}
	if !home {
		out = append(out, "HOME=/tmp")
	}
	return out
}

// RunnerFindings reports what this host cannot honour of bundle b's runner block, as lint
// warnings at the line that asks for it (the image, needs.native; the bundle's id when unknown):
// engine: sandbox with no usable container runtime or without its image (rule runner-host; its
// calls are refused), and needs.native packages this host lacks (rule runner-needs-missing; asked
// of dpkg-query, on hosts that have it; names that are not Debian package names are
// runner-needs-name errors already and are not asked about).
func (h *Host) RunnerFindings(ctx context.Context, b *manifest.Bundle) manifest.Findings {
	if b.CLI == nil || b.CLI.Runner == nil {
		return nil
	}
	at := func(pos manifest.Pos, rule, msg, hint string) manifest.Finding {
		if pos.File == "" {
			pos = b.IDPos
		}
		return manifest.Finding{Pos: pos, Severity: manifest.SeverityWarning, Rule: rule, Message: msg, Hint: hint}
	}
	var out manifest.Findings
	r := b.CLI.Runner
	if r.Engine() == manifest.EngineSandbox && r.Image() != "" {
		rt, env, err := h.ContainerRuntime(ctx)
		switch {
		case err == nil && rt.Name != "podman":
			err = fmt.Errorf("engine: sandbox needs podman (%s cannot set up a container's mounts without starting its program)", rt.Name)
		case err == nil:
			err = rt.ImagePresent(ctx, env, r.Image())
		}
		if err != nil {
			out = append(out, at(b.RunnerImagePos, "runner-host", "this host cannot run the bundle's engine: sandbox, so its calls will be refused: "+err.Error(),
				"install podman (apt-get install podman) and make the image present, or use engine: subprocess"))
		}
	}
	if n := r.Needs(); n != nil && r.Engine() == manifest.EngineSubprocess && len(n.Native) > 0 {
		pathVar, _ := h.opts.LookupEnv("PATH")
		dpkg, err := lookPathIn(pathVar)("dpkg-query")
		if err != nil {
			return out
		}
		var missing []string
		for _, p := range manifest.NativeNeeds(b.CLI) {
			st, err := exec.CommandContext(ctx, dpkg, "-W", "-f=${Status}", "--", p).Output()
			if err != nil || !strings.Contains(string(st), "install ok installed") {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			out = append(out, at(b.RunnerNeedsPos, "runner-needs-missing", "needs.native packages not installed on this host: "+strings.Join(missing, ", "),
				"apt-get install "+strings.Join(missing, " ")))
		}
	}
	return out
}
