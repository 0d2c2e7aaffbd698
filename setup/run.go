package setup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox"
)

// runState is one Run in progress.
type runState struct {
	e         *Engine
	b         *manifest.Bundle
	s         lifecycle.Scope
	env       lifecycle.Env
	ans       Answerer
	o         RunOptions
	persisted map[string]string  // env values persisted so far, set on every command
	hidden    []string           // persisted env values of sensitive steps: redacted from output
	cur       manifest.SetupStep // the step being run
}

// Run runs b's setup steps for s in declared order and returns the ledger afterwards.
//
// A step already in the ledger is not run again unless opts.Force, or opts.Only names it; with
// Only, just the named steps run. For each step, skip_if runs first: its exit code matching
// (default 0) records the step as done and skipped. Then, by kind:
//
//   - cmd: runs the command (timeout_ms, default 60 s; interactive on a pseudo-terminal); a
//     non-zero exit, timeout or signal is setup_failed. Its trimmed stdout is the value persist sees.
//   - prompt: the value comes from opts.Values, else ans.Ask; select choices are the static list
//     or options.cmd's `value<TAB>label` lines; booleans are normalised to "true"/"false"; an empty
//     answer takes the default.
//   - external: the value comes from opts.Values, else from a single-use loopback callback
//     (callback.param, default "code"; callback.timeout_ms, default 600 s) whose URL ans.Visit
//     shows.
//   - oauth: the access token comes from opts.Values, else from the flow the step's oauth block
//     declares (authorization code with PKCE through ans.Visit and a loopback callback, or the
//     device flow through a DeviceCodeShower; oauth.timeout_ms, default 600 s). It is stored under
//     the step's secret_slug, its refresh token and expiry beside it (FreshSecret).
//
// The value then goes where persist says (env and secret_slug into the encrypted secret store,
// cmd by running it with ${value}), a prompt/external/oauth value is kept for ${input.<id>}, and
// the step is recorded as done in one store transaction.
//
// The first failure stops the pipeline with a *StepError (errcode.SetupFailed) naming the step; later
// steps do not run. A step that needs an answer when ans is nil and Values has none stops it with
// errcode.SetupRequired listing the pending steps. The returned statuses are the ledger at that point.
func (e *Engine) Run(ctx context.Context, b *manifest.Bundle, s lifecycle.Scope, env lifecycle.Env, ans Answerer, opts RunOptions) ([]StepStatus, error) {
	l, err := e.ledger(b, s)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(b.CLI.Setup))
	for i, st := range b.CLI.Setup {
		ids[i] = st.ID
	}
	for _, id := range append(slices.Collect(maps.Keys(opts.Values)), opts.Only...) {
		if !slices.Contains(ids, id) {
			return nil, fmt.Errorf("setup: %s has no setup step %q (it has: %s)", b.Key(), id, strings.Join(ids, ", "))
		}
	}
	persisted, err := e.PersistedEnv(b, s)
	if err != nil {
		return nil, err
	}
	r := &runState{e: e, b: b, s: s, env: env, ans: ans, o: opts, persisted: persisted}
	for _, st := range b.CLI.Setup {
		if v, ok := persisted[envOf(st)]; ok && sensitive(st) {
			r.hidden = append(r.hidden, v)
		}
	}
	for i, st := range b.CLI.Setup {
		if !r.selected(st, l) {
			continue
		}
		r.cur = st
		if err := r.step(ctx, st); err != nil {
			var se *StepError
			if errors.As(err, &se) && se.Code == errcode.SetupRequired {
				se.Pending = r.pendingFrom(i, l)
				se.Message = fmt.Sprintf("%s needs answers before it can be used; pending steps: %s", b.Key(), strings.Join(se.Pending, ", "))
				se.Hint = fmt.Sprintf("run `clihostctl setup %s` (or answer up front with --value %s=VALUE)", b.ID(), st.ID)
			}
			status, serr := e.Status(b, s)
			if serr != nil {
				err = errors.Join(err, serr)
			}
			return status, err // a *StepError as is, for callers that type-switch
		}
	}
	return e.Status(b, s)
}

