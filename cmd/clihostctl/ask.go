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

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
)

// A provider bundle says how `ask` uses it in its CLI.md metadata:
//
//	metadata:
//	  provider:
//	    tool: ask            # the tool that takes {"prompt": …} (default ask)
//	    format: stream-json  # how to read the tool's stdout: text, json or stream-json (default text)
const (
	defaultProviderTool = "ask"
	providerPromptInput = "prompt"
)

// providerSpec reads a bundle's metadata.provider block.
func providerSpec(b *manifest.Bundle) (tool, format string) {
	tool, format = defaultProviderTool, output.ProviderText
	if b.CLI == nil {
		return tool, format
	}
	p, _ := b.CLI.Metadata["provider"].(map[string]any)
	if s, _ := p["tool"].(string); s != "" {
		tool = s
	}
	if s, _ := p["format"].(string); s != "" {
		format = s
	}
	return tool, format
}

// attempt is one call of one provider.
type attempt struct {
	Provider string `json:"provider"`
	Attempt  int    `json:"attempt"`
	OK       bool   `json:"ok"`
	MS       int64  `json:"ms"`
	// Code is the host's error code (upstream_error, timeout, not_installed, …) when the call failed.
	Code errcode.Code `json:"code,omitempty"`
	*output.ProviderError
}

// askResult is what `ask --json` prints.
type askResult struct {
	OK        bool         `json:"ok"`
	Provider  string       `json:"provider,omitempty"`
	Content   string       `json:"content"`
	Usage     output.Usage `json:"usage"`
	Estimated bool         `json:"estimated"`
	Attempts  []attempt    `json:"attempts"`
	Error     *askError    `json:"error,omitempty"`
	Warnings  []string     `json:"warnings,omitempty"`
	MS        int64        `json:"ms"`
	start     time.Time
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
	maxAttempts int
	backoff     time.Duration
	maxWait     time.Duration
	jsonOut     bool
	words       []string // the prompt's words; none or "-" reads it from stdin
}

// newAskCmd is clihostctl ask; runF, when set, runs instead of runAsk (tests).
func newAskCmd(g *globalOptions, runF func(*askOptions) error) *cobra.Command {
	o := &askOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "ask --providers A,B,C PROMPT",
		Short: "Run a prompt through agent-CLI provider bundles, retrying and falling back by error class",
		Long: `Ask calls each provider bundle's ask tool (metadata.provider.tool) with {"prompt": PROMPT} through
the in-process host (sandboxed like any call), parses its output (metadata.provider.format: text,
json or stream-json) and prints the answer.

A failed call is classified (see clihostctl output classify): where the class says retry (rate_limit,
network, server, timeout) the same provider is called again, after the wait the error names
("retry after 30 seconds"; 1s for a rate limit that names none) or an exponential backoff, at most
--max-attempts times; where it says fallback (quota, network, server, timeout, not_found, unknown)
the next provider is tried; where it says neither (authentication, validation, configuration, and a
rate limit whose retries ran out) ask stops. A provider that is not installed is not_found.

PROMPT is the arguments joined by spaces; "-" or none reads it from stdin.
Exit status: 0 when a provider answered, 1 when none did, 2 on bad usage.`,
		Example: `  clihostctl ask --providers claude,gemini,codex "Summarise README.md in one sentence"
  git diff | clihostctl ask --providers codex --json -`,
		RunE: func(_ *cobra.Command, args []string) error {
			o.words = args
			if runF != nil {
				return runF(o)
			}
			return runAsk(o)
		},
	}
	cmd.Flags().StringSliceVar(&o.providers, "providers", nil, "provider bundles to try, in order (comma-separated or repeated)")
	cmd.Flags().IntVar(&o.maxAttempts, "max-attempts", 3, "calls of one provider at most, counting the first")
	cmd.Flags().DurationVar(&o.backoff, "backoff", time.Second, "the first wait before a retry whose error names none (doubled each time)")
	cmd.Flags().DurationVar(&o.maxWait, "max-wait", time.Minute, "the longest single wait before a retry")
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, "print the whole result (provider, attempts, usage) as JSON")
	o.addFlags(cmd.Flags())
	return cmd
}

