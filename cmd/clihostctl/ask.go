package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/output"
)

// attempt is one call of one provider.
type attempt struct {
	Provider string `json:"provider"`
	Attempt  int    `json:"attempt"`
	OK       bool   `json:"ok"`
	MS       int64  `json:"ms"`
	// Code is the host's error code (upstream_error, timeout, not_installed, …) when the call failed.
	Code errcode.Code `json:"code,omitempty"`
	// Skipped says the provider was not called: it was never set up (not installed, setup or login
	// missing), or its circuit breaker is open. The chain goes on to the next provider.
	Skipped bool `json:"skipped,omitempty"`
	// Partial says the call ran out of time after printing part of an answer (in the result's
	// content when no provider answered in full).
	Partial bool `json:"partial,omitempty"`
	*output.ProviderError
}

// askResult is what `ask --json` prints.
type askResult struct {
	OK       bool   `json:"ok"`
	Provider string `json:"provider,omitempty"`
	Content  string `json:"content"`
	// Partial says Content is the part of an answer a provider printed before its deadline: no
	// provider answered in full (OK is false).
	Partial   bool         `json:"partial,omitempty"`
	Usage     output.Usage `json:"usage"`
	Estimated bool         `json:"estimated"`
	Attempts  []attempt    `json:"attempts"`
	Error     *askError    `json:"error,omitempty"`
	Warnings  []string     `json:"warnings,omitempty"`
	// Via is "clihostd" when the calls went through the daemon, "in-process" otherwise.
	Via   string `json:"via"`
	MS    int64  `json:"ms"`
	start time.Time
}

// askError says why ask gave up.
type askError struct {
	Category string `json:"category"`
	Message  string `json:"message"`
	Provider string `json:"provider"`
}

type askOptions struct {
	*globalOptions
	hostOptions
	providers   []string
	model       string
	maxAttempts int
	backoff     time.Duration
	maxWait     time.Duration
	timeout     time.Duration // one provider's time, its retries and waits included
	deadline    time.Duration // the whole ask's time
	jsonOut     bool
	words       []string // the prompt's words; none or "-" reads it from stdin
}

// The defaults of ask's deadlines: a provider gets three minutes (its own retries are capped in
// its bundle, see docs/providers.md), the whole chain ten.
const (
	defaultProviderTimeout = 3 * time.Minute
	defaultAskDeadline     = 10 * time.Minute
	// askSlack is how long past --deadline ask waits for a call stopped at its limit to end
	// (runner.DefaultGrace between SIGTERM and SIGKILL, and the sandbox's teardown) and report.
	askSlack = 5 * time.Second
)

// newAskCmd is clihostctl ask; runF, when set, runs instead of runAsk (tests).
func newAskCmd(g *globalOptions, runF func(*askOptions) error) *cobra.Command {
	o := &askOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "ask --providers A,B,C PROMPT",
		Short: "Run a prompt through agent-CLI provider bundles, retrying and falling back by error class",
		Long: `Ask calls each provider bundle's ask tool (metadata.provider.tool) with {"prompt": PROMPT} (and
{"model": --model} when given), parses its output (metadata.provider.format: text, json or
stream-json) and prints the answer. The calls go through clihostd when one runs (its sandbox,
secrets, audit log and the providers' circuit breakers apply), else through the in-process host
(sandboxed like any call).

A failed call is classified (see clihostctl output classify): where the class says retry (rate_limit,
network, server, timeout) the same provider is called again, after the wait the error names
("retry after 30 seconds"; 1s for a rate limit that names none) or an exponential backoff, at most
--max-attempts times; where it says fallback (quota, network, server, timeout, not_found, local,
unknown) the next provider is tried; where it says neither (authentication, validation,
configuration, and a rate limit whose retries ran out) ask stops. A provider that was never set up
(not installed, not loaded, setup or login missing) or whose circuit breaker is open is skipped.

Each provider has --timeout for all its calls and waits, and the whole ask --deadline; a call
stopped at either is classified from what it printed (a CLI still retrying a dead network is
network) and not retried. When no provider answers in full, the longest partial answer a timed-out
call printed is returned, marked partial.

PROMPT is the arguments joined by spaces; "-" or none reads it from stdin.
Exit status: 0 when a provider answered, 1 when none did (also with a partial answer), 2 on bad
usage.`,
		Example: `  clihostctl ask --providers claude,gemini,codex "Summarise README.md in one sentence"
  git diff | clihostctl ask --providers codex --model gpt-5-codex --timeout 90s --json -`,
		RunE: func(_ *cobra.Command, args []string) error {
			o.words = args
			if runF != nil {
				return runF(o)
			}
			return runAsk(o)
		},
	}
	cmd.Flags().StringSliceVar(&o.providers, "providers", nil, "provider bundles to try, in order (comma-separated or repeated)")
	cmd.Flags().StringVar(&o.model, "model", "", "the model, passed to each provider's model input (providers without one are skipped)")
	cmd.Flags().IntVar(&o.maxAttempts, "max-attempts", 3, "calls of one provider at most, counting the first")
	cmd.Flags().DurationVar(&o.backoff, "backoff", time.Second, "the first wait before a retry whose error names none (doubled each time)")
	cmd.Flags().DurationVar(&o.maxWait, "max-wait", time.Minute, "the longest single wait before a retry")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultProviderTimeout, "one provider's time: all its calls and the waits between them")
	cmd.Flags().DurationVar(&o.deadline, "deadline", defaultAskDeadline, "the whole ask's time, across providers")
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, "print the whole result (provider, attempts, usage) as JSON")
	o.addFlags(cmd.Flags())
	return cmd
}