// envOf is the variable a step persists its value in ("" when none).
func envOf(st manifest.SetupStep) string {
	if st.Persist == nil {
		return ""
	}
	return st.Persist.Env
}

// selected reports whether this Run runs st: the steps Only names, else those not done (all with
// Force).
func (r *runState) selected(st manifest.SetupStep, l ledger) bool {
	if len(r.o.Only) > 0 {
		return slices.Contains(r.o.Only, st.ID)
	}
	_, done := l.Steps[st.ID]
	return !done || r.o.Force
}

// pendingFrom lists the ids of the steps from index i on that this Run would still have run.
func (r *runState) pendingFrom(i int, l ledger) []string {
	var out []string
	for _, st := range r.b.CLI.Setup[i:] {
		if r.selected(st, l) {
			out = append(out, st.ID)
		}
	}
	return out
}

// step runs one step to completion (ledger entry written) or a *StepError.
func (r *runState) step(ctx context.Context, st manifest.SetupStep) error {
	if st.SkipIf != nil && st.SkipIf.Cmd != "" {
		skip, err := r.skipIf(ctx, st)
		if err != nil {
			return err
		}
		if skip {
			return r.e.markDone(r.s, st.ID, true)
		}
	}
	var value string
	var err error
	switch st.Kind {
	case manifest.StepCmd:
		value, err = r.cmd(ctx, st)
	case manifest.StepPrompt:
		value, err = r.prompt(ctx, st)
	case manifest.StepExternal:
		value, err = r.callback(ctx, st)
	case manifest.StepOAuth:
		value, err = r.oauth(ctx, st)
	default:
		err = failed(st, fmt.Sprintf("unknown step kind %q", st.Kind), "kind is cmd, prompt, external or oauth", nil)
	}
	if err != nil {
		return err
	}
	if strings.ContainsRune(value, 0) {
		return failed(st, "the value contains a NUL byte", "give a value without NUL", nil)
	}
	if st.Kind == manifest.StepOAuth {
		if err := r.store(st, prefixSecret+st.SecretSlug, value); err != nil {
			return err
		}
	}
	if err := r.persist(ctx, st, value); err != nil {
		return err
	}
	if st.Kind != manifest.StepCmd {
		if err := r.store(st, prefixInput+st.ID, value); err != nil {
			return err
		}
	}
	return r.e.markDone(r.s, st.ID, false)
}

// store seals value as name, as a setup_failed on error.
func (r *runState) store(st manifest.SetupStep, name, value string) error {
	if err := r.e.putSecret(r.s, name, value); err != nil {
		return failed(st, fmt.Sprintf("cannot store the value: %v", err), "check the state directory and the secrets key file", err)
	}
	return nil
}

// skipIf runs skip_if.cmd and reports whether its exit code says the step is done already. A run
// that timed out or died of a signal says nothing: the step runs.
func (r *runState) skipIf(ctx context.Context, st manifest.SetupStep) (bool, error) {
	res, _, _, err := r.runLine(ctx, st, st.SkipIf.Cmd, nil, timeoutMS(st.SkipIf.TimeoutMS, DefaultSkipIfTimeout), false)
	if err != nil {
		return false, err
	}
	return !res.TimedOut && res.Signal == "" && res.ExitCode == st.SkipIf.ExitCode, nil
}