// runAsk runs the prompt through o.providers and prints the answer.
func runAsk(o *askOptions) error {
	prompt := strings.Join(o.words, " ")
	if len(o.words) == 0 || prompt == "-" {
		data, err := io.ReadAll(io.LimitReader(o.io.In, maxProviderInput))
		if err != nil {
			return err
		}
		prompt = string(data)
	}
	if strings.TrimSpace(prompt) == "" {
		return usageError{errors.New("ask needs a prompt (arguments, or - for stdin)")}
	}
	if len(o.providers) == 0 {
		return usageError{errors.New("ask needs --providers")}
	}
	if o.maxAttempts < 1 {
		return usageError{errors.New("--max-attempts must be at least 1")}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h, caller, closeFn, err := o.openHost(o.globalOptions)
	if err != nil {
		return err
	}
	defer closeFn()
	res := askProviders(ctx, h, caller, o, prompt)
	if o.jsonOut {
		if err := writeProviderJSON(o.io.Out, res); err != nil {
			return err
		}
	} else if res.OK {
		fmt.Fprintln(o.io.Out, res.Content)
	}
	if !res.OK {
		if !o.jsonOut {
			fmt.Fprintf(o.io.ErrOut, "clihostctl: ask: %s: %s: %s\n", res.Error.Provider, res.Error.Category, res.Error.Message)
		}
		return exitError{1}
	}
	return nil
}

// askProviders runs the prompt through the providers in order (see newAskCmd for the rules).
func askProviders(ctx context.Context, h *host.Host, caller host.Caller, o *askOptions, prompt string) (res askResult) {
	res = askResult{start: time.Now(), Attempts: []attempt{}}
	defer func() { res.MS = time.Since(res.start).Milliseconds() }()
	var last *askError
	for _, name := range o.providers {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		for n := 1; ; n++ {
			r, a, warnings := callProvider(ctx, h, caller, name, prompt)
			a.Attempt = n
			res.Attempts = append(res.Attempts, a)
			res.Warnings = append(res.Warnings, warnings...)
			if a.OK {
				res.OK, res.Provider, res.Content, res.Usage, res.Estimated = true, name, r.Content, r.Usage, r.Estimated
				return res
			}
			pe := a.ProviderError
			last = &askError{Category: pe.Category, Message: pe.Message, Provider: name}
			if ctx.Err() != nil {
				last.Category, last.Message = "cancelled", "ask was interrupted"
				res.Error = last
				return res
			}
			if pe.ShouldRetry && n < o.maxAttempts {
				wait := retryWait(pe, n, o)
				if !o.jsonOut {
					fmt.Fprintf(o.io.ErrOut, "ask: %s attempt %d: %s; retrying in %s\n", name, n, pe.Category, wait)
				}
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
				continue
			}
			if pe.ShouldFallback {
				if !o.jsonOut {
					fmt.Fprintf(o.io.ErrOut, "ask: %s attempt %d: %s; falling back\n", name, n, pe.Category)
				}
				break
			}
			res.Error = last // neither retry nor fallback: stop
			return res
		}
	}
	if last == nil {
		last = &askError{Category: output.CategoryConfiguration, Message: "no provider was named"}
	}
	res.Error = last
	return res
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

// callProvider makes one call of a provider bundle's tool and reads its answer. A call that fails,
// or succeeds with an error in its output and no answer, comes back classified.
func callProvider(ctx context.Context, h *host.Host, caller host.Caller, name, prompt string) (output.ProviderResult, attempt, []string) {
	start := time.Now()
	a := attempt{Provider: name}
	b, err := h.Bundle(name)
	if err != nil {
		pe := output.ClassifyProvider("", 0)
		pe.Category, pe.ShouldRetry, pe.ShouldFallback = output.CategoryNotFound, false, true
		pe.Message = err.Error()
		if strings.Contains(err.Error(), "lint errors") {
			pe.Category, pe.ShouldFallback = output.CategoryConfiguration, false
		}
		a.Code, a.ProviderError = errcode.NotFound, &pe
		return output.ProviderResult{}, a, nil
	}
	tool, format := providerSpec(b)
	env := h.Call(ctx, b, tool, map[string]any{providerPromptInput: prompt}, caller, host.CallOptions{})
	a.MS = time.Since(start).Milliseconds()
	if !env.OK {
		a.Code = env.Error.Code
		pe := classifyEnvelope(env.Error)
		a.ProviderError = &pe
		return output.ProviderResult{}, a, env.Warnings
	}
	text, ok := env.Value.(string)
	if !ok {
		raw, _ := json.Marshal(env.Value)
		text = string(raw)
	}
	r, err := output.ParseProvider(format, []byte(text))
	if err != nil {
		pe := output.ProviderError{Category: output.CategoryConfiguration, Message: fmt.Sprintf("bundle %s: metadata.provider.format: %v", b.Key(), err)}
		a.Code, a.ProviderError = errcode.BundleInvalid, &pe
		return output.ProviderResult{}, a, env.Warnings
	}
	if r.Error != "" && r.Content == "" {
		pe := output.ClassifyProvider(r.Error, 0)
		a.Code, a.ProviderError = errcode.ProviderError, &pe
		return r, a, env.Warnings
	}
	if r.Estimated {
		r.Usage.InputTokens = output.EstimateTokens(prompt)
	}
	a.OK = true
	return r, a, env.Warnings
}

// classifyEnvelope classifies a failed call. The host's own refusals map to the protocol's
// categories (not_installed is a missing command: not_found; a wrong version, a broken bundle, a
// missing setup or sandbox: configuration; a login: authentication; bad input: validation); a
// failed process is classified from its error output and exit code.
func classifyEnvelope(e *host.Error) output.ProviderError {
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