// readPrompt is the prompt from the arguments or stdin, and checks the flags.
func (o *askOptions) readPrompt() (string, error) {
	prompt := strings.Join(o.words, " ")
	if len(o.words) == 0 || prompt == "-" {
		data, err := io.ReadAll(io.LimitReader(o.io.In, maxProviderInput))
		if err != nil {
			return "", err
		}
		prompt = string(data)
	}
	switch {
	case strings.TrimSpace(prompt) == "":
		return "", usageError{errors.New("ask needs a prompt (arguments, or - for stdin)")}
	case len(o.providers) == 0:
		return "", usageError{errors.New("ask needs --providers")}
	case o.maxAttempts < 1:
		return "", usageError{errors.New("--max-attempts must be at least 1")}
	case o.timeout <= 0 || o.deadline <= 0:
		return "", usageError{errors.New("--timeout and --deadline must be positive")}
	}
	return prompt, nil
}

// runAsk runs the prompt through o.providers and prints the answer.
func runAsk(o *askOptions) error {
	prompt, err := o.readPrompt()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The calls are bounded by their timeout_ms where they run; this bounds the rest (a daemon
	// that stops answering), leaving a stopped call the time to end and report.
	ctx, cancel := context.WithTimeout(ctx, o.deadline+askSlack)
	defer cancel()
	pb, closeFn, err := o.backend(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("clihostd did not answer within the ask's deadline (%s): %w", o.deadline, err)
	}
	if err != nil {
		return err
	}
	defer closeFn()
	res := askProviders(ctx, pb, o, prompt)
	if o.jsonOut {
		if err := writeProviderJSON(o.io.Out, res); err != nil {
			return err
		}
	} else if res.OK || res.Partial {
		fmt.Fprintln(o.io.Out, res.Content)
	}
	if !res.OK {
		if !o.jsonOut {
			if res.Partial {
				fmt.Fprintf(o.io.ErrOut, "clihostctl: ask: the answer above is partial (%s ran out of time)\n", res.Provider)
			}
			fmt.Fprintf(o.io.ErrOut, "clihostctl: ask: %s: %s: %s\n", res.Error.Provider, res.Error.Category, res.Error.Message)
		}
		return exitError{1}
	}
	return nil
}

// backend is clihostd when one answers (and no bundle folder or audit file was named for this
// run, as for call), else the in-process host.
func (o *askOptions) backend(ctx context.Context) (providerBackend, func(), error) {
	if len(o.bundleDirs) == 0 && o.audit == "" {
		ws, err := o.workspaceDir()
		if err != nil {
			return nil, nil, err
		}
		c := o.client()
		if _, err := c.Providers(ctx, ""); err == nil {
			return &daemonProviders{c: c, workspace: ws}, func() {}, nil
		} else if !errors.Is(err, control.ErrNoDaemon) {
			return nil, nil, err
		}
	}
	h, caller, closeFn, err := o.openHost(o.globalOptions)
	if err != nil {
		return nil, nil, err
	}
	return &hostProviders{h: h, caller: caller}, closeFn, nil
}

// askRun is one ask in progress: its deadline and what it has learnt.
type askRun struct {
	o        *askOptions
	pb       providerBackend
	prompt   string
	deadline time.Time
	res      askResult
	last     *askError
	partial  output.ProviderResult // the longest partial answer of a timed-out call
	partialP string                // its provider
}

// askProviders runs the prompt through the providers in order (see newAskCmd for the rules).
func askProviders(ctx context.Context, pb providerBackend, o *askOptions, prompt string) askResult {
	r := &askRun{o: o, pb: pb, prompt: prompt, res: askResult{start: time.Now(), Attempts: []attempt{}, Via: pb.via()}}
	r.deadline = r.res.start.Add(o.deadline)
	r.chain(ctx)
	if !r.res.OK && r.partial.Content != "" {
		r.res.Partial, r.res.Provider, r.res.Content = true, r.partialP, r.partial.Content
		r.res.Usage, r.res.Estimated = r.partial.Usage, r.partial.Estimated
	}
	if !r.res.OK {
		if r.last == nil {
			r.last = &askError{Category: output.CategoryConfiguration, Message: "no provider was named"}
		}
		r.res.Error = r.last
	}
	r.res.MS = time.Since(r.res.start).Milliseconds()
	return r.res
}

// chain tries the providers in order until one answers (r.res.OK) or ask must stop (r.last says
// why).
func (r *askRun) chain(ctx context.Context) {
	for _, name := range r.o.providers {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if time.Until(r.deadline) <= 0 {
			r.last = &askError{Category: output.CategoryTimeout, Message: fmt.Sprintf("the ask's deadline (%s) passed before %s was tried", r.o.deadline, name), Provider: name}
			return
		}
		if r.provider(ctx, name) {
			return
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			r.last = &askError{Category: output.CategoryTimeout, Message: fmt.Sprintf("the ask's deadline (%s) passed while %s was called", r.o.deadline, name), Provider: name}
			return
		}
		if ctx.Err() != nil {
			r.last = &askError{Category: "cancelled", Message: "ask was interrupted", Provider: name}
			return
		}
	}
}

// provider calls one provider until it answers, its retries or time run out, or its error says
// to stop; true when ask is done (an answer, or an error that stops the chain).
func (r *askRun) provider(ctx context.Context, name string) bool {
	end := time.Now().Add(r.o.timeout)
	if end.After(r.deadline) {
		end = r.deadline
	}
	for n := 1; ; n++ {
		pr, a, warnings := r.pb.call(ctx, name, r.prompt, r.o.model, max(time.Until(end), time.Millisecond))
		a.Attempt = n
		r.res.Attempts = append(r.res.Attempts, a)
		r.res.Warnings = append(r.res.Warnings, warnings...)
		if a.OK {
			r.res.OK, r.res.Provider, r.res.Content, r.res.Usage, r.res.Estimated = true, name, pr.Content, pr.Usage, pr.Estimated
			return true
		}
		if a.Partial && len(pr.Content) > len(r.partial.Content) {
			r.partial, r.partialP = pr, name
		}
		pe := a.ProviderError
		r.last = &askError{Category: pe.Category, Message: pe.Message, Provider: name}
		if ctx.Err() != nil || a.Skipped {
			r.note(name, n, pe.Category, "skipped")
			return false
		}
		if pe.ShouldRetry && n < r.o.maxAttempts {
			wait := retryWait(pe, n, r.o)
			if time.Until(end) <= wait { // no time left for another call
				r.note(name, n, pe.Category, "out of time; falling back")
				return !pe.ShouldFallback
			}
			r.note(name, n, pe.Category, "retrying in "+wait.String())
			select {
			case <-ctx.Done():
				return false
			case <-time.After(wait):
			}
			continue
		}
		if pe.ShouldFallback {
			r.note(name, n, pe.Category, "falling back")
			return false
		}
		return true // neither retry nor fallback: stop
	}
}

// note tells the person at the terminal what happened to an attempt (not with --json).
func (r *askRun) note(name string, n int, category, what string) {
	if !r.o.jsonOut {
		fmt.Fprintf(r.o.io.ErrOut, "ask: %s attempt %d: %s; %s\n", name, n, category, what)
	}
}

// retryWait is the wait the error names, else backoff·2^(n-1), at most --max-wait.
func retryWait(pe *output.ProviderError, n int, o *askOptions) time.Duration {
	wait := time.Duration(pe.RetryAfterMS) * time.Millisecond
	if wait <= 0 {
		wait = o.backoff << (n - 1)
	}
	if wait > o.maxWait || wait < 0 {
		wait = o.maxWait
	}
	return wait
}

// providerBackend makes the calls of provider bundles: the in-process host or clihostd.
type providerBackend interface {
	// call makes one call of the named provider's tool with the prompt (and model, when set),
	// stopped after timeout, and reads its answer.
	call(ctx context.Context, name, prompt, model string, timeout time.Duration) (output.ProviderResult, attempt, []string)
	via() string
}

// hostProviders calls providers through the in-process host.
type hostProviders struct {
	h      *host.Host
	caller host.Caller
}

func (p *hostProviders) via() string { return "in-process" }

func (p *hostProviders) call(ctx context.Context, name, prompt, model string, timeout time.Duration) (output.ProviderResult, attempt, []string) {
	start := time.Now()
	b, err := p.h.Bundle(name)
	if err != nil {
		category := output.CategoryNotFound
		if strings.Contains(err.Error(), "lint errors") {
			category = output.CategoryConfiguration
		}
		return skipped(name, errcode.NotFound, category, err.Error())
	}
	spec, _ := output.ProviderOf(b)
	input, a := providerInput(name, spec.Model, prompt, model)
	if a != nil {
		return output.ProviderResult{}, *a, nil
	}
	env := p.h.Call(ctx, b, spec.Tool, input, p.caller, host.CallOptions{Timeout: timeout})
	return readAnswer(name, spec.Format, env, prompt, start)
}

// daemonProviders calls providers through clihostd's control API.
type daemonProviders struct {
	c         *control.Client
	workspace string
}

func (p *daemonProviders) via() string { return "clihostd" }

func (p *daemonProviders) call(ctx context.Context, name, prompt, model string, timeout time.Duration) (output.ProviderResult, attempt, []string) {
	start := time.Now()
	ps, err := p.c.Providers(ctx, name)
	if err != nil || len(ps) != 1 {
		msg := fmt.Sprintf("clihostd has no provider bundle %s", name)
		if err != nil {
			msg = err.Error()
		}
		return skipped(name, errcode.NotFound, output.CategoryNotFound, msg)
	}
	spec := ps[0]
	input, a := providerInput(name, spec.Model, prompt, model)
	if a != nil {
		return output.ProviderResult{}, *a, nil
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return skipped(name, errcode.InputInvalid, output.CategoryValidation, err.Error())
	}
	env, err := p.c.Call(ctx, control.CallRequest{Bundle: spec.Bundle, Tool: spec.Tool, Input: raw, Workspace: p.workspace,
		TimeoutMS: max(timeout.Milliseconds(), 1)})
	if err != nil {
		pe := output.ClassifyProvider(err.Error(), 0)
		return output.ProviderResult{}, attempt{Provider: name, MS: time.Since(start).Milliseconds(), Code: errcode.Internal, ProviderError: &pe}, nil
	}
	return readAnswer(name, spec.Format, env, prompt, start)
}

// providerInput is the tool's input; a provider without a model input cannot honour --model and
// is skipped (an attempt is returned then).
func providerInput(name string, hasModel bool, prompt, model string) (map[string]any, *attempt) {
	input := map[string]any{output.ProviderPromptInput: prompt}
	if model == "" {
		return input, nil
	}
	if !hasModel {
		_, a, _ := skipped(name, errcode.InputInvalid, output.CategoryConfiguration,
			fmt.Sprintf("provider %s has no model input, so --model %s cannot be passed to it", name, model))
		return nil, &a
	}
	input[output.ProviderModelInput] = model
	return input, nil
}

// skipped is the attempt of a provider that was not called.
func skipped(name string, code errcode.Code, category, message string) (output.ProviderResult, attempt, []string) {
	pe := output.ClassifyProvider("", 0)
	pe.Category, pe.ShouldRetry, pe.ShouldFallback, pe.RetryAfterMS, pe.Message = category, false, true, 0, message
	return output.ProviderResult{}, attempt{Provider: name, Code: code, Skipped: true, ProviderError: &pe}, nil
}

// callProvider makes one in-process call of a provider bundle's tool and reads its answer
// (clihostctl health --probe).
func callProvider(ctx context.Context, h *host.Host, caller host.Caller, name, prompt string) (output.ProviderResult, attempt, []string) {
	return (&hostProviders{h: h, caller: caller}).call(ctx, name, prompt, "", 0)
}

// readAnswer reads a provider call's envelope: the answer, or the failure classified. A call that
// fails, or succeeds with an error in its output and no answer, is a failure; a call stopped at
// its time limit keeps the part of the answer it printed (Partial) and is classified from it, and
// so does one whose output the host cut at its capture limit (local: fall back).
func readAnswer(name, format string, env host.Envelope, prompt string, start time.Time) (output.ProviderResult, attempt, []string) {
	a := attempt{Provider: name, MS: time.Since(start).Milliseconds()}
	if !env.OK {
		a.Code = env.Error.Code
		if env.Error.Code == errcode.Timeout {
			r, _ := output.ParseProvider(format, []byte(env.Error.PartialStdout))
			pe := output.ClassifyTimeout(env.Error.PartialStdout, env.Error.Stderr)
			a.ProviderError, a.Partial = &pe, r.Content != ""
			return estimate(r, prompt), a, env.Warnings
		}
		pe := classifyEnvelope(env.Error)
		a.ProviderError, a.Skipped = &pe, neverSetUp(env.Error.Code)
		return output.ProviderResult{}, a, env.Warnings
	}
	text, ok := env.Value.(string)
	if !ok {
		raw, _ := json.Marshal(env.Value)
		text = string(raw)
	}
	r, err := output.ParseProvider(format, []byte(text))
	if err != nil {
		pe := output.ProviderError{Category: output.CategoryConfiguration, Message: fmt.Sprintf("bundle %s: metadata.provider.format: %v", name, err)}
		a.Code, a.ProviderError = errcode.BundleInvalid, &pe
		return output.ProviderResult{}, a, env.Warnings
	}
	if r.Error != "" && r.Content == "" {
		pe := output.ClassifyProvider(r.Error, 0)
		a.Code, a.ProviderError = errcode.ProviderError, &pe
		return r, a, env.Warnings
	}
	if env.Truncated { // the host cut the output at its capture limit: what is left is part of an answer
		pe := output.ProviderError{Category: output.CategoryLocal, ShouldFallback: true,
			Message: "the answer was longer than the host's output capture limit and was cut; ask for a shorter answer"}
		a.Code, a.ProviderError, a.Partial = errcode.ResourceExhausted, &pe, r.Content != ""
		return estimate(r, prompt), a, env.Warnings
	}
	a.OK = true
	return estimate(r, prompt), a, env.Warnings
}

// estimate fills in the input tokens of an estimated usage from the prompt.
func estimate(r output.ProviderResult, prompt string) output.ProviderResult {
	if r.Estimated {
		r.Usage.InputTokens = output.EstimateTokens(prompt)
	}
	return r
}

// neverSetUp says the host refused the call because the provider was never set up on this host
// (not installed, setup pending, no login) or its circuit breaker is open: the chain skips it.
func neverSetUp(code errcode.Code) bool {
	switch code {
	case errcode.NotInstalled, errcode.SetupRequired, errcode.AuthRequired, errcode.ProviderUnavailable:
		return true
	}
	return false
}

// classifyEnvelope classifies a failed call. The host's own refusals map to the protocol's
// categories (not_installed is a missing command: not_found; a wrong version, a broken bundle, a
// missing setup or sandbox: configuration; a login: authentication; bad input: validation); a
// failed process is classified from its error output and exit code. A provider that was never set
// up (see neverSetUp) falls back whatever its category.
func classifyEnvelope(e *host.Error) output.ProviderError {
	pe := classifyHostError(e)
	if neverSetUp(e.Code) {
		pe.ShouldRetry, pe.ShouldFallback, pe.RetryAfterMS = false, true, 0
	}
	return pe
}

func classifyHostError(e *host.Error) output.ProviderError {
	exit := 0
	if e.ExitCode != nil {
		exit = *e.ExitCode
	}
	var text string
	switch e.Code {
	case errcode.NotInstalled:
		text = "command_not_found"
	case errcode.VersionMismatch, errcode.VersionCheckFailed, errcode.BundleInvalid, errcode.SetupRequired, errcode.SandboxUnavailable:
		text = "invalid_config"
	case errcode.AuthRequired:
		text = "not_authenticated"
	case errcode.InputInvalid:
		text = "invalid_request"
	case errcode.Timeout, errcode.Killed:
		text = "timed_out"
	case errcode.ProviderUnavailable:
		text = "service_unavailable"
	case errcode.NotFound:
		if e.ExitCode == nil { // the bundle has no such tool
			text = "invalid_config"
		}
	}
	if text != "" {
		pe := output.ClassifyProvider(text, exit)
		pe.Message = strings.TrimSpace(string(e.Code) + ": " + e.Message)
		return pe
	}
	text = e.Stderr
	if text == "" {
		text = e.Message
	}
	if e.Code != errcode.UpstreamError && e.Code != "" {
		text = string(e.Code) + "\n" + text // a named exit code (usage_error, quota, …) says something too
	}
	return output.ClassifyProvider(text, exit)
}