// cmd runs a cmd step and returns its trimmed stdout.
func (r *runState) cmd(ctx context.Context, st manifest.SetupStep) (string, error) {
	res, w, timeout, err := r.runLine(ctx, st, st.Cmd, nil, timeoutMS(st.TimeoutMS, DefaultCmdTimeout), st.Interactive)
	if err != nil {
		return "", err
	}
	if err := mustSucceed(st, st.Cmd, w, timeout, res); err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// required is the StepError of a step that needs an answer nobody can give here; Run completes
// its message.
func required(st manifest.SetupStep) *StepError {
	return &StepError{StepID: st.ID, Code: errcode.SetupRequired, Message: "needs an answer"}
}

// answerErr turns an Answerer's error into a StepError.
func answerErr(ctx context.Context, st manifest.SetupStep, err error) error {
	if ctx.Err() != nil {
		return failed(st, fmt.Sprintf("cancelled: %v", context.Cause(ctx)), "run setup again", err)
	}
	return failed(st, fmt.Sprintf("no answer: %v", err), "run setup again", err)
}

// prompt asks a prompt step and returns the normalised answer.
func (r *runState) prompt(ctx context.Context, st manifest.SetupStep) (string, error) {
	typ := st.Type
	if typ == "" {
		typ = "text"
	}
	var choices []Choice
	switch typ {
	case "text", "secret":
	case "boolean":
		choices = []Choice{{"true", "Yes"}, {"false", "No"}}
	case "select":
		var err error
		if choices, err = r.choices(ctx, st); err != nil {
			return "", err
		}
	default:
		return "", failed(st, fmt.Sprintf("unknown prompt type %q", typ), "type is text, select, boolean or secret", nil)
	}
	v, ok := r.o.Values[st.ID]
	if !ok {
		if r.ans == nil {
			return "", required(st)
		}
		var err error
		if v, err = r.ans.Ask(ctx, st, choices); err != nil {
			return "", answerErr(ctx, st, err)
		}
	}
	if v == "" {
		v = st.Default
	}
	if v == "" {
		return "", failed(st, "no value was given and the step has no default", "answer the prompt", nil)
	}
	switch typ {
	case "boolean":
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "yes", "y", "1", "on":
			return "true", nil
		case "false", "no", "n", "0", "off":
			return "false", nil
		}
		return "", failed(st, "the answer is not a yes/no value", "answer true or false", nil)
	case "select":
		if !slices.ContainsFunc(choices, func(c Choice) bool { return c.Value == v }) {
			vals := make([]string, len(choices))
			for i, c := range choices {
				vals[i] = c.Value
			}
			return "", failed(st, "the answer is not one of the options", "pick one of: "+strings.Join(vals, ", "), nil)
		}
	}
	return v, nil
}

// choices returns a select prompt's options: the static list, or options.cmd's stdout, one
// `value<TAB>label` (or just `value`) a line.
func (r *runState) choices(ctx context.Context, st manifest.SetupStep) ([]Choice, error) {
	var out []Choice
	switch {
	case st.Options == nil:
	case len(st.Options.Static) > 0:
		for _, v := range st.Options.Static {
			out = append(out, Choice{Value: v, Label: v})
		}
	case st.Options.Cmd != "":
		res, w, timeout, err := r.runLine(ctx, st, st.Options.Cmd, nil, timeoutMS(st.Options.TimeoutMS, DefaultOptionsTimeout), false)
		if err != nil {
			return nil, err
		}
		if err := mustSucceed(st, st.Options.Cmd, w, timeout, res); err != nil {
			return nil, err
		}
		for line := range strings.Lines(string(res.Stdout)) {
			value, label, _ := strings.Cut(strings.TrimRight(line, "\r\n"), "\t")
			if value = strings.TrimSpace(value); value == "" {
				continue
			}
			if label = strings.TrimSpace(label); label == "" {
				label = value
			}
			out = append(out, Choice{Value: value, Label: label})
		}
	}
	if len(out) == 0 {
		return nil, failed(st, "the select prompt has no options", "give options as a list or an options.cmd that prints value<TAB>label lines", nil)
	}
	return out, nil
}

// runLine expands and runs a manifest command line (on a pseudo-terminal when tty). value is what
// ${value} stands for (nil: not allowed).
func (r *runState) runLine(ctx context.Context, st manifest.SetupStep, line string, value *string, timeout time.Duration, tty bool) (runner.Result, words, time.Duration, error) {
	w, err := r.expand(line, value)
	if err != nil {
		return runner.Result{}, w, timeout, failed(st, err.Error(), "fix the command in the manifest", err)
	}
	res, err := r.spawn(ctx, st, line, w, timeout, tty)
	return res, w, timeout, err
}

// persist puts a step's value where persist says.
func (r *runState) persist(ctx context.Context, st manifest.SetupStep, value string) error {
	p := st.Persist
	if p == nil {
		return nil
	}
	n := 0
	for _, v := range []string{p.Env, p.SecretSlug, p.Cmd} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return failed(st, fmt.Sprintf("persist declares %d of env, secret_slug and cmd", n), "declare exactly one", nil)
	}
	switch {
	case p.Env != "":
		if _, refused := sandbox.Env(nil, nil, map[string]string{p.Env: value}); len(refused) > 0 {
			return failed(st, fmt.Sprintf("persist.env %q is not a variable clihost passes to CLIs", p.Env), "pick another variable name", nil)
		}
		if err := r.store(st, prefixEnv+p.Env, value); err != nil {
			return err
		}
		r.persisted[p.Env] = value
		if sensitive(st) {
			r.hidden = append(r.hidden, value)
		}
	case p.SecretSlug != "":
		return r.store(st, prefixSecret+p.SecretSlug, value)
	default:
		res, w, timeout, err := r.runLine(ctx, st, p.Cmd, &value, timeoutMS(st.TimeoutMS, DefaultCmdTimeout), false)
		if err != nil {
			return err
		}
		return mustSucceed(st, p.Cmd, w, timeout, res)
	}
	return nil
}

// callback gets an external step's value: from Values, else through a loopback callback whose
// URL ans.Visit shows.
func (r *runState) callback(ctx context.Context, st manifest.SetupStep) (string, error) {
	if v, ok := r.o.Values[st.ID]; ok {
		if v == "" {
			return "", failed(st, "the given value is empty", "give the value the flow produces", nil)
		}
		return v, nil
	}
	if r.ans == nil {
		return "", required(st)
	}
	param, timeout := DefaultCallbackParam, DefaultCallbackTimeout
	if st.Callback != nil {
		if st.Callback.Param != "" {
			param = st.Callback.Param
		}
		timeout = timeoutMS(st.Callback.TimeoutMS, DefaultCallbackTimeout)
	}
	cb, err := startCallback(r.e.CallbackHost, param, r.o.CallbackUIDs)
	if err != nil {
		return "", failed(st, err.Error(), "set the engine's CallbackHost to a loopback address", err)
	}
	defer cb.close()
	u, err := visitURL(st.URL, cb.url)
	if err != nil {
		return "", failed(st, err.Error(), "fix the step's url in the manifest", err)
	}
	return r.await(ctx, st, cb, timeout, func(ctx context.Context) error { return r.ans.Visit(ctx, st, u) })
}

// await runs show (which tells the person where to go) and waits, at most timeout, for cb's one
// accepted request; show's context is cancelled once it arrived.
func (r *runState) await(ctx context.Context, st manifest.SetupStep, cb *callback, timeout time.Duration, show func(context.Context) error) (string, error) {
	vctx, cancel := context.WithCancel(ctx)
	visited := make(chan error, 1)
	go func() { visited <- show(vctx) }()
	defer func() {
		cancel()
		if visited != nil {
			<-visited
		}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case res := <-cb.result:
			if res.err != nil {
				return "", failed(st, res.err.Error(), "run setup again and complete the flow", res.err)
			}
			return res.value, nil
		case err := <-visited:
			visited = nil // a nil channel never receives: keep waiting for the callback
			if err != nil {
				return "", answerErr(ctx, st, err)
			}
		case <-timer.C:
			return "", failed(st, fmt.Sprintf("no callback arrived within %s", timeout), "run setup again and complete the flow in time", nil)
		case <-ctx.Done():
			return "", failed(st, fmt.Sprintf("cancelled: %v", context.Cause(ctx)), "run setup again", context.Cause(ctx))
		}
	}
}
